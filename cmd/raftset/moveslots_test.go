package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestShardedMoveSlots runs three processes holding two shards each and
// moves slots 0-299 from shard 0 to shard 1 with `raftset cluster
// move-slots` while go-redis's ClusterClient adds members to sets across
// the moving range (and outside it). Afterwards every acknowledged member
// is present and nothing else, every key is stored once (DBSIZE on each
// process, which counts both shards, equals the number of keys: shard 0
// kept none of the moved ones), every node's CLUSTER SLOTS gives the range
// to shard 1's master, a node answers -MOVED for the range from the map,
// and redis-cli --cluster check agrees. The client never surfaced an error:
// its own retries rode through the frozen range's -TRYAGAIN and the
// -MOVED of the flip (docs/sharding.md, "-TRYAGAIN, not -ASK").
func TestShardedMoveSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3, "--cluster-enabled", "yes", "--shard-map", "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3")
	lc := dial(t, nodes[0].addr)
	const first, last = 0, 299
	var keys []string
	moving := map[string]bool{}
	for i := 0; len(moving) < 30; i++ {
		k := fmt.Sprintf("mv:%d", i)
		s := keySlot(t, lc, k)
		switch {
		case s >= first && s <= last:
			moving[k] = true
			keys = append(keys, k)
		case i%40 == 0:
			keys = append(keys, k) // a few keys that stay
		}
	}
	if len(moving) < 20 {
		t.Fatalf("only %d keys in the moving range", len(moving))
	}
	// slotsOwner is the master address every node's CLUSTER SLOTS gives
	// the range holding slot s, once all agree.
	slotsOwner := func(c *testutil.RESPClient, s int) string {
		rep := testutil.ParseReply(do(t, c, "CLUSTER", "SLOTS"))
		for _, r := range rep.Elems {
			if len(r.Elems) < 3 {
				continue
			}
			var lo, hi int
			fmt.Sscan(r.Elems[0].Str, &lo)
			fmt.Sscan(r.Elems[1].Str, &hi)
			if lo <= s && s <= hi {
				return r.Elems[2].Elems[0].Str + ":" + r.Elems[2].Elems[1].Str
			}
		}
		return ""
	}
	testutil.WaitFor(t, 30*time.Second, "both shards to have a master on every node", func() bool {
		for _, cp := range nodes {
			c, err := testutil.DialRESP(cp.addr, 2*time.Second)
			if err != nil {
				return false
			}
			ok := slotsOwner(c, 0) != "" && slotsOwner(c, 16383) != ""
			c.Close()
			if !ok {
				return false
			}
		}
		return true
	})

	ctx := context.Background()
	// Redirects and TRYAGAIN retries share MaxRedirects, with backoffs
	// of 8 ms doubling to 512 ms: 16 tries wait about 6 s in all.
	rdb := clusterClient(t, 5*time.Second, nodes...)
	// No retry here: the client's own (MaxRedirects) must ride through the
	// move's -TRYAGAIN and -MOVED.
	cw := &clusterWriters{keys: keys}
	cw.start(ctx, rdb, 7)
	cw.waitWrites(t, 200)
	mover := exec.Command(os.Args[0], "cluster", "move-slots", "--addr", nodes[2].addr, fmt.Sprint(first), fmt.Sprint(last), "1")
	mover.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
	out, err := mover.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "moved to shard 1") {
		t.Fatalf("raftset cluster move-slots: %v\n%s", err, out)
	}
	cw.waitWrites(t, 200)
	target := ""
	testutil.WaitFor(t, 10*time.Second, "every node to give the range to shard 1's master", func() bool {
		target = ""
		for _, cp := range nodes {
			c, err := testutil.DialRESP(cp.addr, 2*time.Second)
			if err != nil {
				return false
			}
			a, b := slotsOwner(c, first), slotsOwner(c, 16383)
			c.Close()
			if a == "" || a != b || (target != "" && a != target) {
				return false
			}
			target = a
		}
		return true
	})
	for _, cp := range nodes {
		if cp.addr == target {
			continue
		}
		c := dial(t, cp.addr)
		for k := range moving {
			s := keySlot(t, c, k)
			if r := do(t, c, "SCARD", k); r != fmt.Sprintf("-MOVED %d %s\r\n", s, target) {
				t.Errorf("%s: SCARD %s = %q, want MOVED to %s", cp.id, k, r, target)
			}
			break
		}
	}
	cw.stopAndCheck(t, ctx, rdb, nodes)
	clusterCheck(t, nodes[0].addr)
	t.Logf("%d members acknowledged across the move", cw.count.Load())
	cw.checkNoErrors(t, "the move")
}

