package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedRemoveNode: four processes holding three shards of three
// replicas (`raftset cluster create`: n4 holds shards 1 and 2, and is made
// shard 1's leader); `raftset cluster remove-node --dry-run n1` (a metadata
// voter) plans n4 in its place in the metadata group first and changes
// nothing; `remove-node --dry-run n4` prints the
// plan, and `remove-node n4` runs it while go-redis's ClusterClient adds
// members, which must see no error: shard 2's replica to n2, then shard 1's
// (n4's home, last; its leadership handed over first) to n3, then the map
// drops n4. Afterwards every acknowledged member is present and nothing
// else, every key is stored once (DBSIZE on each process, which now holds
// every shard, is the number of keys; on n4, 0), every shard has 3 voters on n1-n3
// in its Raft configuration, n4 holds no replica, no process's CLUSTER
// NODES lists it, a repeat changes nothing, and with n4 stopped
// redis-cli --cluster check is OK. Started again, n4 closes the replicas
// its directive names; added again and given shard 0, that is its home,
// also across a restart.
func TestShardedRemoveNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 4, 3, 3)
	n4 := nodes[3]
	agreedMasters(t, nodes, "three shards to have a master on every node", func(m map[string]string) bool { return len(m) == 3 })
	leadShard(t, n4, 1)
	c4 := dial(t, n4.addr)
	agreedMasters(t, nodes, "n4 to master shard 1 on every node", func(m map[string]string) bool { return len(m) == 3 && m["5461-10922"] == "n4" })

	c1 := dial(t, nodes[0].addr)
	epoch := func() uint64 {
		m, err := cluster.DecodeShardMap(testutil.ParseReply(do(t, c1, "RAFT.SHARD", "MAP")).Str)
		if err != nil {
			t.Fatal(err)
		}
		return m.Epoch
	}
	before := epoch()
	var out, errOut strings.Builder
	wantMeta := "add metadata voter n4 (add-meta n4)\nremove metadata voter n1 (remove-meta n1)\n"
	if code := run([]string{"cluster", "remove-node", "--dry-run", "--addr", nodes[0].addr, "n1"}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), wantMeta) || !strings.Contains(out.String(), "\nremove node n1\n") {
		t.Errorf("remove-node --dry-run n1: exit %d, %q %q, want it to start with %q", code, out.String(), errOut.String(), wantMeta)
	}
	if e := epoch(); e != before {
		t.Errorf("remove-node --dry-run n1 changed the map: epoch %d, was %d", e, before)
	}

	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, nodes...)
	// Writers: each adds its own members to a few keys; the client must
	// surface no error while replicas move and n4 leaves.
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("rn:%d", i))
	}
	cw := &clusterWriters{keys: keys}
	cw.start(ctx, rdb, 4)
	cw.waitWrites(t, 100)

	out.Reset()
	errOut.Reset()
	wantPlan := "move shard 2's replica from n4 to n2\nmove shard 1's replica from n4 to n3\nremove node n4\nreplicas per node: n1=3 n2=3 n3=3\n"
	if code := run([]string{"cluster", "remove-node", "--dry-run", "--addr", nodes[2].addr, "n4"}, &out, &errOut); code != 0 || out.String() != wantPlan {
		t.Fatalf("remove-node --dry-run n4: exit %d, %q %s, want %q", code, out.String(), errOut.String(), wantPlan)
	}
	out.Reset()
	errOut.Reset()
	done := "node n4 holds no replica and is out of the cluster: stop its process (its directory can be deleted)\n"
	wantRun := strings.ReplaceAll(strings.Replace(wantPlan, "remove node", "removed node", 1), "move shard", "moved shard") + done
	began := time.Now()
	if code := run([]string{"cluster", "remove-node", "--addr", nodes[1].addr, "--timeout", "3m", "n4"}, &out, &errOut); code != 0 || out.String() != wantRun {
		t.Fatalf("remove-node n4: exit %d, %q %s, want %q", code, out.String(), errOut.String(), wantRun)
	}
	t.Logf("remove-node n4 took %s", time.Since(began).Round(time.Millisecond))
	rest := nodes[:3]
	m := waitMaps(t, nodes, "without n4", func(m *cluster.ShardMap) bool { return slices.Equal(m.Removed, []string{"n4"}) })
	for _, sh := range m.Shards {
		if got := slices.Sorted(slices.Values(sh.Members)); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
			t.Errorf("shard %d has members %v, want n1, n2, n3", sh.ID, sh.Members)
		}
	}
	waitVoters(t, m, rest) // n4 in no shard's configuration
	// Writes go on after the removal; then each of n1-n3, which holds
	// every shard now, stores every key once, and n4 none.
	cw.waitWrites(t, 100)
	if stored := cw.stopAndCheck(t, ctx, rdb, nodes); stored != len(keys) {
		t.Errorf("%d keys stored, want all %d", stored, len(keys))
	}
	cw.checkNoErrors(t, "the removal")
	t.Logf("%d SADDs acknowledged, %d with an unknown outcome", cw.count.Load(), cw.maybeCount())
	for _, cp := range rest {
		c := dial(t, cp.addr)
		var s string
		testutil.WaitFor(t, 30*time.Second, cp.id+"'s CLUSTER NODES to list 3 nodes", func() bool {
			s = testutil.ParseReply(do(t, c, "CLUSTER", "NODES")).Str
			return strings.Count(s, "\n") == 3
		})
		if strings.Contains(s, cluster.ClusterNodeID("n4")) || strings.Contains(s, n4.addr) {
			t.Errorf("%s's CLUSTER NODES lists n4:\n%s", cp.id, s)
		}
	}
	// n4 runs on with no replica, as the command says, until stopped.
	for _, id := range []string{"1", "2"} {
		if r := do(t, c4, "RAFT.SHARD", id, "RAFT.INFO"); r != "-ERR this node holds no replica of shard "+id+"\r\n" {
			t.Errorf("RAFT.SHARD %s RAFT.INFO on n4 = %q", id, r)
		}
	}
	if r := do(t, c4, "KEYS", "*"); !strings.HasPrefix(r, "-TRYAGAIN this node holds no replica") {
		t.Errorf("KEYS * on n4 = %q", r)
	}
	// A repeat (a lost reply) changes nothing.
	before = epoch()
	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "remove-node", "--addr", nodes[0].addr, "n4"}, &out, &errOut); code != 0 ||
		out.String() != "removed node n4\nreplicas per node: n1=3 n2=3 n3=3\n"+done {
		t.Errorf("remove-node n4 again: exit %d, %q %s", code, out.String(), errOut.String())
	}
	if e := epoch(); e != before {
		t.Errorf("the repeated remove-node changed the map: epoch %d, was %d", e, before)
	}
	n4.p.stop(t)
	agreedMasters(t, rest, "three shards to have a master on n1-n3", func(m map[string]string) bool { return len(m) == 3 })
	clusterCheck(t, nodes[0].addr)

	// Started again on its directory all the same, n4 restarts the
	// replicas its directive names until its first map refresh closes
	// them; added again (ADDNODE drops the removed line) and given shard
	// 0, that replica is its home, also after another restart, which
	// again starts the directive's shard 1 first: RAFT.INFO, run on the
	// home, lists shard 0's four members.
	n4.start(t)
	waitWritable(t, n4.addr)
	c4 = dial(t, n4.addr)
	for _, id := range []string{"1", "2"} {
		testutil.WaitFor(t, 30*time.Second, "n4 to close its old replica of shard "+id, func() bool {
			return do(t, c4, "RAFT.SHARD", id, "RAFT.INFO") == "-ERR this node holds no replica of shard "+id+"\r\n"
		})
	}
	raftAddr := n4.extra[slices.Index(n4.extra, "--raft-addr")+1]
	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "add-node", "--addr", nodes[0].addr, "n4@" + n4.addr + "," + raftAddr}, &out, &errOut); code != 0 {
		t.Fatalf("add-node n4 after its removal: exit %d, %q %s", code, out.String(), errOut.String())
	}
	if r := do(t, c1, "RAFT.SHARD", "ADDREPLICA", "0", "n4"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 0 n4 after add-node = %q", r)
	}
	homeIsShard0 := func() bool {
		info := do(t, c4, "RAFT.INFO")
		return strings.Contains(info, "member3:id=") && strings.Contains(info, "id=n4,suffrage=voter")
	}
	testutil.WaitFor(t, 30*time.Second, "n4's home to be its replica of shard 0", homeIsShard0)
	n4.p.stop(t)
	n4.start(t)
	waitWritable(t, n4.addr)
	c4 = dial(t, n4.addr)
	testutil.WaitFor(t, 30*time.Second, "n4's home to be its replica of shard 0 after a restart", func() bool {
		return homeIsShard0() && do(t, c4, "RAFT.SHARD", "1", "RAFT.INFO") == "-ERR this node holds no replica of shard 1\r\n"
	})
}

