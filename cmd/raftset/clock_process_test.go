package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// transferTo makes target the leader with RAFT.TRANSFER (sent to any node:
// a follower relays it) and waits until every node names it.
func transferTo(t *testing.T, nodes []*clusterProc, target *clusterProc) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "leadership to move to "+target.id, func() bool {
		if l := leaderOf(t, nodes, nil); l == target {
			return true
		}
		c, err := testutil.DialRESP(target.addr, 5*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		r, err := c.Do("RAFT.TRANSFER", target.id)
		if err != nil || r != "+OK\r\n" {
			t.Logf("RAFT.TRANSFER %s = %q, %v (retrying)", target.id, r, err)
			return false
		}
		return leaderOf(t, nodes, nil) == target
	})
}

// doSettled is do, retried while the reply says to retry (a follower that
// has not yet reached the leader that just took over).
func doSettled(t *testing.T, c *testutil.RESPClient, args ...string) string {
	t.Helper()
	var r string
	testutil.WaitFor(t, 10*time.Second, "a reply other than TRYAGAIN to "+strings.Join(args, " "), func() bool {
		r = do(t, c, args...)
		return !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN")
	})
	return r
}

// ttlEverywhere asks every node (linearizable reads, followers included)
// for key's value and TTL, and fails unless each has want with a TTL in
// [lo, hi] seconds.
func ttlEverywhere(t *testing.T, nodes []*clusterProc, key, want string, lo, hi int64) {
	t.Helper()
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		if r := doSettled(t, c, "GET", key); r != "$"+strconv.Itoa(len(want))+"\r\n"+want+"\r\n" {
			t.Errorf("%s: GET %s = %q, want %q", cp.id, key, r, want)
		}
		r := doSettled(t, c, "TTL", key)
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r, ":"), "\r\n"), 10, 64)
		if err != nil || n < lo || n > hi {
			t.Errorf("%s: TTL %s = %q, want %d..%d", cp.id, key, r, lo, hi)
		}
	}
}

// clockOffsetMs reads INFO raft's raft_cluster_clock_offset_ms on cp: how
// far the cluster clock is from cp's wall clock.
func clockOffsetMs(t *testing.T, cp *clusterProc) int64 {
	t.Helper()
	info := do(t, dial(t, cp.addr), "INFO", "raft")
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "raft_cluster_clock_offset_ms:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", cp.id, line)
			}
			return n
		}
	}
	t.Fatalf("%s: no raft_cluster_clock_offset_ms in %q", cp.id, info)
	return 0
}

// TestSkewedFailoverKeepsTTLs is issue 11's scenario on the real binary.
// The cluster starts with every clock an hour ahead, so its time is an
// hour ahead; then n2 restarts with a true clock and n3 with one an hour
// behind, and leadership moves to n2, to n3, then back to n1. After each
// move a SET ... EX 60 on the new leader is readable on every node with a
// TTL of about 60 s, and keys set earlier keep counting down at real
// speed: the cluster clock neither jumps to a new leader's wall clock nor
// lets a deadline set under a fast clock pass early.
func TestSkewedFailoverKeepsTTLs(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	debug := func(off string) []string {
		return []string{"--enable-debug-flags", "yes", "--debug-clock-offset", off}
	}
	nodes := startClusterWith(t, 3, map[string][]string{"n1": debug("1h"), "n2": debug("1h"), "n3": debug("1h")})
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	transferTo(t, nodes, n1)
	if r := do(t, dial(t, n1.addr), "SET", "before", "v0", "EX", "60"); r != "+OK\r\n" {
		t.Fatalf("SET on n1 = %q", r)
	}
	ttlEverywhere(t, nodes, "before", "v0", 55, 60)

	// n2's clock becomes true, n3's an hour behind (restarts: the flags
	// hold for a process's life).
	for _, c := range []struct {
		cp  *clusterProc
		off []string
	}{{n2, nil}, {n3, debug("-1h")}} {
		c.cp.p.kill9(t)
		c.cp.extra = append(c.cp.extra[:len(c.cp.extra)-4:len(c.cp.extra)-4], c.off...)
		c.cp.start(t)
		waitWritable(t, c.cp.addr)
	}

	// The report: with the state machine's clock the maximum of
	// every entry's time, this SET was acknowledged and gone at once.
	transferTo(t, nodes, n2)
	if off := clockOffsetMs(t, n2); off < 3500_000 || off > 3600_000 {
		t.Fatalf("n2 leads with the cluster clock %d ms from its wall clock, want about an hour ahead", off)
	}
	// TIME answers the cluster clock, not n2's true wall clock.
	if r := testutil.ParseReply(do(t, dial(t, n2.addr), "TIME")); len(r.Elems) != 2 {
		t.Fatalf("TIME on n2 = %s", r)
	} else if sec, _ := strconv.ParseInt(r.Elems[0].Str, 10, 64); sec < time.Now().Unix()+3500 || sec > time.Now().Unix()+3700 {
		t.Errorf("TIME on n2 = %d, want about an hour after its wall clock %d", sec, time.Now().Unix())
	}
	if r := do(t, dial(t, n2.addr), "SET", "session", "v", "EX", "60"); r != "+OK\r\n" {
		t.Fatalf("SET on n2 = %q", r)
	}
	ttlEverywhere(t, nodes, "session", "v", 55, 60)
	ttlEverywhere(t, nodes, "before", "v0", 40, 60)

	// A leader an hour behind the true time, two behind the cluster: the
	// cluster clock does not go back to its wall clock (keys would live
	// hours too long) and nothing expires.
	transferTo(t, nodes, n3)
	if off := clockOffsetMs(t, n3); off < 7100_000 || off > 7200_000 {
		t.Fatalf("n3 leads with the cluster clock %d ms from its wall clock, want about two hours ahead", off)
	}
	if r := do(t, dial(t, n3.addr), "SET", "behind", "v3", "EX", "60"); r != "+OK\r\n" {
		t.Fatalf("SET on n3 = %q", r)
	}
	ttlEverywhere(t, nodes, "behind", "v3", 55, 60)
	ttlEverywhere(t, nodes, "session", "v", 40, 60)

	// And back to the fast clock: nothing expires early either.
	transferTo(t, nodes, n1)
	ttlEverywhere(t, nodes, "behind", "v3", 40, 60)
	ttlEverywhere(t, nodes, "session", "v", 30, 60)
	ttlEverywhere(t, nodes, "before", "v0", 20, 60)
}
