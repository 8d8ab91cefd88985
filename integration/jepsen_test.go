//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func smokeScenario(seed uint64, d time.Duration) scenario {
	return scenario{
		Name: "smoke", Seed: seed, Backend: "procs", Nodes: 3, Duration: d, Faults: faultsKillPause,
		Lin:      linWorkload{Workers: 6, GroupSize: 3, OpsPerKey: 150, Elems: 8, MaxOps: 100000},
		Set:      setWorkload{Workers: 3, Key: "set:full", MaxOps: 100000},
		Checks:   allClusterChecks,
		ClientTO: 2 * time.Second, Recovery: 30 * time.Second, CheckLimit: 60 * time.Second,
	}
}

// TestJepsenSmoke is the CI tier: ~60 s of both workloads under the
// kill -9 / SIGSTOP nemesis; zero anomalies, zero lost acknowledged adds,
// converged digests, no panics.
func TestJepsenSmoke(t *testing.T) {
	sc := smokeScenario(seedFor(t), duration(t, 60*time.Second))
	res := runScenario(t, sc)
	assertValid(t, sc, res)
	assertSetTraffic(t, res)
}

// TestJepsenBaseline: the same workloads without faults (harness sanity).
func TestJepsenBaseline(t *testing.T) {
	sc := smokeScenario(seedFor(t), duration(t, 20*time.Second))
	sc.Name, sc.Faults = "baseline", nil
	res := runScenario(t, sc)
	assertValid(t, sc, res)
	assertSetTraffic(t, res)
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
	leader := startWithLeader(t, cl)
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
