package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedAddShard: three processes holding two shards (as `raftset
// cluster create` lays them out); `raftset cluster add-shard --id 2 n3
// n1 n2` adds shard 2, which every process starts (dir/shards/2) and which
// elects a leader before the command answers, and run again (as after a
// lost reply) answers the same and adds nothing; `raftset cluster rebalance`
// then gives it a third of the slots. Every key written before is still
// there with its members, once (DBSIZE), keys written afterwards reach
// the new shard, a process restarted with the directive (which lacks
// shard 2) starts it again from the replicated map, and redis-cli
// --cluster check sees every slot covered.
func TestShardedAddShard(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCreated(t, 3, 2, 3)
	agreedMasters(t, nodes, "both shards to have a master on every node", func(m map[string]string) bool { return len(m) == 2 })
	ctx := context.Background()
	rdb := clusterClient(t, 10*time.Second, nodes...)
	sadd := func(k, m string) {
		t.Helper()
		saddRetrying(t, ctx, rdb, k, m)
	}
	const nkeys = 300
	for i := range nkeys {
		sadd(fmt.Sprintf("as:%d", i), "before")
	}

	// Refusals, from any node (the metadata leader's process checks the
	// members against peers).
	c3 := dial(t, nodes[2].addr)
	for _, tc := range [][2]string{
		{"RAFT.SHARD ADDSHARD", "-ERR ADDSHARD wants the new shard's members (node ids)\r\n"},
		{"RAFT.SHARD ADDSHARD n1 zz", "-ERR ADDSHARD: node \"zz\" is not in peers, nor added by RAFT.SHARD ADDNODE\r\n"},
		{"RAFT.SHARD ADDSHARD n1 n1", "-ERR ADDSHARD: node n1 named twice\r\n"},
		{"RAFT.SHARD BALANCE-LEADERS now", "-ERR BALANCE-LEADERS takes no argument but DRY-RUN\r\n"},
	} {
		if r := do(t, c3, strings.Fields(tc[0])...); r != tc[1] {
			t.Errorf("%s = %q, want %q", tc[0], r, tc[1])
		}
	}
	var out, errOut strings.Builder
	// Twice, as after a lost reply: with --id the repeat adds nothing
	// (rebalance below evens the slots over three shards).
	for _, addr := range []string{nodes[1].addr, nodes[2].addr} {
		out.Reset()
		if code := run([]string{"cluster", "add-shard", "--id", "2", "--addr", addr, "--timeout", "2m", "n3", "n1", "n2"}, &out, &errOut); code != 0 ||
			out.String() != "added shard 2 on n3,n1,n2\n" {
			t.Fatalf("add-shard --id 2 through %s: exit %d, %q %s", addr, code, out.String(), errOut.String())
		}
	}
	for _, cp := range nodes {
		if _, err := os.Stat(filepath.Join(cp.dir, "shards", "2")); err != nil {
			t.Errorf("%s: %v", cp.id, err)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"cluster", "rebalance", "--addr", nodes[0].addr, "--timeout", "3m"}, &out, &errOut); code != 0 ||
		out.String() != "moved slots 5462-8191 from shard 0 to shard 2\nmoved slots 13653-16383 from shard 1 to shard 2\n"+
			"slots per shard: 0=5462 1=5461 2=5461\n" {
		t.Fatalf("rebalance: exit %d, %q %s", code, out.String(), errOut.String())
	}
	agreedMasters(t, nodes, "the four ranges of three shards to have a master on every node", func(m map[string]string) bool {
		return len(m) == 4 && m["5462-8191"] != "" && m["13653-16383"] != "" && m["5462-8191"] == m["13653-16383"]
	})
	for i := range nkeys {
		sadd(fmt.Sprintf("as:%d", i), "after")
	}
	for i := range nkeys {
		k := fmt.Sprintf("as:%d", i)
		got, err := rdb.SMembers(ctx, k).Result()
		if err != nil || strings.Join(got, ",") != "after,before" && strings.Join(got, ",") != "before,after" {
			t.Errorf("SMEMBERS %s = %q, %v; want before and after", k, got, err)
		}
	}
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		if r := do(t, c, "DBSIZE"); r != fmt.Sprintf(":%d\r\n", nkeys) {
			t.Errorf("%s: DBSIZE = %q, want %d", cp.id, r, nkeys)
		}
		raw := do(t, c, "RAFT.SHARD", "MAP")
		m, err := cluster.DecodeShardMap(testutil.ParseReply(raw).Str)
		if err != nil || len(m.Shards) != 3 || m.Shards[2].Members[0] != "n3" || cluster.SlotCount(m.Shards[2]) != 5461 {
			t.Errorf("%s: RAFT.SHARD MAP = %q, %v", cp.id, raw, err)
		}
		if r := do(t, c, "RAFT.SHARD", "2", "RAFT.INFO"); !strings.Contains(r, "member2:") {
			t.Errorf("%s: RAFT.SHARD 2 RAFT.INFO = %q, want three members", cp.id, r)
		}
	}
	// A restart with the same shard-map directive, which lacks shard 2:
	// the replicated map has it, and the process starts it from its
	// directory once it reads that map.
	nodes[2].p.stop(t)
	nodes[2].start(t)
	waitWritable(t, nodes[2].addr)
	testutil.WaitFor(t, 30*time.Second, "the restarted n3 to hold every key again", func() bool {
		c, err := testutil.DialRESP(nodes[2].addr, 2*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		r, err := c.Do("DBSIZE")
		return err == nil && r == fmt.Sprintf(":%d\r\n", nkeys)
	})
	for i := range nkeys {
		sadd(fmt.Sprintf("as:%d", i), "restarted")
	}
	if n, err := rdb.SCard(ctx, "as:7").Result(); err != nil || n != 3 {
		t.Errorf("SCARD as:7 after n3's restart = %d, %v; want 3", n, err)
	}
	clusterCheck(t, nodes[0].addr)
}
