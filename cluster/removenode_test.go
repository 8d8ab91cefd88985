package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// TestHomesAndRemovedEncode: home and removed lines survive the metadata
// group's encoding, a map without them encodes byte for byte as before,
// Home follows a home line only while the node holds that shard, and bad
// lines are refused.
func TestHomesAndRemovedEncode(t *testing.T) {
	const old = "epoch 4\nshard 0:0-8191:n1,n2,n4\nshard 1:8192-16383:n2,n3,n4\nnode n4 h:1 h:2\nadded 1 n4\n"
	const enc = "epoch 4\nshard 0:0-8191:n1,n2,n4\nshard 1:8192-16383:n2,n3,n4\nnode n4 h:1 h:2\nadded 1 n4\n" +
		"home n4 1\nremoved n5\nremoved n6\n"
	for _, s := range []string{old, enc} {
		m, err := DecodeShardMap(s)
		if err != nil {
			t.Fatalf("DecodeShardMap(%q): %v", s, err)
		}
		if got := m.Encode(); got != s {
			t.Errorf("Encode() = %q, want %q", got, s)
		}
		if got := m.clone().Encode(); got != s {
			t.Errorf("clone().Encode() = %q, want %q", got, s)
		}
	}
	m, _ := DecodeShardMap(enc)
	if !slices.Equal(m.Removed, []string{"n5", "n6"}) || !m.removed("n6") || m.removed("n4") {
		t.Errorf("Removed = %v", m.Removed)
	}
	for _, tc := range []struct {
		node string
		home uint32
		ok   bool
	}{{"n4", 1, true}, {"n1", 0, true}, {"n3", 1, true}, {"n5", 0, false}} {
		if home, ok := m.Home(tc.node); home != tc.home || ok != tc.ok {
			t.Errorf("Home(%s) = %d, %v, want %d, %v", tc.node, home, ok, tc.home, tc.ok)
		}
	}
	// setHome writes a line only for a home that is not the lowest id.
	next := m.clone()
	next.setHome("n4", 0, true)
	next.Removed = nil
	if got := next.Encode(); got != old {
		t.Errorf("with n4's home its lowest id: %q, want %q", got, old)
	}
	if m.Homes["n4"] != 1 {
		t.Error("the clone's change reached the original")
	}
	// A home line for a shard the node left: its lowest id.
	stale, err := DecodeShardMap("epoch 2\nshard 0:0-8191:n1,n4\nshard 1:8192-16383:n2,n3\nhome n4 1\n")
	if err != nil {
		t.Fatal(err)
	}
	if home, ok := stale.Home("n4"); home != 0 || !ok {
		t.Errorf("Home(n4) with a stale line = %d, %v", home, ok)
	}
	for _, bad := range []string{"home n4", "home n4 x", "home n,4 1", "home n4 268435455", "removed", "removed n@4", "removed n5\nremoved n5"} {
		s := "epoch 2\nshard 0:0-16383:n1\n" + bad + "\n"
		if _, err := DecodeShardMap(s); err == nil || !strings.Contains(err.Error(), "bad "+strings.Fields(bad)[0]+" line") {
			t.Errorf("DecodeShardMap(%q) = %v, want a bad %s line", s, err, strings.Fields(bad)[0])
		}
	}
}

