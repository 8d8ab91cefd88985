package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// testCluster is a set of in-memory nodes on connected InmemTransports.
type testCluster struct {
	nodes  []*Node
	fsms   []stateMachine
	trans  []*raft.InmemTransport
	addrs  []raft.ServerAddress
	config []Config
}

func newTestCluster(t *testing.T, size int) *testCluster {
	t.Helper()
	return newTestClusterOf(t, size, func() stateMachine { return newFakeFSM() })
}

// newTestClusterOf starts size voters on connected InmemTransports, with
// clusterConfig's timeouts: at fastConfig's 50 ms a loaded machine churns
// through elections (TestClusterProtocol once saw "no leader is known").
func newTestClusterOf(t *testing.T, size int, newSM func() stateMachine) *testCluster {
	t.Helper()
	c := &testCluster{}
	var peers []Peer
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, tr)
		peers = append(peers, Peer{ID: id, Addr: string(addr)})
	}
	for i := range size {
		for j := range size {
			if i != j {
				c.trans[i].Connect(c.addrs[j], c.trans[j])
			}
		}
	}
	for i := range size {
		cfg := clusterConfig(t, peers[i].ID)
		cfg.Transport = c.trans[i]
		cfg.Peers = peers
		f := newSM()
		c.fsms = append(c.fsms, f)
		c.config = append(c.config, cfg)
		c.nodes = append(c.nodes, mustNode(t, cfg, f, false))
	}
	return c
}

// leader waits for exactly one node to lead among those not excluded and
// returns its position.
func (c *testCluster) leader(t *testing.T, exclude ...int) int {
	t.Helper()
	skip := map[int]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	at := -1
	testutil.WaitFor(t, 10*time.Second, "a single leader", func() bool {
		at = -1
		for i, n := range c.nodes {
			if skip[i] || !n.IsLeader() {
				continue
			}
			if at >= 0 {
				return false
			}
			at = i
		}
		return at >= 0
	})

	return at
}

// isolate cuts node i off from every other node, both ways.
func (c *testCluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.addrs[i])
		}
	}
}

func TestThreeNodeReplication(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	l := c.leader(t)
	leader := c.nodes[l]
	for i := range 20 {
		got := leader.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(i))})
		if string(got[0]) != ":1\r\n" {
			t.Fatalf("leader Write = %q", got[0])
		}
	}
	if got := string(leader.Read(ctx, args("scard", "s"), false)); got != ":20\r\n" {
		t.Errorf("leader SCARD s = %q, want :20", got)
	}
	for i, n := range c.nodes {
		if i == l {
			continue
		}
		testutil.WaitFor(t, 5*time.Second, "replication to "+n.ID(), func() bool {
			return string(n.Read(ctx, args("scard", "s"), true)) == ":20\r\n"
		})

		got := n.Write(ctx, []command.Op{cmd("sadd", "s", "x")})
		if !strings.HasPrefix(string(got[0]), "-TRYAGAIN") || !strings.Contains(string(got[0]), leader.ID()) {
			t.Errorf("follower %s Write = %q, want -TRYAGAIN naming leader %s", n.ID(), got[0], leader.ID())
		}
		if got := string(n.Read(ctx, args("scard", "s"), false)); !strings.HasPrefix(got, "-TRYAGAIN") {
			t.Errorf("follower %s linearizable Read = %q, want -TRYAGAIN", n.ID(), got)
		}
		if _, reply := n.Watch(ctx, args("s")); !strings.HasPrefix(string(reply), "-TRYAGAIN") {
			t.Errorf("follower %s Watch = %q, want -TRYAGAIN", n.ID(), reply)
		}
		if got := string(n.Admin(ctx, args("role"))); !strings.HasPrefix(got, "*5\r\n$5\r\nslave\r\n") {
			t.Errorf("follower ROLE = %q", got)
		}
	}
	if got := string(leader.Read(ctx, args("exists", "x"), false)); got != ":0\r\n" {
		t.Errorf("a write refused by a follower was applied")
	}
	// These nodes publish no client address, so WAIT cannot ask them how
	// far they got and counts none (wait_test.go covers served clusters).
	if got := string(leader.Admin(ctx, args("wait", "1", "100"))); got != ":0\r\n" {
		t.Errorf("leader WAIT 1 100 = %q, want :0", got)
	}
	if got := string(leader.Admin(ctx, args("role"))); !strings.HasPrefix(got, "*3\r\n$6\r\nmaster\r\n") || !strings.Contains(got, "*2\r\n*3\r\n") {
		t.Errorf("leader ROLE = %q, want master with 2 replicas", got)
	}
	// Replicated configuration reaches every node.
	if got := string(leader.Admin(ctx, args("config", "set", "set-max-listpack-entries", "7"))); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET = %q", got)
	}
	for _, f := range c.fsms {
		testutil.WaitFor(t, 5*time.Second, "replicated config", func() bool { return f.Limits().MaxListpackEntries == 7 })
	}
}

// A leader cut off from the others must not serve a linearizable read from
// its possibly stale state, nor acknowledge a write (DESIGN.md, "Reply families").
func TestIsolatedLeaderRefusesReadsAndWrites(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	l := c.leader(t)
	old := c.nodes[l]
	old.Write(ctx, []command.Op{cmd("sadd", "k", "before")})

	c.isolate(l)
	// Still believes it leads for up to the lease timeout: the read must
	// fail leadership confirmation. Raft's VerifyLeader also counts the
	// acknowledgement of a heartbeat sent just before the cut (the follower
	// heard from this leader then, and votes for no other before its
	// election timeout), so a read right after the cut may still be served
	// with what it wrote; one that got past confirmation once no such
	// acknowledgement is left in flight would be a stale read.
	testutil.WaitFor(t, 5*time.Second, "the isolated leader to refuse a linearizable read", func() bool {
		got := string(old.Read(ctx, args("smembers", "k"), false))
		if !strings.HasPrefix(got, "-TRYAGAIN") && got != "*1\r\n$6\r\nbefore\r\n" {
			t.Fatalf("isolated leader Read = %q, want -TRYAGAIN (or, within its lease, what it wrote)", got)
		}
		return strings.HasPrefix(got, "-TRYAGAIN")
	})
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got := string(old.Write(wctx, []command.Op{cmd("sadd", "k", "lost")})[0])
	if !strings.HasPrefix(got, "-TRYAGAIN") && !strings.HasPrefix(got, "-CLUSTERDOWN") {
		t.Errorf("isolated leader Write = %q, want -TRYAGAIN or -CLUSTERDOWN", got)
	}

	nl := c.leader(t, l)
	nw := c.nodes[nl]
	if got := string(nw.Write(ctx, []command.Op{cmd("sadd", "k", "after")})[0]); got != ":1\r\n" {
		t.Fatalf("new leader Write = %q", got)
	}
	if got := string(nw.Read(ctx, args("smembers", "k"), false)); !strings.Contains(got, "after") || !strings.Contains(got, "before") {
		t.Errorf("new leader SMEMBERS k = %q, want before and after", got)
	}
	// The cut-off old leader must not serve the state before "after".
	if got := string(old.Read(ctx, args("smembers", "k"), false)); !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Errorf("cut-off old leader Read after the new leader's write = %q, want -TRYAGAIN", got)
	}
	if got := nw.rd.readyTerm.Load(); got != nw.raft.CurrentTerm() {
		t.Errorf("new leader served a read with readyTerm %d in term %d", got, nw.raft.CurrentTerm())
	}
}
