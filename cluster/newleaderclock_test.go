package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/testutil"
)

// heldFSM is the real state machine whose applies wait while it is held:
// a replica that stores entries but applies them late.
type heldFSM struct {
	*fsm.FSM
	mu   sync.Mutex
	open chan struct{} // closed: applies run
}

func newHeldFSM() *heldFSM {
	g := &heldFSM{FSM: fsm.New(fsm.Config{}), open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *heldFSM) gate() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

func (g *heldFSM) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *heldFSM) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

func (g *heldFSM) Apply(l *raft.Log) interface{} {
	<-g.gate()
	return g.FSM.Apply(l)
}

func (g *heldFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	<-g.gate()
	return g.FSM.ApplyBatch(logs)
}

// A new cluster's first leader (n1, its clock an hour ahead) stamps a
// write; leadership moves to n2 (an hour behind) before n2 applied any
// stamped entry. n2 must take the cluster's time from n1's entries, not
// from its own wall clock: a write it takes meanwhile waits (or is refused
// with -TRYAGAIN) until it applied them, and then both keys have their
// full TTL on n2. Taking over from its wall clock, n2 stamped its write two
// hours behind n1's entries, and applying them stepped its clock forward
// past that write's deadline (docs/jepsen.md, findings).
func TestNewLeaderTakesTheClusterTimeFromTheLog(t *testing.T) {
	offsets := []time.Duration{time.Hour, -time.Hour, 0}
	var peers []Peer
	var trans []*raft.InmemTransport
	for i := range offsets {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("n%d", i+1)))
		trans = append(trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: string(addr)})
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(raft.ServerAddress(peers[j].Addr), trans[j])
			}
		}
	}
	var nodes []*Node
	var fsms []*heldFSM
	for i, off := range offsets {
		cfg := fastConfig(t, peers[i].ID)
		cfg.Transport, cfg.Peers, cfg.ClockOffset = trans[i], peers, off
		f := newHeldFSM()
		if i == 1 {
			f.hold() // n2 stores entries but applies none yet
			// and never stands for election on its own: it must not be
			// the new cluster's first leader, whose clock starts it.
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Minute, time.Minute
		}
		fsms = append(fsms, f)
		nodes = append(nodes, mustNode(t, cfg, f, false))
	}
	ctx := context.Background()
	// n1 or n3 leads first.
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				return true
			}
		}
		return false
	})
	for i, n := range nodes {
		if n.IsLeader() && i != 0 {
			if r := string(n.Admin(ctx, args("raft.transfer", "n1"))); r != "+OK\r\n" {
				t.Fatalf("RAFT.TRANSFER n1 = %q", r)
			}
		}
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to lead", nodes[0].IsLeader)
	if r := write1(t, nodes[0], "set", "k1", "v", "ex", "100"); r != "+OK\r\n" {
		t.Fatalf("SET k1 on n1 = %q", r)
	}
	// n2 has the entry in its log (n1 and n3 committed it; Raft stores it on
	// n2 before applying), but applied nothing.
	testutil.WaitFor(t, 10*time.Second, "n2 to store n1's entries", func() bool {
		return nodes[1].raft.LastIndex() >= nodes[0].raft.LastIndex()
	})
	last := nodes[0].raft.LastIndex()
	if r := string(nodes[0].Admin(ctx, args("raft.transfer", "n2"))); r != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER n2 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n2 to lead", nodes[1].IsLeader)
	done := make(chan string, 1)
	go func() {
		for {
			r := write1(t, nodes[1], "set", "k2", "v", "ex", "100")
			if !strings.HasPrefix(r, "-TRYAGAIN") {
				done <- r
				return
			}
		}
	}()
	// The write is taken before n2 applies anything: its log grows past its
	// term's first entry (last+1) with the write, or the barrier that makes
	// the write wait.
	testutil.WaitFor(t, 10*time.Second, "n2 to take the write", func() bool { return nodes[1].raft.LastIndex() >= last+2 })
	fsms[1].release()
	if r := <-done; r != "+OK\r\n" {
		t.Fatalf("SET k2 on n2 = %q", r)
	}
	for _, k := range []string{"k1", "k2"} {
		if r := string(nodes[1].Read(ctx, args("ttl", k), false)); r != ":100\r\n" && r != ":99\r\n" {
			t.Errorf("TTL %s on n2 = %q, want about 100: cluster time moved", k, r)
		}
	}
}

// A leadership transfer does not set cluster time back. The target applied
// the leader's last entry a second after it was stamped (a replica catching
// up), so it counts from a time a second old (its floor, the entry before
// advanced at 0.95 of real speed, is 50 ms behind); the leader
// hands its reading over before the transfer (raftset.clock), and the new
// leader's first reading is no earlier than the old leader's last. In the
// Jepsen row that found it (clock-ahead seed 776824595) the deposed leader,
// whose readings never go back, saw a fresh TTL 300 ms short.
func TestTransferDoesNotSetClusterTimeBack(t *testing.T) {
	held := map[string]*heldFSM{}
	var mu sync.Mutex
	c := &servedCluster{t: t, wrap: func(id string, f *fsm.FSM) stateMachine {
		h := &heldFSM{FSM: f, open: make(chan struct{})}
		close(h.open)
		mu.Lock()
		held[id] = h
		mu.Unlock()
		return h
	}}
	c.startVoters(3, nil)
	l := c.leader()
	c.published()
	target := c.followers(l)[0]
	if r := write1(t, l.node, "set", "k0", "v"); r != "+OK\r\n" {
		t.Fatalf("SET k0 = %q", r)
	}
	c.converged(l)
	mu.Lock()
	h := held[target.id]
	mu.Unlock()
	h.hold()
	if r := write1(t, l.node, "set", "k1", "v", "px", "100000"); r != "+OK\r\n" {
		h.release()
		t.Fatalf("SET k1 = %q", r)
	}
	stamped := l.node.ClusterTime()
	testutil.WaitFor(t, 10*time.Second, target.id+" to store the entry", func() bool {
		return target.node.raft.LastIndex() >= l.node.raft.LastIndex()
	})
	testutil.WaitFor(t, 10*time.Second, "the leader's clock to pass the stamp by a second", func() bool {
		return l.node.ClusterTime().Sub(stamped) >= time.Second
	})
	h.release()
	c.converged(l)
	before := l.node.ClusterTime()
	if r := string(l.node.Admin(context.Background(), args("raft.transfer", target.id))); r != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER %s = %q", target.id, r)
	}
	testutil.WaitFor(t, 10*time.Second, target.id+" to lead", target.node.IsLeader)
	if after := target.node.ClusterTime(); after.Before(before) {
		t.Errorf("cluster time went back %v across the transfer: the new leader reads %v, the old one read %v before it",
			before.Sub(after), after.UnixMilli(), before.UnixMilli())
	}
}