// TestPlanDrain: cases, and random layouts drained of a random node: no
// replica left on it, never two replicas of a shard on one node, its home
// moved last, and with PlanReplicaMoves after it the counts within 1.
func TestPlanDrain(t *testing.T) {
	for _, tc := range []struct {
		smap, node, want string
	}{
		// cluster create: 4 nodes x 3 shards x 3 replicas; n4's home (1)
		// last.
		{"0:0-5460:n1,n2,n3 1:5461-10922:n4,n1,n2 2:10923-16383:n3,n4,n1", "n4", "[{2 n4 n2} {1 n4 n3}]"},
		// n4's home is not its lowest id; n5 recorded with no replica.
		{"epoch 2\nshard 0:0-8191:n1,n2,n4\nshard 1:8192-16383:n2,n3,n4\nnode n5 h:1 h:2\nhome n4 1\n", "n4", "[{0 n4 n5} {1 n4 n1}]"},
		// Nothing to move: the plan is empty.
		{"0:0-16383:n1,n2,n3", "n9", "[]"},
		// Every other node holds the shard.
		{"0:0-16383:n1,n2,n3", "n3", "no other node can take node n3's replica of shard 0: each holds one already (add a node first: raftset cluster add-node)"},
	} {
		m, err := DecodeShardMap(tc.smap)
		if err != nil {
			m, err = ParseShardMap(tc.smap)
		}
		if err != nil {
			t.Fatal(err)
		}
		plan, after, err := PlanDrain(m, tc.node)
		got := fmt.Sprint(plan)
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("PlanDrain(%q, %s) = %s, want %s", tc.smap, tc.node, got, tc.want)
		}
		if err == nil && (len(after.Hosts(tc.node)) > 0 || after.Homes[tc.node] != 0 || after.Nodes[tc.node] != (NodeRecord{})) {
			t.Errorf("PlanDrain(%q, %s): the map after still names it: %q", tc.smap, tc.node, after.Encode())
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		// Every node holds a replica (the map names it) and one more
		// than the replication factor: a drain is always possible.
		r := 1 + rng.IntN(3)
		s := 2 + rng.IntN(7)
		n := min(r+1+rng.IntN(6), s*r)
		m := mustPlace(t, n, s, r)
		node := fmt.Sprintf("n%d", 1+rng.IntN(n))
		home, hasHome := m.Home(node)
		plan, after, err := PlanDrain(m, node)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		sim := m.clone()
		for k, p := range plan {
			sh := &sim.Shards[slices.IndexFunc(sim.Shards, func(sh Shard) bool { return sh.ID == p.Shard })]
			if p.From != node || !slices.Contains(sh.Members, node) || slices.Contains(sh.Members, p.To) {
				t.Fatalf("case %d: move %+v on members %v", i, p, sh.Members)
			}
			if hasHome && p.Shard == home && k != len(plan)-1 {
				t.Fatalf("case %d: the home shard %d moved before the last move: %v", i, home, plan)
			}
			sh.Members = append(slices.DeleteFunc(sh.Members, func(x string) bool { return x == node }), p.To)
		}
		if len(sim.Hosts(node)) != 0 || len(after.Hosts(node)) != 0 {
			t.Fatalf("case %d: %s still holds %v after %v", i, node, sim.Hosts(node), plan)
		}
		for _, mv := range PlanReplicaMoves(after, nil) {
			sh := &after.Shards[slices.IndexFunc(after.Shards, func(sh Shard) bool { return sh.ID == mv.Shard })]
			sh.Members = append(slices.DeleteFunc(sh.Members, func(x string) bool { return x == mv.From }), mv.To)
		}
		counts := map[string]int{}
		for _, sh := range after.Shards {
			if len(sh.Members) != r {
				t.Errorf("case %d: shard %d has members %v, want %d", i, sh.ID, sh.Members, r)
			}
			for _, mem := range sh.Members {
				counts[mem]++
			}
		}
		lo, hi := s*r, 0
		for j := range n {
			if id := fmt.Sprintf("n%d", j+1); id != node {
				lo, hi = min(lo, counts[id]), max(hi, counts[id])
			}
		}
		if hi-lo > 1 {
			t.Errorf("case %d (%d nodes, %d shards, %d replicas, drain %s): counts %v after %v", i, n, s, r, node, counts, plan)
		}
		for _, v := range CheckPlacement(after, r) {
			if !strings.HasPrefix(v, "preferred leaders") && !strings.HasPrefix(v, "slots per shard") {
				t.Errorf("case %d: %s", i, v)
			}
		}
	}
}

