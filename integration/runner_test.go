//go:build jepsen

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"raftset/integration/check"
)

// scenario is the configuration of one run: a matrix row, the smoke and
// baseline runs, the TTL and queue runs. What sets them apart is data: the
// backend and server flags, the fault families, which workloads run (one
// without workers does not, and its checker with it), per-node clock
// offsets, and the cluster checks. It is written to config.json.
type scenario struct {
	Name    string `json:"name"`
	Seed    uint64 `json:"seed"`
	Backend string `json:"backend"` // procs (loopback, the default), netns, docker
	Nodes   int    `json:"nodes"`
	// ServerArgs go to every node (snapshot knobs).
	ServerArgs []string `json:"server_args,omitempty"`
	// Shards: more than 1 runs every node with cluster-enabled yes and a
	// shard-map of that many shards, each on every node (ServerArgs has
	// them); workers follow -MOVED once per op, and move-slots faults pick
	// a target shard among them.
	Shards int `json:"shards,omitempty"`
	// TLSCluster: every node runs with tls-cluster yes (procs and netns
	// backends).
	TLSCluster bool `json:"tls_cluster,omitempty"`
	// ClockOffsets: per node, a test-only --debug-clock-offset (procs and
	// netns backends).
	ClockOffsets map[string]time.Duration `json:"clock_offsets_ns,omitempty"`
	Duration     time.Duration            `json:"duration_ns"`
	Faults       []string                 `json:"fault_kinds"`
	Lin          linWorkload              `json:"lin_workload,omitzero"`
	Set          setWorkload              `json:"set_workload,omitzero"`
	Queue        queueWorkload            `json:"queue_workload,omitzero"`
	TTL          ttlWorkload              `json:"ttl_workload,omitzero"`
	CAS          casWorkload              `json:"cas_workload,omitzero"`
	Restore      restorePlan              `json:"restore,omitzero"` // a backup restored into the running cluster
	Checks       clusterChecks            `json:"cluster_checks"`
	ClientTO     time.Duration            `json:"client_timeout_ns"`
	Recovery     time.Duration            `json:"recovery_ns"`
	Schedule     []fault                  `json:"schedule"`
	CheckLimit   time.Duration            `json:"porcupine_timeout_ns"`
	// MinSnapshotInstalls: the run fails unless a node restarted by the
	// snapshot-catchup fault logged that many snapshot installs.
	MinSnapshotInstalls int `json:"min_snapshot_installs,omitempty"`
	// KeepSlewing: with clock offsets, the nemesis moves leadership off a
	// node whose clock is cluster time (slew_test.go), and transfers go to
	// the node whose clock is farthest from it. MinSlewing: the run fails
	// unless cluster time slewed that long (the offsets show in a TTL
	// history only meanwhile).
	KeepSlewing bool          `json:"keep_slewing,omitempty"`
	MinSlewing  time.Duration `json:"min_slewing_ns,omitempty"`
}

// clusterChecks are the checks that look at the cluster rather than at a
// workload's history. The matrix, smoke and baseline runs make all of them;
// the TTL, queue and recheck runs were built and measured without them
// (docs/jepsen.md), so they are switches: turning one on there changes what
// those runs assert.
type clusterChecks struct {
	// LeaderPerTerm polls RAFT.INFO on every node every 50 ms during the
	// run and reads the logs afterwards: two leaders of a term fail it.
	LeaderPerTerm bool `json:"leader_per_term"`
	// Membership: after healing, every node of a backend that changes
	// membership must be a voter again.
	Membership bool `json:"membership"`
	// Nemesis: a failed heal, or a cut-off leader that acknowledged a
	// removal (island), fails the run.
	Nemesis bool `json:"nemesis"`
}

// allClusterChecks: what the matrix rows check besides their workloads.
var allClusterChecks = clusterChecks{LeaderPerTerm: true, Membership: true, Nemesis: true}

