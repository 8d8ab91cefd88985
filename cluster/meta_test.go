package cluster

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"raftset/fsm"
	"raftset/internal/command"
)

// The fake state machine's node metadata, as fsm keeps it.

// setNode runs with f.mu held. The map is replaced, not changed, like
// fsm's, so a restored fakeState never shares it.
func (f *fakeFSM) setNode(a *command.NodeAddr) {
	m := maps.Clone(f.nodes)
	if m == nil {
		m = map[string]string{}
	}
	m[a.ID] = a.Addr
	f.nodes = m
}

func (f *fakeFSM) ClientAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

func (f *fakeFSM) Halted() <-chan struct{} { return nil }

func (f *fakeFSM) HaltErr() error { return nil }

func TestPublishNodeAddr(t *testing.T) {
	cfg := fastConfig(t, "n1")
	n, f := mustRealNode(t, cfg)
	ctx := context.Background()
	if got, o := n.publishNodeAddr(ctx, "n7", "10.0.0.7:6379"); string(got) != "+OK\r\n" || o != applied {
		t.Fatalf("publishNodeAddr = %q, %v", got, o)
	}
	if got := n.ClientAddr("n7"); got != "10.0.0.7:6379" {
		t.Errorf("ClientAddr(n7) = %q after publishing", got)
	}
	// Logs written by earlier versions carry the address as a command op
	// in a batch; replaying one still records it.
	r := n.w.submit(ctx, []command.Op{cmd(CmdNode, "n8", "10.0.0.8:6379")}, true)
	if len(r) != 1 || !strings.HasPrefix(string(r[0]), "-ERR unknown command") {
		t.Errorf("legacy op reply = %q, want the unknown-command error it always had", r)
	}
	if got := f.ClientAddr("n8"); got != "10.0.0.8:6379" {
		t.Errorf("ClientAddr(n8) = %q after a legacy op", got)
	}
	// A follower refuses to propose.
	c := newTestClusterOf(t, 3, func() stateMachine { return newFakeFSM() })
	follower := c.nodes[(c.leader(t)+1)%3]
	if got, o := follower.publishNodeAddr(ctx, "n9", "x:1"); !strings.HasPrefix(string(got), "-TRYAGAIN") || o != notLeader {
		t.Errorf("publishNodeAddr on a follower = %q, %v; want -TRYAGAIN, notLeader", got, o)
	}
}

// An entry the state machine cannot decode stops every node that applies
// it, through Fatal, instead of panicking; entries before it stay applied.
func TestUndecodableEntryStopsNode(t *testing.T) {
	c := newTestClusterOf(t, 3, func() stateMachine { return fsm.New(fsm.Config{}) })
	ctx := context.Background()
	l := c.nodes[c.leader(t)]
	if got := string(l.Write(ctx, []command.Op{cmd("SADD", "s", "a")})[0]); got != ":1\r\n" {
		t.Fatalf("SADD = %q", got)
	}
	for _, n := range c.nodes {
		if n.FatalErr() != nil {
			t.Fatalf("%s: FatalErr() = %v before the bad entry", n.ID(), n.FatalErr())
		}
	}
	// As a newer raftset would write it (the proposer never would).
	if err := l.raft.Apply([]byte{command.Version + 1, byte(command.TypeBatch), 0, 0}, time.Second).Error(); err != nil {
		t.Fatalf("raft.Apply: %v", err)
	}
	for _, n := range c.nodes {
		select {
		case <-n.Fatal():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Fatal not closed after an undecodable entry", n.ID())
		}
		err := n.FatalErr()
		var de *command.DecodeError
		if !errors.Is(err, fsm.ErrHalted) || !errors.As(err, &de) || !de.Newer ||
			!strings.Contains(err.Error(), "written by a newer raftset (format version 4, this binary reads up to 3)") {
			t.Errorf("%s: FatalErr() = %v, want the newer-format error", n.ID(), err)
		}
		if got := string(n.Read(ctx, args("SMEMBERS", "s"), true)); got != "*1\r\n$1\r\na\r\n" {
			t.Errorf("%s: SMEMBERS s = %q, want the write before the bad entry", n.ID(), got)
		}
	}
	// The state machine applies nothing more: a write gets no reply from
	// it, only an unknown outcome.
	if got := string(l.Write(ctx, []command.Op{cmd("SADD", "s", "b")})[0]); !strings.HasPrefix(got, "-CLUSTERDOWN") {
		t.Errorf("SADD after halting = %q, want -CLUSTERDOWN", got)
	}
}