// TestClusterCommandArgs: raftset cluster refuses what it cannot send.
func TestClusterCommandArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: raftset cluster create"},
		{[]string{"grow"}, 2, "usage: raftset cluster create"},
		{[]string{"help"}, 0, "usage: raftset cluster create"},
		{[]string{"move-slots", "1", "2"}, 2, "usage: raftset cluster create"},
		{[]string{"rebalance", "x"}, 2, "usage: raftset cluster create"},
		{[]string{"rebalance", "--addr", "127.0.0.1:1", "--timeout", "2s"}, 1, "raftset cluster rebalance: 127.0.0.1:1: "},
		{[]string{"create", "--shards", "2"}, 2, "usage: raftset cluster create"},
		{[]string{"create", "--shards", "2", "--replicas", "3", "a@127.0.0.1:1", "b@127.0.0.1:2"}, 2,
			"replication factor 3 with 2 nodes"},
		{[]string{"create", "--shards", "0", "a@127.0.0.1:1"}, 2, "0 shards: want at least 1"},
		{[]string{"create", "--shards", "1", "a"}, 2, `node "a": want ID@HOST:PORT`},
		{[]string{"create", "--shards", "1", "a@nohost"}, 2, `node a: client address "nohost"`},
		{[]string{"create", "--shards", "1", "--replicas", "1", "a@127.0.0.1:60000"}, 2, "client port 60000 + 10000 is no port"},
		{[]string{"create", "--shards", "1", "--replicas", "1", "a@127.0.0.1:1,x"}, 2, `node a: Raft address "x"`},
		{[]string{"move-slots", "1", "x", "2"}, 2, `"x" is not a slot or shard number`},
		{[]string{"move-slots", "--abort", "1"}, 2, "usage: raftset cluster create"},
		{[]string{"move-slots", "--abort", "1", "2", "3"}, 2, "usage: raftset cluster create"},
		{[]string{"move-slots", "0", "9", "1", "10"}, 2, "usage: raftset cluster create"},
		{[]string{"move-slots", "0", "9", "1", "10", "x", "2"}, 2, `"x" is not a slot or shard number`},
		{[]string{"rebalance", "--parallel", "0"}, 2, "usage: raftset cluster create"},
		{[]string{"move-slots", "--abort", "--addr", "127.0.0.1:1", "--timeout", "2s", "0", "9"}, 1, "raftset cluster move-slots --abort: 127.0.0.1:1: "},
		{[]string{"move-slots", "--addr", "127.0.0.1:1", "--timeout", "2s", "0", "9", "1", "10", "19", "2"}, 1, "raftset cluster move-slots: 127.0.0.1:1: "},
		{[]string{"move-slots", "--abort", "--addr", "127.0.0.1:1", "--timeout", "2s"}, 1, "raftset cluster move-slots --abort: 127.0.0.1:1: "},
		{[]string{"move-slots", "--addr", "127.0.0.1:1", "--timeout", "2s", "0", "9", "1"}, 1, "raftset cluster move-slots: 127.0.0.1:1: "},
	} {
		var out, errOut strings.Builder
		code := run(append([]string{"cluster"}, tc.args...), &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("raftset cluster %q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.err)
		}
	}
}