// result is what a run found; it is written to result.json. A workload's
// verdict is nil when the workload did not run.
type result struct {
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	// Operations counts client operations, not the final reads.
	Operations     int                `json:"operations"`
	OK             int                `json:"ok"`
	Failed         int                `json:"failed"`
	Indeterminate  int                `json:"indeterminate"`
	FaultsInjected int                `json:"faults_injected"`
	Nemesis        nemesisStats       `json:"nemesis"`
	Lin            *check.LinResult   `json:"linearizability,omitempty"`
	Set            *check.SetResult   `json:"set,omitempty"`
	Queue          *check.QueueResult `json:"queue,omitempty"`
	TTL            *check.LinResult   `json:"ttl,omitempty"`
	CAS            *check.LinResult   `json:"cas,omitempty"`
	CASSwapped     int                `json:"cas_swapped,omitempty"` // CAS scripts answered 1
	CASRefused     int                `json:"cas_refused,omitempty"` // ... answered 0
	// Restore: the backup and restore of a restore run; SetRestored the
	// set verdict with the restore point (Set then holds its SetResult).
	Restore     *restoreStats            `json:"restore,omitempty"`
	SetRestored *check.RestoredSetResult `json:"set_restored,omitempty"`
	// TTLBounds: the clocks' uncertainty the TTL checker allowed (set when
	// TTL keys or clock offsets are part of the run).
	TTLBounds check.ClockBounds `json:"ttl_clock_bounds,omitzero"`
	TTLAlive  int               `json:"ttl_reads_alive,omitempty"` // GET/TTL/PTTL that found the key
	TTLGone   int               `json:"ttl_reads_gone,omitempty"`  // ... that found it gone after a SET with a TTL
	// TTLExactClocks: the TTL verdict had the checker assumed exact clocks
	// (only with clock offsets): Illegal shows the offset in the history.
	TTLExactClocks string `json:"ttl_result_with_exact_clocks,omitempty"`
	// TTLProbesExactClocks: the same verdict on the expiry probes' keys
	// alone (workload_ttl_test.go), which are there to show the offset.
	TTLProbesExactClocks string `json:"ttl_probes_result_with_exact_clocks,omitempty"`
	// TTLCulprits: when the TTL check is Illegal, each illegal key's
	// minimal illegal sub-history (CI keeps only the log and this file).
	TTLCulprits *check.TTLCulprits `json:"ttl_culprits,omitempty"`
	Leaders     *leaderTerms       `json:"leaders_per_term,omitempty"`
	// Slew: how long cluster time slewed during the run (with clock
	// offsets).
	Slew *slewStats `json:"slew,omitempty"`
	// Redirected: client ops that followed a -MOVED (sharded runs);
	// LinKeysPerShard: the per-key workload's keys by the shard owning
	// their slot.
	Redirected      int         `json:"redirected,omitempty"`
	LinKeysPerShard map[int]int `json:"lin_keys_per_shard,omitempty"`
	Digest          string      `json:"digest"`
	ConvergedIn     string      `json:"converged_in"`
	LogProblems     []string    `json:"log_problems"`
	Errors          []string    `json:"errors"`
	Valid           bool        `json:"valid"`
}

// seedOr: JEPSEN_SEED (a number, or "random" for one from the clock), else
// def.
func seedOr(t *testing.T, def uint64) uint64 {
	switch s := os.Getenv("JEPSEN_SEED"); s {
	case "":
		return def
	case "random":
		return clockSeed()
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("JEPSEN_SEED=%q: %v", s, err)
		}
		return v
	}
}

// seedFor: JEPSEN_SEED if set, else one from the clock.
func seedFor(t *testing.T) uint64 { return seedOr(t, clockSeed()) }

func clockSeed() uint64 { return uint64(time.Now().UnixNano() % 1_000_000_000) }

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

// artifactPath is where a run's artifacts go: JEPSEN_OUT (default
// artifacts, relative to the package) / <name>-<seed>.
func artifactPath(name string, seed uint64) string {
	root := os.Getenv("JEPSEN_OUT")
	if root == "" {
		root = "artifacts"
	}
	return filepath.Join(root, fmt.Sprintf("%s-%d", name, seed))
}

