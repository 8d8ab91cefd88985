//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"os"
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
// They use the harness of harness_test.go and the nemesis of
// nemesis_test.go; see docs/jepsen.md.

// workloadScenario is the configuration of one run; it is written to
// config.json.
type workloadScenario struct {
	Name     string        `json:"name"`
	Seed     uint64        `json:"seed"`
	Nodes    int           `json:"nodes"`
	Duration time.Duration `json:"duration_ns"`
	Faults   []string      `json:"fault_kinds"`
	Lin      linWorkload   `json:"lin_workload"`
	Set      setWorkload   `json:"set_workload"`
	Queue    queueWorkload `json:"queue_workload"`
	TTL      ttlWorkload   `json:"ttl_workload"`
	// ClockOffsets: per node, a test-only --debug-clock-offset.
	ClockOffsets map[string]time.Duration `json:"clock_offsets_ns"`
	ClientTO     time.Duration            `json:"client_timeout_ns"`
	Recovery     time.Duration            `json:"recovery_ns"`
	CheckLimit   time.Duration            `json:"porcupine_timeout_ns"`
	Schedule     []fault                  `json:"schedule"`
}

// workloadResult is what a run found; it is written to result.json.
type workloadResult struct {
	Scenario       string             `json:"scenario"`
	Seed           uint64             `json:"seed"`
	Operations     int                `json:"operations"`
	OK             int                `json:"ok"`
	Failed         int                `json:"failed"`
	Indeterminate  int                `json:"indeterminate"`
	FaultsInjected int                `json:"faults_injected"`
	Lin            *check.LinResult   `json:"linearizability,omitempty"`
	Set            *check.SetResult   `json:"set,omitempty"`
	Queue          *check.QueueResult `json:"queue,omitempty"`
	TTL            *check.LinResult   `json:"ttl,omitempty"`
	TTLBounds      check.ClockBounds  `json:"ttl_clock_bounds"`
	TTLAlive       int                `json:"ttl_reads_alive"` // GET/TTL/PTTL that found the key
	TTLGone        int                `json:"ttl_reads_gone"`  // ... that found it gone after a SET with a TTL
	// TTLExactClocks: the TTL verdict had the checker assumed exact clocks
	// (only with clock offsets): Illegal shows the offset in the history.
	TTLExactClocks string   `json:"ttl_result_with_exact_clocks,omitempty"`
	Digest         string   `json:"digest"`
	ConvergedIn    string   `json:"converged_in"`
	LogProblems    []string `json:"log_problems"`
	Errors         []string `json:"errors"`
	Valid          bool     `json:"valid"`
}

// debugArgs appends test-only flags to a node's command line (before it
// starts; they hold across restarts).
func debugArgs(cl *procCluster, node string, args ...string) {
	n := cl.nodes[node]
	n.args = append(n.args, append([]string{"--enable-debug-flags", "yes"}, args...)...)
}

