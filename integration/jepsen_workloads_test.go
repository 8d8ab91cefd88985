//go:build jepsen

package integration

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"raftset/integration/check"
	"raftset/internal/testutil"
)

// Scenarios for workloads (c) TTL keys under a clock offset and (d) SPOP as
// a queue, and the ack-before-commit run that the set checker must fail.
// The TTL and queue runs are scenarios of the one runner (runner_test.go)
// without its cluster checks; see docs/jepsen.md.

// debugArgs appends test-only flags to a node's command line (before it
// starts; they hold across restarts).
func debugArgs(cl *procCluster, node string, args ...string) {
	n := cl.nodes[node]
	n.args = append(n.args, append([]string{"--enable-debug-flags", "yes"}, args...)...)
}

// ttlObservations counts the ok reads that found a key alive and those
// that found it gone although a SET with a TTL had been acknowledged on it
// (expiry observed, not just a key never written).
func ttlObservations(ops []op) (alive, gone int) {
	expiring := map[string]bool{}
	for _, o := range ops {
		if o.F == "set" && o.Outcome == outOK && o.TTLms > 0 {
			expiring[o.Key] = true
		}
	}
	for _, o := range ops {
		if o.Outcome != outOK {
			continue
		}
		switch {
		case o.F == "get" && !o.Nil, (o.F == "ttl" || o.F == "pttl") && o.N >= 0:
			alive++
		case expiring[o.Key] && (o.F == "get" && o.Nil || (o.F == "ttl" || o.F == "pttl") && o.N == -2):
			gone++
		}
	}
	return alive, gone
}