// artifactDir empties and creates a run's artifact directory.
func artifactDir(t *testing.T, name string, seed uint64) string {
	t.Helper()
	dir := artifactPath(name, seed)
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
		return newProcClusterWith(t, clusterOpts{Nodes: sc.Nodes, Args: sc.ServerArgs, TLSCluster: sc.TLSCluster}, dir)
	case "netns":
		return newProcClusterWith(t, clusterOpts{Nodes: sc.Nodes, Netns: true, Args: sc.ServerArgs, TLSCluster: sc.TLSCluster}, dir)
	case "docker":
		return newDockerCluster(t, sc.Nodes, dir, sc.ServerArgs)
	}
	t.Fatalf("unknown backend %q", sc.Backend)
	return nil
}

// offsetClocks gives the nodes sc.ClockOffsets names their offsets (before
// they start) and records each in the history, where the TTL checker and
// recheck find them; it returns the offsets.
func offsetClocks(t *testing.T, cl Cluster, sc scenario, rec *recorder) []time.Duration {
	if len(sc.ClockOffsets) == 0 {
		return nil
	}
	pc, ok := cl.(*procCluster)
	if !ok {
		t.Fatalf("clock offsets need the procs or netns backend, not %q", sc.Backend)
	}
	var offsets []time.Duration
	for _, id := range cl.Nodes() {
		if off, ok := sc.ClockOffsets[id]; ok {
			debugArgs(pc, id, "--debug-clock-offset", off.String())
			rec.write(check.ClockOffsetEvent(id, off))
			offsets = append(offsets, off)
		}
	}
	return offsets
}

