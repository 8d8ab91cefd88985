package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/cluster"
	"raftset/internal/testutil"
)

// TestShardedRemoveShard: three processes holding two shards (`raftset
// cluster create`); `raftset cluster remove-shard` of shard 1 while it owns
// slots, of shard 0 (the metadata voters' shard) and of an unknown shard is
// refused with REMOVESHARD's error and the map unchanged; `move-slots`
// moves every slot of shard 1 to shard 0; the dry run and the run print
// what they do; then every process's map lacks the shard, every process
// closed its replica and kept its directory, CLUSTER SHARDS lists one
// shard, every key is there once (DBSIZE) and takes writes, a repeat says
// it was removed already and changes nothing, and redis-cli --cluster
// check is OK.
func TestShardedRemoveShard(t *testing.T) {
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
	const nkeys = 200
	for i := range nkeys {
		sadd(fmt.Sprintf("rs:%d", i), "before")
	}
	m0, err := shardMapOf(nodes[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	sh1, _ := m0.Shard(1)
	members := strings.Join(sh1.Members, ",")

	removeShard := func(a ...string) (int, string, string) {
		t.Helper()
		var out, errOut strings.Builder
		code := run(append([]string{"cluster", "remove-shard", "--timeout", "2m"}, a...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	prefix := "raftset cluster remove-shard: " + nodes[1].addr + ": "
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"1"}, "REMOVESHARD 1: ERR REMOVESHARD: shard 1 still owns 8192 slots (8192-16383): move them to other shards first (raftset cluster move-slots)\n"},
		{[]string{"--dry-run", "1"}, "REMOVESHARD 1 DRY-RUN: ERR REMOVESHARD: shard 1 still owns 8192 slots (8192-16383): move them to other shards first (raftset cluster move-slots)\n"},
		{[]string{"0"}, "REMOVESHARD 0: ERR REMOVESHARD: shard 0 is the first shard of the map the cluster was created with, through whose members processes started with the shard-map directive find the metadata group: it stays\n"},
		{[]string{"7"}, "REMOVESHARD 7: ERR REMOVESHARD: no shard 7\n"},
	} {
		code, out, errOut := removeShard(append([]string{"--addr", nodes[1].addr}, tc.args...)...)
		if code != 1 || out != "" || errOut != prefix+tc.wantErr {
			t.Errorf("remove-shard %q: exit %d, %q %q, want exit 1 and %q", tc.args, code, out, errOut, prefix+tc.wantErr)
		}
	}
	if code, out, errOut := removeShard("--addr", nodes[1].addr, "x"); code != 2 || out != "" || errOut != "raftset cluster remove-shard: \"x\" is not a shard id\n" {
		t.Errorf("remove-shard x: exit %d, %q %q", code, out, errOut)
	}
	if m, err := shardMapOf(nodes[0].addr); err != nil || m.Epoch != m0.Epoch {
		t.Errorf("the refused removals changed the map: %v, epoch %d, was %d", err, m.Epoch, m0.Epoch)
	}

	var out, errOut strings.Builder
	if code := run([]string{"cluster", "move-slots", "--addr", nodes[0].addr, "--timeout", "3m", "8192", "16383", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("move-slots 8192 16383 0: exit %d, %q %s", code, out.String(), errOut.String())
	}
	waitMaps(t, nodes, "shard 1 to own no slot", func(m *cluster.ShardMap) bool { sh, _ := m.Shard(1); return len(m.Moves) == 0 && len(sh.Ranges) == 0 })
	if code, out, errOut := removeShard("--dry-run", "--addr", nodes[2].addr, "1"); code != 0 || out != "remove shard 1 (no slot; replicas on "+members+")\n" {
		t.Fatalf("remove-shard --dry-run 1: exit %d, %q %s", code, out, errOut)
	}
	before, err := shardMapOf(nodes[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	want := "removed shard 1: " + members + " close their replicas within a map refresh; then delete shards/1 in their data directories\n"
	if code, out, errOut := removeShard("--addr", nodes[2].addr, "1"); code != 0 || out != want {
		t.Fatalf("remove-shard 1: exit %d, %q %s, want %q", code, out, errOut, want)
	}
	after := waitMaps(t, nodes, "shard 1 to be removed", func(m *cluster.ShardMap) bool { return slices.Equal(m.RemovedShards, []uint32{1}) })
	if after.Epoch != before.Epoch+1 || len(after.Shards) != 1 {
		t.Errorf("map after remove-shard 1: %q (epoch before %d)", after.Encode(), before.Epoch)
	}
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		testutil.WaitFor(t, 10*time.Second, cp.id+" to close its replica of shard 1", func() bool {
			return do(t, c, "RAFT.SHARD", "1", "RAFT.INFO") == "-ERR this node holds no replica of shard 1\r\n"
		})
		if _, err := os.Stat(filepath.Join(cp.dir, "shards", "1")); err != nil {
			t.Errorf("%s: shard 1's directory: %v (it stays for the operator)", cp.id, err)
		}
		if v := testutil.ParseReply(do(t, c, "CLUSTER", "SHARDS")); len(v.Elems) != 1 {
			t.Errorf("CLUSTER SHARDS on %s lists %d shards, want 1", cp.id, len(v.Elems))
		}
		if r := do(t, c, "DBSIZE"); r != fmt.Sprintf(":%d\r\n", nkeys) {
			t.Errorf("%s: DBSIZE = %q, want %d", cp.id, r, nkeys)
		}
	}
	for i := range nkeys {
		sadd(fmt.Sprintf("rs:%d", i), "after")
	}
	for i := range nkeys {
		k := fmt.Sprintf("rs:%d", i)
		got, err := rdb.SMembers(ctx, k).Result()
		slices.Sort(got)
		if err != nil || strings.Join(got, ",") != "after,before" {
			t.Errorf("SMEMBERS %s = %q, %v; want before and after", k, got, err)
		}
	}
	// A repeat (a lost reply) changes nothing.
	if code, out, errOut := removeShard("--addr", nodes[0].addr, "1"); code != 0 || out != "shard 1 was removed already\n" {
		t.Errorf("remove-shard 1 again: exit %d, %q %s", code, out, errOut)
	}
	if m, err := shardMapOf(nodes[0].addr); err != nil || m.Epoch != after.Epoch {
		t.Errorf("the repeated remove-shard changed the map: %v, epoch %d, was %d", err, m.Epoch, after.Epoch)
	}
	clusterCheck(t, nodes[0].addr)
}
