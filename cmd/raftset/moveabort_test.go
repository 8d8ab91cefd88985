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

// TestShardedAbortMove runs three processes holding two shards each, whose
// slot-move driver fails before the flip (debug-move-fault flip): `raftset
// cluster move-slots` of slots 0-99 to shard 1 fails with the range frozen
// in shard 0 and partly imported in shard 1, and `raftset cluster
// move-slots --abort` undoes it while go-redis's ClusterClient keeps adding
// members across the range. Afterwards the map has no move and gives the
// range to shard 0 on every node, the range takes writes again, every key
// is stored once (DBSIZE on each process, which counts both shards: shard 1
// dropped what it imported), every acknowledged member is present and
// nothing else, and the cluster client never surfaced an error: it rode
// the frozen range's -TRYAGAIN with its own retries.
func TestShardedAbortMove(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3, "--cluster-enabled", "yes", "--shard-map", "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3",
		"--enable-debug-flags", "yes", "--debug-move-fault", "flip")
	lc := dial(t, nodes[0].addr)
	const first, last = 0, 99
	var keys []string
	inRange := map[string]bool{}
	for i := 0; len(inRange) < 12; i++ {
		k := fmt.Sprintf("ab:%d", i)
		switch s := keySlot(t, lc, k); {
		case s >= first && s <= last:
			inRange[k] = true
			keys = append(keys, k)
		case i%50 == 0:
			keys = append(keys, k) // a few keys that stay out of it
		}
	}

	ctx := context.Background()
	// Redirects and TRYAGAIN retries share MaxRedirects, with backoffs
	// of 8 ms doubling to 512 ms: 16 tries wait about 6 s in all.
	rdb := clusterClient(t, 5*time.Second, nodes...)
	cw := &clusterWriters{keys: keys, counted: func(k string) bool { return inRange[k] }}
	cw.start(ctx, rdb, 7)
	cli := func(args ...string) (string, error) {
		c := exec.Command(os.Args[0], append([]string{"cluster", "move-slots", "--addr", nodes[1].addr, "--timeout", "60s"}, args...)...)
		c.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	cw.waitWrites(t, 100)
	if out, err := cli(fmt.Sprint(first), fmt.Sprint(last), "1"); err == nil || !strings.Contains(out, "debug-move-fault: failed before flip (run it again to resume)") {
		t.Fatalf("raftset cluster move-slots with a failure before the flip: %v\n%s", err, out)
	}
	testutil.WaitFor(t, 10*time.Second, "the half-done move in n1's map", func() bool {
		return strings.Contains(do(t, lc, "RAFT.SHARD", "MAP"), fmt.Sprintf("move %d-%d 0 1 ", first, last))
	})
	if out, err := cli("--abort"); err != nil || out != "no slot move in progress: any was aborted\n" {
		t.Fatalf("raftset cluster move-slots --abort: %v\n%s", err, out)
	}
	for _, cp := range nodes {
		testutil.WaitFor(t, 10*time.Second, cp.id+" to give the range back to shard 0", func() bool {
			c, err := testutil.DialRESP(cp.addr, 2*time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			r, err := c.Do("RAFT.SHARD", "MAP")
			return err == nil && strings.Contains(r, "shard 0:0-8191:") && !strings.Contains(r, "move ")
		})
	}
	cw.waitWrites(t, 100)
	cw.stopAndCheck(t, ctx, rdb, nodes)
	cw.checkNoErrors(t, "the aborted move")
}