// skewLeadership moves leadership to a node whose wall clock differs from
// the first leader's, whose clock the cluster's time started from: the
// new leader slews cluster time towards its own clock, which is what makes
// the offsets show in the history (TTLs last 5% shorter or longer). Left
// to the nemesis, a run whose leader faults never handed leadership across
// clocks showed nothing, and the exact-clocks check could not fail.
//
// The first leader writes once before the transfer: its clock becomes
// the cluster's only through an entry it stamped (cluster/clock.go, an
// unconfirmed start), and without one the next leader starts cluster time
// from its own clock, so that a transfer from the skewed node to a true
// one showed no offset at all (clock-behind, exact clocks "Ok").
func skewLeadership(cl Cluster, offsets map[string]time.Duration, rec *recorder) error {
	var leader string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if leader = cl.Leader(30 * time.Second); leader == "" {
			return errors.New("skew leadership: no leader")
		}
		// A new leader refuses writes (-TRYAGAIN) until its term's barrier
		// applied; leadership may also move meanwhile: ask again.
		if err = adminCommand(cl.Addr(leader), "SET", "jepsen:clock-start", leader); err == nil {
			if cl.Leader(30*time.Second) == leader {
				break
			}
			err = errors.New("leadership moved during the write")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("skew leadership: the first leader's write: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // a client's back-off between tries
	}
	rec.nemesis("clock-start", "a write stamped by "+leader)
	for _, id := range cl.Nodes() {
		if offsets[id] == offsets[leader] {
			continue
		}
		rec.nemesis("transfer", fmt.Sprintf("%s -> %s (clock %v -> %v)", leader, id, offsets[leader], offsets[id]))
		if err := adminCommand(cl.Addr(leader), "RAFT.TRANSFER", id); err != nil {
			return fmt.Errorf("skew leadership: %w", err)
		}
		return nil
	}
	return errors.New("skew leadership: every node has the leader's clock offset")
}

// runScenario starts a cluster, runs the workloads sc configures (any of
// per-key sets, Jepsen set, queue, TTL keys) with the nemesis for
// sc.Duration, heals, makes the final reads and the checks, writes the
// artifacts and returns the result.
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
	offsets := offsetClocks(t, cl, sc, rec)
	res := result{Scenario: sc.Name, Seed: sc.Seed}
	if sc.TTL.Workers > 0 || len(offsets) > 0 {
		// The nodes keep a cluster clock: TTLs are checked against its
		// bounds, whatever the offsets (check.ClusterBounds).
		rec.write(check.ClusterClockEvent())
		res.TTLBounds = check.ClusterBounds()
	}
	fail := func(format string, args ...any) {
		res.Errors = append(res.Errors, fmt.Sprintf(format, args...))
	}
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(offsets) > 0 {
		if err := skewLeadership(cl, sc.ClockOffsets, rec); err != nil {
			t.Fatal(err)
		}
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	var slew *slewWatch
	var slewDone sync.WaitGroup
	slewCtx, stopSlew := context.WithCancel(context.Background())
	defer stopSlew()
	if len(offsets) > 0 {
		slew = newSlewWatch(cl, sc.ClockOffsets)
		slewDone.Go(func() { slew.run(slewCtx) })
	}
	var leaders *leaderWatch
	waitWatch := func() {}
	if sc.Checks.LeaderPerTerm {
		leaders, waitWatch = watchLeaders(watchCtx, cl, 50*time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration)
	defer cancel()
	ids := &procIDs{}
	var adds []op
	var wg sync.WaitGroup // each goroutine is bounded by ctx and MaxOps
	if sc.Lin.Workers > 0 {
		wg.Go(func() { sc.Lin.run(ctx, rec, cl, ids, sc.Seed, sc.ClientTO) })
	}
	if sc.Set.Workers > 0 {
		wg.Go(func() { adds = sc.Set.run(ctx, rec, cl, ids, sc.ClientTO) })
	}
	if sc.Queue.Producers > 0 {
		wg.Go(func() { sc.Queue.run(ctx, rec, cl, ids, sc.ClientTO) })
	}
	if sc.TTL.Workers > 0 {
		wg.Go(func() { sc.TTL.run(ctx, rec, cl, ids, sc.Seed, sc.ClientTO) })
	}
	if sc.CAS.Workers > 0 {
		wg.Go(func() { sc.CAS.run(ctx, rec, cl, ids, sc.Seed, sc.ClientTO) })
	}
	if sc.Restore.on() {
		rs := &restorer{plan: sc.Restore, cl: cl, rec: rec, ids: ids, bin: raftsetBinary(t), dir: dir,
			total: sc.Duration, logf: t.Logf}
		start := time.Now()
		wg.Go(func() {
			st := rs.run(ctx, start)
			res.Restore = &st
		})
	}
	wg.Go(func() {
		nm := &nemesis{cl: cl, rec: rec, logf: t.Logf, shards: sc.Shards}
		if sc.KeepSlewing && slew != nil {
			nm.keeper = slew
		}
		if sc.Shards > 1 {
			for _, k := range sc.Set.Keys {
				nm.setSlots = append(nm.setSlots, keySlot(k))
			}
		}
		res.Nemesis = nm.run(ctx, sc.Schedule)
		res.FaultsInjected = res.Nemesis.Injected
	})
	wg.Wait()
	// The slew counts over the workloads' time, not the healing's.
	stopSlew()
	slewDone.Wait()
	if slew != nil {
		st := slew.result()
		res.Slew = &st
		if st.Slewing < sc.MinSlewing {
			fail("cluster time slewed for %v, want at least %v: %v", st.Slewing, sc.MinSlewing, st)
		}
	}

	// Heal, then the final reads and the checks.
	rec.nemesis("heal", "heal the network, resume and restart all")
	if err := healAll(cl); err != nil {
		fail("heal: %v", err)
	}
	if err := waitReady(cl, sc.Recovery); err != nil {
		fail("after heal: %v", err)
	}
	if _, ok := cl.(memberCluster); ok && sc.Checks.Membership {
		for _, id := range cl.Nodes() {
			if err := waitVoter(cl, id, sc.Recovery); err != nil {
				fail("membership not restored: %v", err)
			}
		}
	}
	// The final reads go into the history too, so that recheck can check
	// a saved run on its own.
	var queueFinals [][]int64
	setFinals := map[string][][]int64{}
	if sc.Set.Workers > 0 {
		for _, key := range sc.Set.keys() {
			finals, err := finalReads(cl, key, sc.Recovery)
			if err != nil {
				fail("final read of %s: %v", key, err)
			}
			setFinals[key] = finals
			rec.finalReads(key, cl.Nodes(), finals)
		}
	}
	if sc.Queue.Producers > 0 {
		if queueFinals, err = finalReads(cl, sc.Queue.Key, sc.Recovery); err != nil {
			fail("final read: %v", err)
		}
		rec.finalReads(sc.Queue.Key, cl.Nodes(), queueFinals)
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
	if leaders != nil {
		lt := leaders.check(cl)
		res.Leaders = &lt
	}
	if sc.Checks.Nemesis {
		for _, e := range res.Nemesis.Errors {
			fail("nemesis: %s", e)
		}
	}
	if n := res.Nemesis.SnapshotInstalls; n < sc.MinSnapshotInstalls {
		fail("%d snapshot installs seen, want at least %d (restarted without one: %v)", n, sc.MinSnapshotInstalls, res.Nemesis.SnapshotMisses)
	}
	if res.Leaders != nil {
		for _, c := range res.Leaders.Conflicts {
			fail("split brain: %s", c)
		}
	}

	ops := rec.operations()
	if sc.Shards > 1 {
		res.LinKeysPerShard = map[int]int{}
		seen := map[string]bool{}
		for _, o := range check.ByKeyPrefix(ops, "lin:") {
			if !seen[o.Key] {
				seen[o.Key] = true
				res.LinKeysPerShard[shardOf(o.Key, sc.Shards)]++
			}
		}
	}
	for _, o := range ops {
		if o.Proc == check.FinalProc {
			continue
		}
		if o.Moved != "" {
			res.Redirected++
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
	verdicts := true
	restored, err := check.RestoreOf(ops)
	if err != nil {
		fail("restore: %v", err)
	}
	if sc.Restore.on() && (res.Restore == nil || res.Restore.OK == 0) {
		fail("no restore acknowledged: %+v", res.Restore)
	}
	if sc.Lin.Workers > 0 {
		lr, err := check.LinearizableRestored(check.ByKeyPrefix(ops, "lin:"), restored, filepath.Join(dir, "linearizability.html"), sc.CheckLimit)
		if err != nil {
			fail("linearizability check: %v", err)
		}
		res.Lin = &lr
		verdicts = verdicts && lr.Result == string(porcupine.Ok)
	}
	if sc.Set.Workers > 0 && restored != nil {
		sr := check.SetRestored(adds, setFinals[sc.Set.Key], restored, sc.Set.Key)
		res.Set, res.SetRestored = &sr.SetResult, &sr
		verdicts = verdicts && sr.OK()
	} else if sc.Set.Workers > 0 {
		sr := checkSets(adds, setFinals, sc.Set.keys())
		res.Set = &sr
		verdicts = verdicts && sr.OK()
	}
	if sc.CAS.Workers > 0 {
		cr, err := check.RegisterRestored(check.ByKeyPrefix(ops, "cas:"), restored, filepath.Join(dir, "cas.html"), sc.CheckLimit)
		if err != nil {
			fail("CAS register check: %v", err)
		}
		res.CAS = &cr
		for _, o := range check.ByKeyPrefix(ops, "cas:") {
			if o.F == "cas" && o.Outcome == outOK {
				res.CASSwapped += int(o.N)
				res.CASRefused += int(1 - o.N)
			}
		}
		verdicts = verdicts && cr.Result == string(porcupine.Ok)
	}
	if sc.Queue.Producers > 0 {
		q := check.Queue(check.ByKeyPrefix(ops, sc.Queue.Key), queueFinals)
		res.Queue = &q
		verdicts = verdicts && q.OK()
	}
	if sc.TTL.Workers > 0 {
		ttlOps := check.ByKeyPrefix(ops, "ttl:")
		res.TTLAlive, res.TTLGone = ttlObservations(ttlOps)
		lr, err := check.TTL(ttlOps, res.TTLBounds, filepath.Join(dir, "ttl.html"), sc.CheckLimit)
		if err != nil {
			fail("TTL check: %v", err)
		}
		res.TTL = &lr
		verdicts = verdicts && lr.Result == string(porcupine.Ok)
		if lr.Result == string(porcupine.Illegal) {
			res.TTLCulprits = check.FindTTLCulprits(ttlOps, res.TTLBounds, check.CulpritLimit)
		}
		if len(offsets) > 0 {
			exact, err := check.TTL(ttlOps, check.BoundsFor(), "", sc.CheckLimit)
			if err != nil {
				fail("TTL check with exact clocks: %v", err)
			}
			res.TTLExactClocks = exact.Result
			if probeOps := check.ByKeyPrefix(ttlOps, ttlProbePrefix); len(probeOps) > 0 {
				probes, err := check.TTL(probeOps, check.BoundsFor(), "", sc.CheckLimit)
				if err != nil {
					fail("TTL check of the probes with exact clocks: %v", err)
				}
				res.TTLProbesExactClocks = probes.Result
			}
		}
	}
	res.Valid = len(res.Errors) == 0 && len(res.LogProblems) == 0 && verdicts
	writeJSON(t, filepath.Join(dir, "result.json"), res)
	t.Logf("%s", summary(res))
	if res.TTLCulprits != nil {
		t.Logf("%s", strings.Join(res.TTLCulprits.Lines(), "\n"))
	}
	return res
}

// checkSets runs the set checker on each key's adds and final reads and
// adds the verdicts up: a lost, unexpected or dishonestly failed element
// of any set is one of the whole workload, and an element found in
// another set than its own is unexpected there.
func checkSets(adds []op, finals map[string][][]int64, keys []string) check.SetResult {
	byKey := map[string][]op{}
	for _, o := range adds {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	var all check.SetResult
	for _, key := range keys {
		r := check.Set(byKey[key], finals[key])
		all.Attempted += r.Attempted
		all.Acknowledged += r.Acknowledged
		all.Indeterminate += r.Indeterminate
		all.Failed += r.Failed
		all.FinalSize += r.FinalSize
		all.Lost = append(all.Lost, r.Lost...)
		all.Unexpected = append(all.Unexpected, r.Unexpected...)
		all.Recovered += r.Recovered
		all.FailedPresent = append(all.FailedPresent, r.FailedPresent...)
		all.BadReplies += r.BadReplies
		all.FinalDiffer = all.FinalDiffer || r.FinalDiffer
		for i, n := range r.FinalReads {
			if i == len(all.FinalReads) {
				all.FinalReads = append(all.FinalReads, 0)
			}
			all.FinalReads[i] += n
		}
	}
	return all
}

// summary is the one line a run logs: the counts, then each verdict it has.
func summary(res result) string {
	parts := []string{fmt.Sprintf("%s seed %d: %d ops (%d ok, %d fail, %d info), %d faults, %d snapshot installs",
		res.Scenario, res.Seed, res.Operations, res.OK, res.Failed, res.Indeterminate, res.FaultsInjected, res.Nemesis.SnapshotInstalls)}
	if l := res.Lin; l != nil {
		parts = append(parts, fmt.Sprintf("porcupine %s over %d ops/%d keys (%d indeterminate)", l.Result, l.Operations, l.Keys, l.Indeterminate))
	}
	if s := res.Set; s != nil {
		parts = append(parts, fmt.Sprintf("set: %d attempted, %d acked, %d lost, %d unexpected, %d recovered",
			s.Attempted, s.Acknowledged, len(s.Lost), len(s.Unexpected), s.Recovered))
	}
	if q := res.Queue; q != nil {
		parts = append(parts, fmt.Sprintf("queue %+v", *q))
	}
	if c := res.CAS; c != nil {
		parts = append(parts, fmt.Sprintf("CAS registers: porcupine %s over %d ops/%d keys (%d indeterminate), %d swapped, %d refused",
			c.Result, c.Operations, c.Keys, c.Indeterminate, res.CASSwapped, res.CASRefused))
	}
	if r := res.Restore; r != nil {
		parts = append(parts, fmt.Sprintf("restore %+v", *r))
	}
	if s := res.SetRestored; s != nil {
		parts = append(parts, fmt.Sprintf("set with restore: %d in backup, %d gone by restore, %d survived, %d missing from backup, %d too new in backup",
			s.InBackup, s.GoneByRestore, len(s.Survived), len(s.BackupMissing), len(s.BackupTooNew)))
	}
	if l := res.TTL; l != nil {
		parts = append(parts, fmt.Sprintf("TTL %+v (bounds %+v, %d alive / %d gone reads; with exact clocks %q, the probes alone %q)",
			*l, res.TTLBounds, res.TTLAlive, res.TTLGone, res.TTLExactClocks, res.TTLProbesExactClocks))
	}
	if s := res.Slew; s != nil {
		parts = append(parts, s.String())
	}
	if l := res.Leaders; l != nil {
		parts = append(parts, fmt.Sprintf("%d terms with a leader, %d conflicts", l.Terms, len(l.Conflicts)))
	}
	if res.LinKeysPerShard != nil {
		parts = append(parts, fmt.Sprintf("%d ops redirected, per-key workload's keys by shard %v", res.Redirected, res.LinKeysPerShard),
			fmt.Sprintf("%d slot moves, %d of a set's slot while written, %d firings with two moves at once, %d aborted before their flip, %d failed, %d left half done and finished by the next",
				res.Nemesis.Moves, res.Nemesis.SetSlotMoves, res.Nemesis.ConcurrentMoves, res.Nemesis.MovesAborted, len(res.Nemesis.MoveErrors), len(res.Nemesis.MovesFinished)))
	}
	parts = append(parts, fmt.Sprintf("digest converged in %s; valid=%v", res.ConvergedIn, res.Valid))
	return strings.Join(parts, "; ")
}

// assertValid fails t for everything the run found wrong, and when a
// scenario with faults injected none.
func assertValid(t *testing.T, sc scenario, res result) {
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
	if res.SetRestored != nil && !res.SetRestored.OK() {
		t.Errorf("set workload with a restore: %+v", *res.SetRestored)
	}
	if res.CAS != nil && res.CAS.Result != string(porcupine.Ok) {
		t.Errorf("CAS registers: porcupine %s (see %s)", res.CAS.Result, res.CAS.Visualization)
	}
	if res.TTL != nil && res.TTL.Result != string(porcupine.Ok) {
		t.Errorf("TTL keys: porcupine %s (see %s; an Illegal key's minimal illegal sub-history is logged above and in result.json's ttl_culprits)",
			res.TTL.Result, res.TTL.Visualization)
	}
	if len(sc.Faults) > 0 && res.FaultsInjected == 0 {
		t.Errorf("no fault injected")
	}
	if !res.Valid && !t.Failed() {
		t.Errorf("run invalid: %+v", res)
	}
}

// assertSetTraffic: the per-key and Jepsen set workloads did enough for
// their verdicts to mean anything.
func assertSetTraffic(t *testing.T, res result) {
	t.Helper()
	var linOps, acked int
	if res.Lin != nil {
		linOps = res.Lin.Operations
	}
	if res.Set != nil {
		acked = res.Set.Acknowledged
	}
	if linOps < 100 || acked < 100 {
		t.Errorf("too little traffic to mean anything: %d linearizability ops, %d acknowledged adds", linOps, acked)
	}
}

// assertCASTraffic: the register workload swapped and refused enough for
// its verdict to mean anything.
func assertCASTraffic(t *testing.T, res result) {
	t.Helper()
	if res.CAS == nil || res.CAS.Operations < 100 || res.CASSwapped < 100 || res.CASRefused < 100 {
		t.Errorf("too little CAS traffic to mean anything: %+v, %d swapped, %d refused", res.CAS, res.CASSwapped, res.CASRefused)
	}
}

// assertRestoreTraffic: the backup held acknowledged adds and the restore
// undid some acknowledged after it, so both checks had something to see.
func assertRestoreTraffic(t *testing.T, res result) {
	t.Helper()
	if s := res.SetRestored; s == nil || s.InBackup < 100 || s.GoneByRestore == 0 {
		t.Errorf("the restore had nothing to show: %+v", s)
	}
}
