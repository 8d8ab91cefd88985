package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// TestClusterProtocol checks the single-shard view that every node of a
// three-node cluster gives: the leader masters slots 0-16383 and the other
// voters replicate it, under the same node ids everywhere; keys are counted
// and listed by slot; followers route keyed commands to the leader. With
// the majority gone, the survivor reports no slot served.
func TestClusterProtocol(t *testing.T) {
	c := newTestClusterOf(t, 3, func() stateMachine { return fsm.New(fsm.Config{}) })
	ctx := context.Background()
	li := c.leader(t)
	l := c.nodes[li]
	for _, k := range []string{"{u1}a", "{u1}b", "foo", "{u1}c"} {
		if got := string(l.Write(ctx, []command.Op{cmd("SADD", k, "m")})[0]); got != ":1\r\n" {
			t.Fatalf("SADD %s = %q", k, got)
		}
	}
	leaderID := ClusterNodeID(l.ID())
	// The test transport's addresses are the node ids, without a port; no
	// node published a client address.
	for i, n := range c.nodes {
		testutil.WaitFor(t, 10*time.Second, n.ID()+" to know the leader", func() bool {
			_, id := n.Leader()
			return id == l.ID()
		})
		slots := respwire.MustParse(n.Admin(ctx, args("cluster", "slots")))
		if len(slots.Elems) != 1 || len(slots.Elems[0].Elems) != 5 {
			t.Fatalf("%s: CLUSTER SLOTS = %v", n.ID(), slots)
		}
		var ids []string
		for _, m := range slots.Elems[0].Elems[2:] {
			ids = append(ids, m.Elems[2].Str)
		}
		if ids[0] != leaderID || !slices.Contains(ids, ClusterNodeID("n1")) || !slices.Contains(ids, ClusterNodeID("n3")) {
			t.Errorf("%s: CLUSTER SLOTS node ids = %v, leader %s", n.ID(), ids, leaderID)
		}
		nodes := respwire.MustParse(n.Admin(ctx, args("cluster", "nodes"))).Str
		lines := strings.Split(strings.TrimSuffix(nodes, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: CLUSTER NODES = %q", n.ID(), nodes)
		}
		// Nothing listens at the other nodes' addresses (n2:0): they are
		// flagged fail and disconnected, as Redis flags an unreachable node.
		term := fmt.Sprint(n.raft.CurrentTerm())
		wantFirst := leaderID + " " + l.ID() + ":0@0 master,fail - 0 0 " + term + " disconnected 0-16383"
		if i == li {
			wantFirst = leaderID + " " + l.ID() + ":0@0 myself,master - 0 0 " + term + " connected 0-16383"
		}
		if lines[0] != wantFirst {
			t.Errorf("%s: CLUSTER NODES first line = %q, want %q", n.ID(), lines[0], wantFirst)
		}
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			self := strings.HasPrefix(line, ClusterNodeID(n.ID()))
			if len(f) != 8 || f[3] != leaderID || (self && (f[2] != "myself,slave" || f[7] != "connected")) ||
				(!self && (f[2] != "slave,fail" || f[7] != "disconnected")) {
				t.Errorf("%s: CLUSTER NODES replica line = %q", n.ID(), line)
			}
		}
		if got := string(n.Admin(ctx, args("cluster", "myid"))); got != "$40\r\n"+ClusterNodeID(n.ID())+"\r\n" {
			t.Errorf("%s: CLUSTER MYID = %q", n.ID(), got)
		}
		info := respwire.MustParse(n.Admin(ctx, args("cluster", "info"))).Str
		for _, want := range []string{"cluster_state:ok\r\n", "cluster_known_nodes:3\r\n", "cluster_size:1\r\n",
			"cluster_current_epoch:" + term + "\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: CLUSTER INFO lacks %q: %q", n.ID(), want, info)
			}
		}
		// No client address was published, so a follower cannot send
		// clients to the leader: it keeps the command (and forwards it).
		if addr, here := n.RouteSlot(0); !here || addr != "" {
			t.Errorf("%s: RouteSlot = %q, %v; want here", n.ID(), addr, here)
		}
		// Counted on each replica's own state, once it applied the writes.
		testutil.WaitFor(t, 10*time.Second, n.ID()+" to count {u1}'s keys", func() bool {
			return string(n.Admin(ctx, args("cluster", "countkeysinslot", "4574"))) == ":3\r\n"
		})
		keys := respwire.MustParse(n.Admin(ctx, args("cluster", "getkeysinslot", "4574", "2")))
		if len(keys.Elems) != 2 || !strings.HasPrefix(keys.Elems[0].Str, "{u1}") {
			t.Errorf("%s: GETKEYSINSLOT 4574 2 = %v", n.ID(), keys)
		}
		if got := string(n.Admin(ctx, args("cluster", "countkeysinslot", "12182"))); got != ":1\r\n" {
			t.Errorf("%s: COUNTKEYSINSLOT of foo's slot = %q", n.ID(), got)
		}
	}

	// The majority goes: the survivor serves no slot.
	survivor := c.nodes[(li+1)%3]
	for _, n := range c.nodes {
		if n != survivor {
			n.Close()
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the survivor to lose its leader", func() bool {
		_, id := survivor.Leader()
		return id == ""
	})
	if got := string(survivor.Admin(ctx, args("cluster", "slots"))); got != "*0\r\n" {
		t.Errorf("CLUSTER SLOTS without a leader = %q, want empty", got)
	}
	if info := respwire.MustParse(survivor.Admin(ctx, args("cluster", "info"))).Str; !strings.HasPrefix(info,
		"cluster_state:fail\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:0\r\n") {
		t.Errorf("CLUSTER INFO without a leader = %q", info)
	}
	if _, here := survivor.RouteSlot(0); !here {
		t.Error("RouteSlot without a leader sends the client away; want it kept here (the write path answers)")
	}
}
