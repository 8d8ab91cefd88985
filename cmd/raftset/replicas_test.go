package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedRebalanceReplicas: four processes holding three shards of
// three replicas (`raftset cluster create`), then `add-shard n1 n2 n3`
// makes the replica counts uneven; `raftset cluster rebalance --replicas`
// moves replicas one at a time (ADDREPLICA, wait for a voter,
// REMOVEREPLICA) while go-redis's ClusterClient keeps adding members.
// Afterwards every node holds 3 replicas, every shard has 3 members on 3
// different processes (voters in its Raft configuration), every
// acknowledged member is present and nothing else, each process's DBSIZE
// counts the keys of the shards it holds once, a second run moves
// nothing, the moved shard elects another of its new members after kill -9
// of its leader, and redis-cli --cluster check is OK (with the killed
// process restarted).
func TestShardedRebalanceReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 4, 3, 3)
	agreedMasters(t, nodes, "three shards to have a master on every node", func(m map[string]string) bool { return len(m) == 3 })
	var out, errOut strings.Builder
	if code := run([]string{"cluster", "add-shard", "--addr", nodes[0].addr, "--timeout", "2m", "n1", "n2", "n3"}, &out, &errOut); code != 0 {
		t.Fatalf("add-shard: exit %d, %q %s", code, out.String(), errOut.String())
	}
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, nodes...)

	// Writers: each adds its own members to a few keys; a member whose
	// SADD failed (an unknown outcome) may or may not be there.
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("rr:%d", i))
	}
	cw := &clusterWriters{keys: keys}
	cw.start(ctx, rdb, 4)
	cw.waitWrites(t, 100)

	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "rebalance", "--replicas", "--dry-run", "--addr", nodes[1].addr}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "move shard ") || !strings.HasSuffix(out.String(), "replicas per node: n1=3 n2=3 n3=3 n4=3\n") {
		t.Fatalf("rebalance --replicas --dry-run: exit %d, %q %s", code, out.String(), errOut.String())
	}
	dry := out.String()
	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "rebalance", "--replicas", "--addr", nodes[2].addr, "--timeout", "3m"}, &out, &errOut); code != 0 ||
		strings.ReplaceAll(out.String(), "moved", "move") != dry {
		t.Fatalf("rebalance --replicas: exit %d, %q %s; the dry run said %q", code, out.String(), errOut.String(), dry)
	}
	m := waitMaps(t, nodes, "rebalanced", func(m *cluster.ShardMap) bool { return onlyLeaderOrSlotRules(cluster.CheckPlacement(m, 3)) })
	for _, sh := range m.Shards {
		if len(sh.Members) != 3 {
			t.Errorf("shard %d has members %v, want 3", sh.ID, sh.Members)
		}
	}
	waitVoters(t, m, nodes)
	// Writes go on after the moves; then each process stores the keys of
	// the shards it holds once (4 processes, 4 shards of 3 replicas).
	cw.waitWrites(t, 100)
	cw.stopAndCheck(t, ctx, rdb, nodes)
	t.Logf("%d SADDs acknowledged, %d with an unknown outcome (errors: %v)", cw.count.Load(), cw.maybeCount(), cw.errs)
	out.Reset()
	if code := run([]string{"cluster", "rebalance", "--replicas", "--addr", nodes[3].addr}, &out, &errOut); code != 0 ||
		out.String() != "replicas per node: n1=3 n2=3 n3=3 n4=3\n" {
		t.Errorf("second rebalance --replicas: exit %d, %q", code, out.String())
	}
	// The shard whose replica moved still fails over with its new
	// members: kill -9 its leader, and another member is elected.
	moved, _ := m.Shard(3)
	leader := ""
	testutil.WaitFor(t, 30*time.Second, "shard 3 to name its leader", func() bool {
		info := do(t, dial(t, nodes[3].addr), "RAFT.SHARD", "3", "RAFT.INFO")
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "leader_id:"); ok && slices.Contains(moved.Members, v) {
				leader = v
			}
		}
		return leader != ""
	})
	killed := slices.IndexFunc(nodes, func(p *clusterProc) bool { return p.id == leader })
	nodes[killed].p.kill9(t)
	for _, mem := range moved.Members {
		if mem == leader {
			continue
		}
		cp := nodes[slices.IndexFunc(nodes, func(p *clusterProc) bool { return p.id == mem })]
		testutil.WaitFor(t, 30*time.Second, mem+" to see a new leader of shard 3", func() bool {
			info := do(t, dial(t, cp.addr), "RAFT.SHARD", "3", "RAFT.INFO")
			return strings.Contains(info, "leader_id:") && !strings.Contains(info, "leader_id:"+leader+"\r\n") &&
				!strings.Contains(info, "leader_id:\r\n")
		})
	}
	nodes[killed].start(t)
	waitWritable(t, nodes[killed].addr)
	clusterCheck(t, nodes[0].addr)
}

// onlyLeaderOrSlotRules: the placement violations are of preferred
// leaders or slots only, which a replica rebalance does not change.
func onlyLeaderOrSlotRules(v []string) bool {
	for _, s := range v {
		if !strings.HasPrefix(s, "preferred leaders") && !strings.HasPrefix(s, "slots per shard") {
			return false
		}
	}
	return true
}