// TestShardedRemoveMetaVoterNode: `raftset cluster remove-node n1` of a
// metadata voter, for real, on four processes holding three shards of
// three replicas while go-redis's ClusterClient adds members, which must
// see no error: n4 joins the metadata group in n1's place (3 voters stay),
// n1 leaves it, its replicas move to the others, and the map drops it.
// Afterwards the map's voters are n2-n4, every shard has 3 voters on n2-n4
// in its Raft configuration, every acknowledged member is present, and with
// n1 stopped map changes still commit and redis-cli --cluster check is OK.
func TestShardedRemoveMetaVoterNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 4, 3, 3)
	n1, rest := nodes[0], nodes[1:]
	agreedMasters(t, nodes, "three shards to have a master on every node", func(m map[string]string) bool { return len(m) == 3 })
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, nodes...)
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("rm:%d", i))
	}
	cw := &clusterWriters{keys: keys}
	cw.start(ctx, rdb, 4)
	cw.waitWrites(t, 100)

	var out, errOut strings.Builder
	wantMeta := "add metadata voter n4 (add-meta n4)\nremove metadata voter n1 (remove-meta n1)\n"
	done := "node n1 holds no replica and is out of the cluster: stop its process (its directory can be deleted)\n"
	if code := run([]string{"cluster", "remove-node", "--addr", nodes[1].addr, "--timeout", "3m", "n1"}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), wantMeta) || !strings.Contains(out.String(), "\nremoved node n1\n") || !strings.HasSuffix(out.String(), done) {
		t.Fatalf("remove-node n1: exit %d, %q %s; want it to start with %q and end with %q", code, out.String(), errOut.String(), wantMeta, done)
	}
	m := waitMaps(t, rest, "without n1, n2-n4 the metadata voters", func(m *cluster.ShardMap) bool {
		return slices.Equal(m.Removed, []string{"n1"}) && slices.Equal(slices.Sorted(slices.Values(m.Meta)), []string{"n2", "n3", "n4"})
	})
	for _, sh := range m.Shards {
		if got := slices.Sorted(slices.Values(sh.Members)); !slices.Equal(got, []string{"n2", "n3", "n4"}) {
			t.Errorf("shard %d has members %v, want n2, n3, n4", sh.ID, sh.Members)
		}
	}
	waitVoters(t, m, rest)
	cw.waitWrites(t, 100)
	if stored := cw.stopAndCheck(t, ctx, rdb, rest); stored != len(keys) {
		t.Errorf("%d keys stored, want all %d", stored, len(keys))
	}
	cw.checkNoErrors(t, "the removal of a metadata voter")
	t.Logf("%d SADDs acknowledged, %d with an unknown outcome", cw.count.Load(), cw.maybeCount())

	// The metadata group runs without n1: a map change commits (slot 0
	// moved to another shard) and every other process learns it.
	n1.p.stop(t)
	c2 := dial(t, nodes[1].addr)
	to := strconv.Itoa(int((m.ShardOf(0) + 1) % 3))
	var r string
	testutil.WaitFor(t, 60*time.Second, "MOVESLOTS 0 0 "+to+" without n1", func() bool {
		r = do(t, c2, "RAFT.SHARD", "MOVESLOTS", "0", "0", to)
		return !strings.HasPrefix(r, "-TRYAGAIN")
	})
	if r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD MOVESLOTS 0 0 %s without n1 = %q", to, r)
	}
	waitMaps(t, rest, "slot 0 in shard "+to, func(after *cluster.ShardMap) bool {
		return after.Epoch > m.Epoch && strconv.Itoa(int(after.ShardOf(0))) == to
	})
	// Slot 0 is a range of its own now: four ranges, each with a master.
	agreedMasters(t, rest, "four slot ranges to have a master on n2-n4", func(m map[string]string) bool { return len(m) == 4 })
	clusterCheck(t, nodes[1].addr)
}