// runWorkloads starts a cluster, runs the workloads sc configures (any of
// per-key sets, Jepsen set, queue, TTL) with the nemesis for sc.Duration,
// heals, checks, writes artifacts and returns the result. It is
// runScenario's twin for the new workloads, until the matrix folds them in.
func runWorkloads(t *testing.T, sc workloadScenario) workloadResult {
	t.Helper()
	dir := artifactDir(t, sc.Name, sc.Seed)
	t.Logf("scenario %s seed %d: artifacts in %s (rerun with JEPSEN_SEED=%d)", sc.Name, sc.Seed, dir, sc.Seed)
	cl := newProcCluster(t, sc.Nodes, dir)
	if len(sc.Faults) > 0 {
		sc.Schedule = schedule(sc.Seed, sc.Faults, cl.Nodes(), sc.Duration-2*time.Second)
	}
	writeJSON(t, filepath.Join(dir, "config.json"), sc)
	rec, err := newRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var offsets []time.Duration
	for _, id := range cl.Nodes() {
		if off, ok := sc.ClockOffsets[id]; ok {
			debugArgs(cl, id, "--debug-clock-offset", off.String())
			rec.write(check.ClockOffsetEvent(id, off))
			offsets = append(offsets, off)
		}
	}
	res := workloadResult{Scenario: sc.Name, Seed: sc.Seed, TTLBounds: check.BoundsFor(offsets...)}
	fail := func(format string, args ...any) { res.Errors = append(res.Errors, fmt.Sprintf(format, args...)) }
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration)
	defer cancel()
	ids := &procIDs{}
	done := make(chan struct{}, 5)
	var adds []op
	go func() {
		if sc.Lin.Workers > 0 {
			sc.Lin.run(ctx, rec, cl, ids, sc.Seed, sc.ClientTO)
		}
		done <- struct{}{}
	}()
	go func() {
		if sc.Set.Workers > 0 {
			adds = sc.Set.run(ctx, rec, cl, ids, sc.ClientTO)
		}
		done <- struct{}{}
	}()
	go func() {
		if sc.Queue.Producers > 0 {
			sc.Queue.run(ctx, rec, cl, ids, sc.ClientTO)
		}
		done <- struct{}{}
	}()
	go func() {
		if sc.TTL.Workers > 0 {
			sc.TTL.run(ctx, rec, cl, ids, sc.Seed, sc.ClientTO)
		}
		done <- struct{}{}
	}()
	go func() {
		res.FaultsInjected = runNemesis(ctx, cl, rec, sc.Schedule, t.Logf)
		done <- struct{}{}
	}()
	for range 5 {
		<-done // each goroutine is bounded by ctx and MaxOps
	}

	rec.nemesis("heal", "resume and restart all")
	if err := healAll(cl); err != nil {
		fail("heal: %v", err)
	}
	if err := waitReady(cl, sc.Recovery); err != nil {
		fail("after heal: %v", err)
	}
	var finals, setFinals [][]int64
	if sc.Set.Workers > 0 {
		if setFinals, err = finalReads(cl, sc.Set.Key, sc.Recovery); err != nil {
			fail("final read: %v", err)
		}
		rec.finalReads(sc.Set.Key, cl.Nodes(), setFinals)
	}
	if sc.Queue.Producers > 0 {
		if finals, err = finalReads(cl, sc.Queue.Key, sc.Recovery); err != nil {
			fail("final read: %v", err)
		}
		rec.finalReads(sc.Queue.Key, cl.Nodes(), finals)
	}
	digest, took, err := converge(cl, sc.Recovery)
	if err != nil {
		fail("convergence: %v", err)
	}
	res.Digest, res.ConvergedIn = digest, took.String()
	rec.nemesis("final", "final reads and digests done")
	if err := cl.Stop(); err != nil {
		fail("stop: %v", err)
	}
	res.LogProblems = scanLogs(cl)

	ops := rec.operations()
	for _, o := range ops {
		if o.Proc == check.FinalProc {
			continue
		}
		res.Operations++
		switch o.Outcome {
		case outOK:
			res.OK++
		case outFail:
			res.Failed++
		default:
			res.Indeterminate++
		}
	}
	res.Valid = len(res.Errors) == 0 && len(res.LogProblems) == 0
	if sc.Lin.Workers > 0 {
		lr, err := check.Linearizable(check.ByKeyPrefix(ops, "lin:"), filepath.Join(dir, "linearizability.html"), sc.CheckLimit)
		if err != nil {
			fail("linearizability check: %v", err)
		}
		res.Lin = &lr
		res.Valid = res.Valid && lr.Result == string(porcupine.Ok)
	}
	if sc.Set.Workers > 0 {
		sr := check.Set(adds, setFinals)
		res.Set = &sr
		res.Valid = res.Valid && sr.OK()
	}
	if sc.Queue.Producers > 0 {
		q := check.Queue(check.ByKeyPrefix(ops, sc.Queue.Key), finals)
		res.Queue = &q
		res.Valid = res.Valid && q.OK()
	}
	if sc.TTL.Workers > 0 {
		ttlOps := check.ByKeyPrefix(ops, "ttl:")
		res.TTLAlive, res.TTLGone = ttlObservations(ttlOps)
		lr, err := check.TTL(ttlOps, res.TTLBounds, filepath.Join(dir, "ttl.html"), sc.CheckLimit)
		if err != nil {
			fail("TTL check: %v", err)
		}
		res.TTL = &lr
		res.Valid = res.Valid && lr.Result == string(porcupine.Ok)
		if len(offsets) > 0 {
			exact, err := check.TTL(ttlOps, check.BoundsFor(), "", sc.CheckLimit)
			if err != nil {
				fail("TTL check with exact clocks: %v", err)
			}
			res.TTLExactClocks = exact.Result
		}
	}
	writeJSON(t, filepath.Join(dir, "result.json"), res)
	t.Logf("%s seed %d: %d ops (%d ok, %d fail, %d info), %d faults; queue %+v; TTL %+v (bounds %+v, %d alive / %d gone reads; with exact clocks %q); digest converged in %s; valid=%v",
		sc.Name, sc.Seed, res.Operations, res.OK, res.Failed, res.Indeterminate, res.FaultsInjected,
		res.Queue, res.TTL, res.TTLBounds, res.TTLAlive, res.TTLGone, res.TTLExactClocks, res.ConvergedIn, res.Valid)
	return res
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