func queueScenario(seed uint64, d time.Duration) scenario {
	return scenario{
		Name: "queue", Seed: seed, Backend: "procs", Nodes: 3, Duration: d, Faults: faultsKillPause,
		Queue:    queueWorkload{Producers: 3, Consumers: 3, Key: "queue:jobs", MaxOps: 100000},
		ClientTO: 2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
}

func ttlScenario(seed uint64, d time.Duration) scenario {
	return scenario{
		Name: "ttl-clock-ahead", Seed: seed, Backend: "procs", Nodes: 3, Duration: d, Faults: faultsKillPause,
		TTL: ttlWorkload{Workers: 6, GroupSize: 3, OpsPerKey: 60, MinTTL: 300 * time.Millisecond,
			MaxTTL: 2500 * time.Millisecond, Think: 25 * time.Millisecond, MaxOps: 100000, Probers: 2},
		ClockOffsets: map[string]time.Duration{"n1": 250 * time.Millisecond},
		ClientTO:     2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 120 * time.Second,
	}
}

// TestJepsenQueue: SPOP as a queue under kill -9 / SIGSTOP: no element
// popped twice, no acknowledged element lost, nothing invented.
func TestJepsenQueue(t *testing.T) {
	sc := queueScenario(seedFor(t), duration(t, 60*time.Second))
	res := runScenario(t, sc)
	assertValid(t, sc, res)
	if res.Queue.Acknowledged < 100 || res.Queue.Pops < 100 {
		t.Errorf("too little traffic to mean anything: %d acknowledged adds, %d pops", res.Queue.Acknowledged, res.Queue.Pops)
	}
}

// ttlMinSlewing is the slew a TTL row must measure: cluster time moves
// 500 ms against real time meanwhile (50 ms a second), half a crossing of
// the ±1 s rows' clocks, and every TTL set during it lasts 5% longer or
// shorter (up to 125 ms of a 2.5 s one), far past exact clocks' 5 ms.
// Quiet runs measured 32-55 s; the minimum leaves room for a loaded CI
// machine, where the faults keep hitting the one skewed node of the
// ±1 s rows.
const ttlMinSlewing = 10 * time.Second

// TestJepsenTTL: keys with TTLs under kill -9 / SIGSTOP with n1's clock
// a second ahead (clock-ahead) or behind (clock-behind), and with n1's clock
// an hour ahead and n2's an hour behind while leadership moves between
// the nodes (RAFT.TRANSFER) besides kill -9 and SIGSTOP of the leader
// (clock-hour-transfers); the TTL model must accept the history with the
// cluster clock's uncertainty (check.ClusterBounds), reject it assuming
// exact clocks (the offsets took effect through the slew and the checker
// can fail), and keys must have been seen both alive and expired.
//
// An offset shows only while cluster time slews (TTLs last up to 5%
// longer or shorter), for offset/5% after leadership crosses clocks: with
// 250 ms that was 5 s, which a leader kill 2-4 s in could cut to nothing
// visible (CI, clock-behind seed 681425655: exact clocks "Ok" once in
// several runs). A second gives 20 s of slew per crossing. Crossings were
// left to the faults, though: a kill or pause could hand leadership back
// to the node whose clock was cluster time for the rest of the run
// (clock-hour-transfers seed 979884377: exact clocks "Ok"). So the rows
// keep the slew going (scenario.KeepSlewing: transfers go across clocks,
// and leadership is moved off a node whose clock is cluster time), and
// each run measures it and must reach ttlMinSlewing, so that the
// exact-clocks check has a slew to find in every run; and two expiry
// probers (workload_ttl_test.go) read keys just before and after their
// expiry, where the slew shows (slew alone once left exact clocks "Ok":
// clock-behind seed 797983218).
func TestJepsenTTL(t *testing.T) {
	for _, c := range []struct {
		name    string
		offsets map[string]time.Duration
		faults  []string
	}{
		{"clock-ahead", map[string]time.Duration{"n1": time.Second}, faultsKillPause},
		{"clock-behind", map[string]time.Duration{"n1": -time.Second}, faultsKillPause},
		{"clock-hour-transfers", map[string]time.Duration{"n1": time.Hour, "n2": -time.Hour},
			[]string{faultTransfer, faultTransfer, faultTransfer, "kill-leader", "pause-leader"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := ttlScenario(seedFor(t), duration(t, 60*time.Second))
			sc.Name = "ttl-" + c.name
			sc.ClockOffsets, sc.Faults = c.offsets, c.faults
			sc.KeepSlewing, sc.MinSlewing = true, ttlMinSlewing
			res := runScenario(t, sc)
			assertValid(t, sc, res)
			if res.TTL.Operations < 100 || res.TTLAlive < 50 || res.TTLGone < 20 {
				t.Errorf("too little traffic to mean anything: %d ops, %d reads alive, %d gone",
					res.TTL.Operations, res.TTLAlive, res.TTLGone)
			}
			// The checker can fail on this very history: told that every
			// clock is exact, it must find the slew the offsets caused
			// (assertValid failed the run if it slewed too little).
			if res.TTLExactClocks != string(porcupine.Illegal) {
				t.Errorf("assuming exact clocks, the TTL checker says %q: the offsets did not show", res.TTLExactClocks)
			}
		})
	}
}

// --- the checker can fail: acknowledging writes before they commit ---------

// TestCheckerFlagsAckBeforeCommit is a real run against an unsafe
// configuration: every node runs with the test-only
// --debug-ack-before-commit, so the leader answers a SADD as soon as it
// hands the entry to Raft. Clients SADD unique elements to the leader; the
// nemesis kills both followers with kill -9 (so nothing written after that
// can reach a quorum, not even through a socket buffer), lets the leader
// acknowledge writes until it steps down, kills it, restarts the followers,
// waits until they have a leader that committed an entry of its own term,
// and only then restarts the old leader, whose uncommitted entries are
// overwritten. The set checker must report lost acknowledged adds. The same
// schedule without the switch must lose nothing.
func TestCheckerFlagsAckBeforeCommit(t *testing.T) {
	for _, unsafe := range []bool{true, false} {
		name := "ack-before-commit"
		if !unsafe {
			name = "ack-after-commit"
		}
		t.Run(name, func(t *testing.T) {
			res := runAckScenario(t, name, unsafe)
			if unsafe && len(res.Lost) == 0 {
				t.Fatalf("the set checker found no lost acknowledged adds with ack-before-commit: %+v", res)
			}
			if !unsafe && !res.ok() {
				t.Fatalf("the same faults lost writes without the switch: %+v", res)
			}
		})
	}
}

func runAckScenario(t *testing.T, name string, unsafe bool) setResult {
	seed := seedFor(t)
	dir := artifactDir(t, name, seed)
	const key = "set:acked"
	cl := newProcCluster(t, 3, dir)
	if unsafe {
		for _, id := range cl.Nodes() {
			debugArgs(cl, id, "--debug-ack-before-commit", "yes")
		}
	}
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"name": name, "seed": seed, "nodes": 3,
		"ack_before_commit": unsafe, "writers": 3, "key": key, "client_timeout": "2s",
		"nemesis": "kill -9 both followers; leader acknowledges until it steps down; kill -9 leader; restart followers; commit through their leader; restart old leader"})
	rec, err := newRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	leader := startWithLeader(t, cl)
	li := 0
	var followers []string
	for i, id := range cl.Nodes() {
		if id == leader {
			li = i
		} else {
			followers = append(followers, id)
		}
	}

	// Writers pinned to the leader, unique elements, until stopped.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ids := &procIDs{}
	var adds []op
	addsDone := make(chan struct{})
	var next atomic.Int64
	go func() {
		defer close(addsDone)
		adds = pinnedAdders(ctx, rec, cl, ids, li, 3, key, &next)
	}()
	acked := func(after int64) int {
		n := 0
		for _, o := range rec.operations() {
			if o.F == "sadd" && o.Outcome == outOK && o.Call >= after {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 20*time.Second, "100 acknowledged adds before the faults", func() bool { return acked(0) >= 100 })

	killAt := rec.now()
	for _, f := range followers {
		if err := cl.Kill9(f); err != nil {
			t.Fatal(err)
		}
		rec.nemesis("start-kill", f+" (follower)")
	}
	// The leader keeps answering until its lease runs out and it steps
	// down; with the switch it acknowledges what arrives meanwhile.
	testutil.WaitFor(t, 20*time.Second, "the cut-off leader to step down", func() bool { return !isMaster(cl.Addr(leader)) })
	ackedAfter := acked(killAt)
	if err := cl.Kill9(leader); err != nil {
		t.Fatal(err)
	}
	rec.nemesis("start-kill", leader+" (leader)")
	stop()
	<-addsDone

	for _, f := range followers {
		if err := cl.Restart(f); err != nil {
			t.Fatal(err)
		}
		rec.nemesis("stop-kill", f)
	}
	if cl.Leader(30*time.Second) == "" {
		t.Fatal("the restarted followers elected no leader")
	}
	// A write committed in the new leader's term: from now on the old
	// leader's uncommitted entries can only be overwritten.
	testutil.WaitFor(t, 30*time.Second, "a write committed by the new leader", func() bool {
		c, err := dialConn(cl.Addr(followers[0]), 2*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		r, err := c.Do("SADD", "jepsen:barrier", "x")
		return err == nil && r.Kind == ':'
	})
	if err := cl.Restart(leader); err != nil {
		t.Fatal(err)
	}
	rec.nemesis("stop-kill", leader)
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	finals, err := finalReads(cl, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec.finalReads(key, cl.Nodes(), finals)
	if _, _, err := converge(cl, 30*time.Second); err != nil {
		t.Error(err)
	}
	res := checkSet(adds, finals)
	writeJSON(t, filepath.Join(dir, "result.json"), map[string]any{"set": res, "acked_after_followers_killed": ackedAfter,
		"lost": len(res.Lost)})
	t.Logf("%s seed %d: %d adds attempted, %d acknowledged (%d after the followers died), %d lost, %d recovered, final size %d",
		name, seed, res.Attempted, res.Acknowledged, ackedAfter, len(res.Lost), res.Recovered, res.FinalSize)
	rec.Close()
	// The saved history alone gives the same verdict.
	rep, err := check.Recheck(dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if again := rep.Sets[key]; len(again.Lost) != len(res.Lost) || again.Acknowledged != res.Acknowledged || rep.Valid != res.ok() {
		t.Errorf("recheck of %s: %+v, the run found %+v", dir, rep, res)
	}
	return res
}

// pinnedAdders runs n workers pinned to node index ni that SADD unique
// elements to key until ctx ends, and returns their ops.
func pinnedAdders(ctx context.Context, rec *recorder, cl Cluster, ids *procIDs, ni, n int, key string, next *atomic.Int64) []op {
	var mu sync.Mutex
	var adds []op
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: ni, timeout: 2 * time.Second, pin: true}
			defer func() {
				if w.c != nil {
					w.c.Close()
				}
			}()
			for i := 0; i < 1_000_000 && ctx.Err() == nil; i++ {
				if !w.connect(ctx) {
					continue
				}
				o := w.do("sadd", key, next.Add(1))
				mu.Lock()
				adds = append(adds, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return adds
}

// isMaster: the node answers ROLE with master.
func isMaster(addr string) bool {
	c, err := dialConn(addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	r, err := c.Do("ROLE")
	return err == nil && len(r.Elems) > 0 && r.Elems[0].Str == "master"
}

// TestRecheckSavedHistory: a short run of all four workloads (no faults,
// n1's clock 250 ms ahead) saves a history from which check.Recheck (the
// recheck command) alone reaches the verdicts the run reached.
// integration/testdata/recheck/mixed is one such history.
func TestRecheckSavedHistory(t *testing.T) {
	sc := scenario{
		Name: "recheck-mixed", Seed: seedFor(t), Backend: "procs", Nodes: 3, Duration: duration(t, 4*time.Second),
		Lin:   linWorkload{Workers: 3, GroupSize: 3, OpsPerKey: 50, Elems: 8, MaxOps: 100},
		Set:   setWorkload{Workers: 2, Key: "set:full", MaxOps: 100},
		Queue: queueWorkload{Producers: 2, Consumers: 2, Key: "queue:jobs", MaxOps: 100},
		TTL: ttlWorkload{Workers: 3, GroupSize: 3, OpsPerKey: 40, MinTTL: 300 * time.Millisecond,
			MaxTTL: 1500 * time.Millisecond, Think: 25 * time.Millisecond, MaxOps: 100},
		ClockOffsets: map[string]time.Duration{"n1": 250 * time.Millisecond},
		ClientTO:     2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
	res := runScenario(t, sc)
	assertValid(t, sc, res)
	rep, err := check.Recheck(artifactPath(sc.Name, sc.Seed), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid || rep.Lin == nil || rep.TTL == nil || len(rep.Sets) != 1 || len(rep.Queues) != 1 {
		t.Fatalf("recheck: %+v", rep)
	}
	if rep.Lin.Operations != res.Lin.Operations || rep.TTL.Operations != res.TTL.Operations ||
		rep.Sets[sc.Set.Key].Acknowledged != res.Set.Acknowledged || rep.Queues[sc.Queue.Key].Pops != res.Queue.Pops ||
		*rep.Bounds != res.TTLBounds {
		t.Fatalf("recheck disagrees with the run:\nrecheck %+v\nrun     %+v", rep, res)
	}
}
