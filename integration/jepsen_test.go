//go:build jepsen

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// scenario is the configuration of one run; it is written to config.json.
type scenario struct {
	Name    string `json:"name"`
	Seed    uint64 `json:"seed"`
	Backend string `json:"backend"` // procs (loopback), netns, docker
	Nodes   int    `json:"nodes"`
	// ServerArgs go to every node (snapshot knobs).
	ServerArgs []string      `json:"server_args,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
	Faults     []string      `json:"fault_kinds"`
	Lin        linWorkload   `json:"lin_workload"`
	Set        setWorkload   `json:"set_workload"`
	ClientTO   time.Duration `json:"client_timeout_ns"`
	Recovery   time.Duration `json:"recovery_ns"`
	Schedule   []fault       `json:"schedule"`
	CheckLimit time.Duration `json:"porcupine_timeout_ns"`
	// MinSnapshotInstalls: the run fails unless a node restarted by the
	// snapshot-catchup fault logged that many snapshot installs.
	MinSnapshotInstalls int `json:"min_snapshot_installs,omitempty"`
}

// result is what a run found; it is written to result.json.
type result struct {
	Scenario       string       `json:"scenario"`
	Seed           uint64       `json:"seed"`
	Operations     int          `json:"operations"`
	OK             int          `json:"ok"`
	Failed         int          `json:"failed"`
	Indeterminate  int          `json:"indeterminate"`
	FaultsInjected int          `json:"faults_injected"`
	Nemesis        nemesisStats `json:"nemesis"`
	Lin            linResult    `json:"linearizability"`
	Set            setResult    `json:"set"`
	Leaders        leaderTerms  `json:"leaders_per_term"`
	Digest         string       `json:"digest"`
	ConvergedIn    string       `json:"converged_in"`
	LogProblems    []string     `json:"log_problems"`
	Errors         []string     `json:"errors"`
	Valid          bool         `json:"valid"`
}

// seedFor: JEPSEN_SEED if set to a number, else the clock.
func seedFor(t *testing.T) uint64 {
	if s := os.Getenv("JEPSEN_SEED"); s != "" && s != "random" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("JEPSEN_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano() % 1_000_000_000)
}

func artifactDir(t *testing.T, name string, seed uint64) string {
	t.Helper()
	root := os.Getenv("JEPSEN_OUT")
	if root == "" {
		root = "artifacts"
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", name, seed))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newCluster builds the scenario's backend (not started).
func newCluster(t *testing.T, sc scenario, dir string) Cluster {
	switch sc.Backend {
	case "", "procs":
		return newProcClusterWith(t, clusterOpts{Nodes: sc.Nodes, Args: sc.ServerArgs}, dir)
	case "netns":
		return newProcClusterWith(t, clusterOpts{Nodes: sc.Nodes, Netns: true, Args: sc.ServerArgs}, dir)
	case "docker":
		return newDockerCluster(t, sc.Nodes, dir, sc.ServerArgs)
	}
	t.Fatalf("unknown backend %q", sc.Backend)
	return nil
}

// runScenario starts a cluster, runs both workloads with the nemesis for
// sc.Duration, heals, checks, writes artifacts and returns the result.
func runScenario(t *testing.T, sc scenario) result {
	t.Helper()
	dir := artifactDir(t, sc.Name, sc.Seed)
	t.Logf("scenario %s seed %d: artifacts in %s (rerun with JEPSEN_SEED=%d)", sc.Name, sc.Seed, dir, sc.Seed)
	cl := newCluster(t, sc, dir)
	if len(sc.Faults) > 0 {
		sc.Schedule = schedule(sc.Seed, sc.Faults, cl.Nodes(), sc.Duration-2*time.Second)
	}
	writeJSON(t, filepath.Join(dir, "config.json"), sc)
	rec, err := newRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	res := result{Scenario: sc.Name, Seed: sc.Seed}
	fail := func(format string, args ...any) {
		res.Errors = append(res.Errors, fmt.Sprintf(format, args...))
	}
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	leaders, waitWatch := watchLeaders(watchCtx, cl, 50*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration)
	defer cancel()
	ids := &procIDs{}
	done := make(chan struct{}, 3)
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
		nm := &nemesis{cl: cl, rec: rec, logf: t.Logf}
		res.Nemesis = nm.run(ctx, sc.Schedule)
		res.FaultsInjected = res.Nemesis.Injected
		done <- struct{}{}
	}()
	for range 3 {
		<-done // each goroutine is bounded by ctx and MaxOps
	}

	// Heal, then the final checks.
	rec.nemesis("heal", "heal the network, resume and restart all")
	if err := healAll(cl); err != nil {
		fail("heal: %v", err)
	}
	if err := waitReady(cl, sc.Recovery); err != nil {
		fail("after heal: %v", err)
	}
	if _, ok := cl.(memberCluster); ok {
		for _, id := range cl.Nodes() {
			if err := waitVoter(cl, id, sc.Recovery); err != nil {
				fail("membership not restored: %v", err)
			}
		}
	}
	var finals [][]int64
	if sc.Set.Workers > 0 {
		if finals, err = finalReads(cl, sc.Set.Key, sc.Recovery); err != nil {
			fail("final read: %v", err)
		}
		rec.finalReads(sc.Set.Key, cl.Nodes(), finals) // for the recheck command
	}
	digest, took, err := converge(cl, sc.Recovery)
	if err != nil {
		fail("convergence: %v", err)
	}
	res.Digest, res.ConvergedIn = digest, took.String()
	rec.nemesis("final", "final reads and digests done")
	stopWatch()
	waitWatch()
	if err := cl.Stop(); err != nil {
		fail("stop: %v", err)
	}
	res.LogProblems = scanLogs(cl)
	res.Leaders = leaders.check(cl)
	for _, e := range res.Nemesis.Errors {
		fail("nemesis: %s", e)
	}
	if n := res.Nemesis.SnapshotInstalls; n < sc.MinSnapshotInstalls {
		fail("%d snapshot installs seen, want at least %d (restarted without one: %v)", n, sc.MinSnapshotInstalls, res.Nemesis.SnapshotMisses)
	}
	for _, c := range res.Leaders.Conflicts {
		fail("split brain: %s", c)
	}

	ops := rec.operations()
	res.Operations = len(ops)
	for _, o := range ops {
		switch o.Outcome {
		case outOK:
			res.OK++
		case outFail:
			res.Failed++
		default:
			res.Indeterminate++
		}
	}
	var linOps []op
	for _, o := range ops {
		if strings.HasPrefix(o.Key, "lin:") {
			linOps = append(linOps, o)
		}
	}
	res.Lin, err = checkLinearizable(linOps, filepath.Join(dir, "linearizability.html"), sc.CheckLimit)
	if err != nil {
		fail("visualisation: %v", err)
	}
	res.Set = checkSet(adds, finals)
	res.Valid = len(res.Errors) == 0 && len(res.LogProblems) == 0 && res.Lin.Result == string(porcupine.Ok) &&
		res.Set.ok()
	writeJSON(t, filepath.Join(dir, "result.json"), res)
	t.Logf("%s seed %d: %d ops (%d ok, %d fail, %d info), %d faults, %d snapshot installs; porcupine %s over %d ops/%d keys (%d indeterminate); set: %d attempted, %d acked, %d lost, %d unexpected, %d recovered; %d terms with a leader, %d conflicts; digest converged in %s; valid=%v",
		sc.Name, sc.Seed, res.Operations, res.OK, res.Failed, res.Indeterminate, res.FaultsInjected, res.Nemesis.SnapshotInstalls,
		res.Lin.Result, res.Lin.Operations, res.Lin.Keys, res.Lin.Indeterminate,
		res.Set.Attempted, res.Set.Acknowledged, len(res.Set.Lost), len(res.Set.Unexpected), res.Set.Recovered,
		res.Leaders.Terms, len(res.Leaders.Conflicts), res.ConvergedIn, res.Valid)
	return res
}

func assertValid(t *testing.T, res result) {
	t.Helper()
	for _, e := range res.Errors {
		t.Error(e)
	}
	for _, l := range res.LogProblems {
		t.Errorf("node log: %s", l)
	}
	if res.Lin.Result != string(porcupine.Ok) {
		t.Errorf("linearizability: %s (see %s)", res.Lin.Result, res.Lin.Visualization)
	}
	if !res.Set.ok() {
		t.Errorf("set workload: %+v", res.Set)
	}
	if res.Lin.Operations < 100 || res.Set.Acknowledged < 100 {
		t.Errorf("too little traffic to mean anything: %d linearizability ops, %d acknowledged adds",
			res.Lin.Operations, res.Set.Acknowledged)
	}
}

func smokeScenario(seed uint64, d time.Duration) scenario {
	return scenario{
		Name: "smoke", Seed: seed, Backend: "procs", Nodes: 3, Duration: d, Faults: faultsKillPause,
		Lin:      linWorkload{Workers: 6, GroupSize: 3, OpsPerKey: 150, Elems: 8, MaxOps: 100000},
		Set:      setWorkload{Workers: 3, Key: "set:full", MaxOps: 100000},
		ClientTO: 2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
}

// duration: JEPSEN_DURATION (a Go duration) or def.
func duration(t *testing.T, def time.Duration) time.Duration {
	if s := os.Getenv("JEPSEN_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("JEPSEN_DURATION=%q: %v", s, err)
		}
		return v
	}
	return def
}

// TestJepsenSmoke is the CI tier: ~60 s of both workloads under the
// kill -9 / SIGSTOP nemesis; zero anomalies, zero lost acknowledged adds,
// converged digests, no panics.
func TestJepsenSmoke(t *testing.T) {
	res := runScenario(t, smokeScenario(seedFor(t), duration(t, 60*time.Second)))
	assertValid(t, res)
	if res.FaultsInjected == 0 {
		t.Errorf("no fault injected")
	}
}

// TestJepsenBaseline: the same workloads without faults (harness sanity).
func TestJepsenBaseline(t *testing.T) {
	sc := smokeScenario(seedFor(t), duration(t, 20*time.Second))
	sc.Name, sc.Faults = "baseline", nil
	assertValid(t, runScenario(t, sc))
}

// --- the checker can fail ----------------------------------------------------

// TestCheckerFlagsSyntheticStaleRead feeds the checking code a hand-made
// history with a stale read (SADD acknowledged, then a read that starts
// after it and misses the element) and a clean one; only the stale one
// may be Illegal.
func TestCheckerFlagsSyntheticStaleRead(t *testing.T) {
	dir := artifactDir(t, "synthetic-stale-read", 0)
	good := []op{
		{Proc: 0, F: "sadd", Key: "lin:0", Elem: 3, Outcome: outOK, N: 1, Call: 0, Ret: 10},
		{Proc: 1, F: "sismember", Key: "lin:0", Elem: 3, Outcome: outOK, N: 1, Call: 20, Ret: 30},
		// Indeterminate write: may take effect any time after 40.
		{Proc: 0, F: "srem", Key: "lin:0", Elem: 3, Outcome: outInfo, Call: 40, Ret: 50},
		{Proc: 2, F: "smembers", Key: "lin:0", Outcome: outOK, Members: []int64{3}, Call: 60, Ret: 70},
		{Proc: 1, F: "smembers", Key: "lin:0", Outcome: outOK, Members: nil, Call: 80, Ret: 90},
		// A -TRYAGAIN write is dropped.
		{Proc: 3, F: "sadd", Key: "lin:0", Elem: 5, Outcome: outFail, Call: 95, Ret: 96},
		{Proc: 1, F: "smembers", Key: "lin:0", Outcome: outOK, Members: nil, Call: 100, Ret: 110},
	}
	res, err := checkLinearizable(good, filepath.Join(dir, "good.html"), 10*time.Second)
	if err != nil || res.Result != string(porcupine.Ok) {
		t.Fatalf("clean history: %+v, %v", res, err)
	}
	stale := append(append([]op(nil), good[:2]...),
		// Starts after the add was acknowledged and seen, yet misses it.
		op{Proc: 2, F: "sismember", Key: "lin:0", Elem: 3, Outcome: outOK, N: 0, Call: 35, Ret: 38})
	res, err = checkLinearizable(stale, filepath.Join(dir, "linearizability.html"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != string(porcupine.Illegal) {
		t.Fatalf("stale read not flagged: %+v", res)
	}
	if _, err := os.Stat(res.Visualization); err != nil {
		t.Fatalf("no visualisation: %v", err)
	}
	// The set checker flags a lost acknowledged add and an unexpected element.
	sr := checkSet([]op{{F: "sadd", Elem: 1, Outcome: outOK, N: 1}, {F: "sadd", Elem: 2, Outcome: outInfo}},
		[][]int64{{2, 9}})
	if len(sr.Lost) != 1 || len(sr.Unexpected) != 1 || sr.Recovered != 1 || sr.ok() {
		t.Fatalf("set checker: %+v", sr)
	}
}

// TestCheckerFlagsReadonlyStaleReads is a real run against an unsafe
// configuration: one client adds an element through the leader and, once
// acknowledged, another reads it with READONLY (stale local reads) from a
// follower. The follower applies a committed entry only after the leader's
// next AppendEntries, so such reads regularly miss acknowledged adds, and
// the same checking code must report it.
func TestCheckerFlagsReadonlyStaleReads(t *testing.T) {
	seed := seedFor(t)
	dir := artifactDir(t, "readonly-stale", seed)
	cl := newProcCluster(t, 3, dir)
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
	li, fi := 0, 0
	for i, id := range cl.Nodes() {
		if id == leader {
			li = i
		} else {
			fi = i
		}
	}
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"name": "readonly-stale", "seed": seed,
		"nodes": 3, "leader": leader, "reader": cl.Nodes()[fi], "reader_mode": "READONLY",
		"rounds": 20, "pairs_per_round": 200, "client_timeout": "2s"})
	rec, err := newRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	ids := &procIDs{}
	writer := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: li, timeout: 2 * time.Second, pin: true}
	reader := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: fi, timeout: 2 * time.Second, pin: true, readOnly: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var found linResult
	for round := 0; round < 20 && ctx.Err() == nil; round++ {
		for i := 0; i < 200 && ctx.Err() == nil; i++ {
			if !writer.connect(ctx) || !reader.connect(ctx) {
				continue
			}
			key := fmt.Sprintf("lin:stale:%d:%d", round, i)
			if o := writer.do("sadd", key, 1); o.Outcome != outOK {
				continue
			}
			reader.do("sismember", key, 1)
		}
		found, err = checkLinearizable(rec.operations(), filepath.Join(dir, "linearizability.html"), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if found.Result == string(porcupine.Illegal) {
			break
		}
	}
	stale := 0
	for _, o := range rec.operations() {
		if o.F == "sismember" && o.Outcome == outOK && o.N == 0 {
			stale++
		}
	}
	// Sanity: the follower's READONLY reads do see the adds once it has
	// caught up, so what was flagged is lag, not a broken client.
	caughtUp := false
	for i := 0; i < 50 && !caughtUp; i++ {
		c, err := dialConn(cl.Addr(cl.Nodes()[fi]), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Do("READONLY")
		r, err := c.Do("SISMEMBER", "lin:stale:0:0", "1")
		c.Close()
		caughtUp = err == nil && r.Kind == ':' && r.Str == "1"
		if !caughtUp {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !caughtUp {
		t.Errorf("the follower never showed lin:stale:0:0 with READONLY")
	}
	writeJSON(t, filepath.Join(dir, "result.json"), map[string]any{"linearizability": found, "stale_reads": stale})
	t.Logf("READONLY follower reads: %d ops, %d stale reads observed, porcupine %s (%s)", found.Operations, stale, found.Result, found.Visualization)
	if found.Result != string(porcupine.Illegal) {
		t.Fatalf("the checker did not flag READONLY follower reads (stale=%d): %+v", stale, found)
	}
}