func assertWorkloadsValid(t *testing.T, sc workloadScenario, res workloadResult) {
	t.Helper()
	for _, e := range res.Errors {
		t.Error(e)
	}
	for _, l := range res.LogProblems {
		t.Errorf("node log: %s", l)
	}
	if res.Lin != nil && res.Lin.Result != string(porcupine.Ok) {
		t.Errorf("linearizability: %s (see %s)", res.Lin.Result, res.Lin.Visualization)
	}
	if res.Set != nil && !res.Set.OK() {
		t.Errorf("set workload: %+v", *res.Set)
	}
	if res.Queue != nil && !res.Queue.OK() {
		t.Errorf("queue workload: %+v", *res.Queue)
	}
	if res.TTL != nil && res.TTL.Result != string(porcupine.Ok) {
		t.Errorf("TTL keys: porcupine %s (see %s)", res.TTL.Result, res.TTL.Visualization)
	}
	if len(sc.Faults) > 0 && res.FaultsInjected == 0 {
		t.Errorf("no fault injected")
	}
	if !res.Valid && !t.Failed() {
		t.Errorf("run invalid: %+v", res)
	}
}

func queueScenario(seed uint64, d time.Duration) workloadScenario {
	return workloadScenario{
		Name: "queue", Seed: seed, Nodes: 3, Duration: d, Faults: faultsKillPause,
		Queue:    queueWorkload{Producers: 3, Consumers: 3, Key: "queue:jobs", MaxOps: 100000},
		ClientTO: 2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
}

func ttlScenario(seed uint64, d time.Duration) workloadScenario {
	return workloadScenario{
		Name: "ttl-clock-ahead", Seed: seed, Nodes: 3, Duration: d, Faults: faultsKillPause,
		TTL: ttlWorkload{Workers: 6, GroupSize: 3, OpsPerKey: 60, MinTTL: 300 * time.Millisecond,
			MaxTTL: 2500 * time.Millisecond, Think: 25 * time.Millisecond, MaxOps: 100000},
		ClockOffsets: map[string]time.Duration{"n1": 250 * time.Millisecond},
		ClientTO:     2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 120 * time.Second,
	}
}

// TestJepsenQueue: SPOP as a queue under kill -9 / SIGSTOP: no element
// popped twice, no acknowledged element lost, nothing invented.
func TestJepsenQueue(t *testing.T) {
	sc := queueScenario(seedFor(t), duration(t, 60*time.Second))
	res := runWorkloads(t, sc)
	assertWorkloadsValid(t, sc, res)
	if res.Queue.Acknowledged < 100 || res.Queue.Pops < 100 {
		t.Errorf("too little traffic to mean anything: %d acknowledged adds, %d pops", res.Queue.Acknowledged, res.Queue.Pops)
	}
}

// TestJepsenTTL: keys with TTLs under kill -9 / SIGSTOP with n1's clock
// 250 ms ahead (clock-ahead) or behind (clock-behind); the TTL model must
// accept the history with the offset's uncertainty, reject it without
// (the offset took effect and the checker can fail), and keys must have
// been seen both alive and expired.
func TestJepsenTTL(t *testing.T) {
	for _, c := range []struct {
		name   string
		offset time.Duration
	}{{"clock-ahead", 250 * time.Millisecond}, {"clock-behind", -250 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			sc := ttlScenario(seedFor(t), duration(t, 60*time.Second))
			sc.Name = "ttl-" + c.name
			sc.ClockOffsets = map[string]time.Duration{"n1": c.offset}
			res := runWorkloads(t, sc)
			assertWorkloadsValid(t, sc, res)
			if res.TTL.Operations < 100 || res.TTLAlive < 50 || res.TTLGone < 20 {
				t.Errorf("too little traffic to mean anything: %d ops, %d reads alive, %d gone",
					res.TTL.Operations, res.TTLAlive, res.TTLGone)
			}
			// The checker can fail on this very history: told that every
			// clock is exact, it must find n1's offset.
			if res.TTLExactClocks != string(porcupine.Illegal) {
				t.Errorf("assuming exact clocks, the TTL checker says %q: the offset did not show", res.TTLExactClocks)
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
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader(10 * time.Second)
	if leader == "" {
		t.Fatal("no leader")
	}
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
	sc := workloadScenario{
		Name: "recheck-mixed", Seed: seedFor(t), Nodes: 3, Duration: duration(t, 4*time.Second),
		Lin:   linWorkload{Workers: 3, GroupSize: 3, OpsPerKey: 50, Elems: 8, MaxOps: 100},
		Set:   setWorkload{Workers: 2, Key: "set:full", MaxOps: 100},
		Queue: queueWorkload{Producers: 2, Consumers: 2, Key: "queue:jobs", MaxOps: 100},
		TTL: ttlWorkload{Workers: 3, GroupSize: 3, OpsPerKey: 40, MinTTL: 300 * time.Millisecond,
			MaxTTL: 1500 * time.Millisecond, Think: 25 * time.Millisecond, MaxOps: 100},
		ClockOffsets: map[string]time.Duration{"n1": 250 * time.Millisecond},
		ClientTO:     2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
	res := runWorkloads(t, sc)
	assertWorkloadsValid(t, sc, res)
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

func artifactPath(name string, seed uint64) string {
	root := os.Getenv("JEPSEN_OUT")
	if root == "" {
		root = "artifacts"
	}
	return filepath.Join(root, fmt.Sprintf("%s-%d", name, seed))
}