// TestRemoveNode drains n4 (shard 1's replica to n1, then its last one
// removed: the home may go last) and removes it with RAFT.SHARD
// REMOVENODE (relayed to the metadata leader's process): n4 closes its replica and holds none, keyless commands there
// are refused, every process's map names it removed and no process's
// CLUSTER NODES lists it, repeats answer +OK and change nothing, and
// ADDREPLICA of it is refused. A node ADDNODE recorded is removed too and
// added again. Refusals are byte-exact: an unknown node, a node that
// still holds a replica, bad arguments; the DRY-RUN of a node that is no
// metadata voter is empty (TestRemoveNodeOfMetaVoter has the voters).
func TestRemoveNode(t *testing.T) {
	hosts, k1 := replicaHosts(t)
	n1, n2, n4 := hosts[0], hosts[1], hosts[3]
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"removenode", "n9"}, "-ERR REMOVENODE: unknown node \"n9\" (not in peers, nor added by RAFT.SHARD ADDNODE)\r\n"},
		{[]string{"removenode", "n4"}, "-ERR REMOVENODE: node n4 still holds a replica of shard 1: move them to other nodes first (raftset cluster remove-node does)\r\n"},
		{[]string{"removenode", "n@4"}, "-ERR REMOVENODE: bad node id \"n@4\"\r\n"},
		{[]string{"removenode"}, "-ERR wrong number of arguments for 'raft.shard|removenode' command\r\n"},
		{[]string{"removenode", "n4", "x"}, "-ERR REMOVENODE wants <node> [DRY-RUN]\r\n"},
		{[]string{"removenode", "n4", "dry-run", "x"}, "-ERR wrong number of arguments for 'raft.shard|removenode' command\r\n"},
		{[]string{"removenode", "n4", "dry-run"}, "$0\r\n\r\n"},
	} {
		for _, h := range []*Host{n1, n4} {
			if r := adminRetry(t, h, append([]string{"raft.shard"}, tc.args...)...); r != tc.want {
				t.Errorf("RAFT.SHARD %s on %s = %q, want %q", strings.Join(tc.args, " "), h.self, r, tc.want)
			}
		}
	}

	// The drain, as raftset cluster remove-node runs it.
	if r := adminRetry(t, n4, "raft.shard", "addreplica", "1", "n1"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 1 n1 = %q", r)
	}
	if r := adminRetry(t, n4, "raft.shard", "removereplica", "1", "n4"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD REMOVEREPLICA 1 n4 (its last and home) = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n4 to close its last replica", func() bool { _, ok := n4.Node(1); return !ok && n4.Home() == nil })
	if r := string(n4.ReadBatch(ctx, [][][]byte{args("keys", "*")}, false)[0]); r != string(replyNoReplica) {
		t.Errorf("KEYS * on the drained n4 = %q", r)
	}
	if n4.Users() == nil {
		t.Error("the drained n4 has no ACL users for its front end")
	}
	// n1's map learns the drain within a refresh (unless it drove it).
	testutil.WaitFor(t, 10*time.Second, "n1 to learn the drain", func() bool { return len(n1.Map().Hosts("n4")) == 0 })
	epoch := n1.Map().Epoch
	// Sent to a voter: the drained n4 holds no replica whose log would
	// tell it the voters' client addresses, which this test's map does
	// not give (raftset cluster create's does).
	for _, h := range []*Host{n2, n1, n2} { // the second and third are repeats
		if r := adminRetry(t, h, "raft.shard", "removenode", "n4"); r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD REMOVENODE n4 on %s = %q", h.self, r)
		}
	}
	nodesOf := func(h *Host) string {
		v, err := respwire.Parse(h.Admin(ctx, args("cluster", "nodes")))
		if err != nil {
			t.Fatal(err)
		}
		return v.Str
	}
	for _, h := range hosts[:3] {
		testutil.WaitFor(t, 10*time.Second, h.self+" to learn n4's removal", func() bool { return h.Map().removed("n4") })
		if m := h.Map(); m.Epoch < epoch+1 || len(m.Hosts("n4")) > 0 {
			t.Errorf("%s: map after REMOVENODE: %q (epoch before it %d)", h.self, m.Encode(), epoch)
		}
		if s := nodesOf(h); strings.Contains(s, ClusterNodeID("n4")) || strings.Count(s, "\n") != 3 {
			t.Errorf("CLUSTER NODES on %s lists n4 or not 3 nodes:\n%s", h.self, s)
		}
	}
	// The removal's epoch, not one per repeat (the drain's came before).
	if m := n1.Map(); m.Epoch != epoch+1 {
		t.Errorf("map epoch %d after REMOVENODE and two repeats, want %d", m.Epoch, epoch+1)
	}
	want := "-ERR ADDREPLICA: node n4 was removed from the cluster (RAFT.SHARD REMOVENODE); add it again first (RAFT.SHARD ADDNODE)\r\n"
	if r := adminRetry(t, n2, "raft.shard", "addreplica", "1", "n4"); r != want {
		t.Errorf("ADDREPLICA 1 n4 after its removal = %q, want %q", r, want)
	}
	rep, _ := n1.Node(1)
	testutil.WaitFor(t, 10*time.Second, "n1's replica of shard 1 to hold the key", func() bool {
		return string(rep.ReadBatch(ctx, [][][]byte{args("smembers", k1)}, true)[0]) == "*1\r\n$6\r\nbefore\r\n"
	})

	// A node ADDNODE recorded, holding no replica: its record goes, and
	// ADDNODE brings it back.
	if r := adminRetry(t, n1, "raft.shard", "addnode", "n5", "10.0.0.5:7005", "10.0.0.5:17005"); r != "+OK\r\n" {
		t.Fatalf("ADDNODE n5 = %q", r)
	}
	if r := adminRetry(t, n1, "raft.shard", "removenode", "n5"); r != "+OK\r\n" {
		t.Fatalf("REMOVENODE n5 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to learn n5's removal", func() bool { return n1.Map().removed("n5") })
	if m := n1.Map(); m.Nodes != nil || !slices.Equal(m.Removed, []string{"n4", "n5"}) {
		t.Errorf("map after REMOVENODE n5: %q", m.Encode())
	}
	if r := adminRetry(t, n1, "raft.shard", "addnode", "n5", "10.0.0.5:7005", "10.0.0.5:17005"); r != "+OK\r\n" {
		t.Fatalf("ADDNODE n5 again = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "n1 to learn n5's record again", func() bool { return !n1.Map().removed("n5") })
	if m := n1.Map(); m.Nodes["n5"] != (NodeRecord{"10.0.0.5:7005", "10.0.0.5:17005"}) || !slices.Equal(m.Removed, []string{"n4"}) {
		t.Errorf("map after ADDNODE n5 again: %q", m.Encode())
	}
}

// TestRemoveNodeOfMetaVoter: REMOVENODE of a metadata voter first adds a
// replacement (a node that is no voter and answers, the first by id), then
// takes the voter out of the group, then goes on as for any node (here it
// still holds replicas: refused for that). DRY-RUN names the steps. Here
// the voter is the group's leader: its process adds the replacement, hands
// the leadership over, and the new leader's goes on. With no node to take its place and fewer than 3 voters
// left it is refused, byte for byte, DRY-RUN too.
func TestRemoveNodeOfMetaVoter(t *testing.T) {
	ctx := context.Background()
	small := servedHosts(t, "0:0-16383:n1,n2,n3", 3)
	if r := adminRetry(t, small[0], "raft.shard", "addnode", "n5", "127.0.0.1:1", "127.0.0.1:2"); r != "+OK\r\n" {
		t.Fatalf("ADDNODE n5 = %q", r)
	}
	refusal := "-ERR REMOVENODE: node n2 is a voter of the metadata group, which would keep 2, and no node can take its place " +
		"(one that is no voter, not removed, and answers): add a node first (raftset cluster add-node), " +
		"or leave the group with 2 voters (RAFT.SHARD REMOVEMETA n2)\r\n"
	for _, a := range [][]string{{"removenode", "n2", "dry-run"}, {"removenode", "n2"}} {
		if r := adminRetry(t, small[2], append([]string{"raft.shard"}, a...)...); r != refusal {
			t.Errorf("RAFT.SHARD %s (n5 does not answer) = %q, want %q", strings.Join(a, " "), r, refusal)
		}
	}
	if got := metaConfigOf(small[0]); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("metadata voters after the refusals = %v", got)
	}

	hosts, _ := replicaHosts(t)
	n1, n2, n4 := hosts[0], hosts[1], hosts[3]
	// n2 leads the metadata group: it holds shard 1 with n4, whose log
	// gave it n4's client address (this test's map gives none).
	testutil.WaitFor(t, 30*time.Second, "n2 to lead the metadata group and know n4's address", func() bool {
		if l := metaLeaderHost(t, hosts); l != n2 {
			l.metaCall(ctx, args(cmdTransfer, "n2")) // a timeout is tried again
		}
		return n2.MetaNode().IsLeader() && n2.clientAddr("n4") != ""
	})
	// n2 itself: its process adds n4, hands the leadership over, and the
	// new leader's process (which needs no replacement any more: 3 voters
	// stay) takes n2 out of the group.
	plan := "add metadata voter n4 (add-meta n4)\nremove metadata voter n2 (remove-meta n2)\n"
	if r := adminRetry(t, n1, "raft.shard", "removenode", "n2", "DRY-RUN"); r != string(command.AppendBulkString(nil, plan)) {
		t.Errorf("RAFT.SHARD REMOVENODE n2 DRY-RUN = %q, want the plan %q", r, plan)
	}
	held := "-ERR REMOVENODE: node n2 still holds a replica of shard 0, 1: move them to other nodes first (raftset cluster remove-node does)\r\n"
	if r := adminRetry(t, n1, "raft.shard", "removenode", "n2"); r != held {
		t.Errorf("RAFT.SHARD REMOVENODE n2 = %q, want %q", r, held)
	}
	waitMetaState(t, hosts, []string{"n1", "n3", "n4"})
	if r := adminRetry(t, n4, "raft.shard", "removenode", "n2", "DRY-RUN"); r != "$0\r\n\r\n" {
		t.Errorf("RAFT.SHARD REMOVENODE n2 DRY-RUN once no voter = %q, want empty", r)
	}
}
