package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"raftset/integration/check"
)

// fixture copies a saved run from integration/testdata/recheck into a temp
// dir (recheck writes its visualisations next to the history).
func fixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"history.jsonl", "config.json", "result.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "recheck", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func recheck(t *testing.T, args ...string) (int, check.Report, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	var rep check.Report
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("report %q: %v", out.String(), err)
		}
	}
	return code, rep, errOut.String()
}

// A clean run of all four workloads (n1's clock 250 ms ahead) checks clean
// again, with the numbers the run found (its result.json).
func TestRecheckCleanHistory(t *testing.T) {
	dir := fixture(t, "mixed")
	code, rep, stderr := recheck(t, dir)
	if code != 0 || !rep.Valid {
		t.Fatalf("exit %d, %s: %+v", code, stderr, rep)
	}
	var run struct {
		Lin   check.LinResult   `json:"linearizability"`
		Set   check.SetResult   `json:"set"`
		Queue check.QueueResult `json:"queue"`
		TTL   check.LinResult   `json:"ttl"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "result.json"))
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if rep.Lin == nil || rep.Lin.Result != "Ok" || rep.Lin.Operations != run.Lin.Operations ||
		rep.TTL == nil || rep.TTL.Result != "Ok" || rep.TTL.Operations != run.TTL.Operations ||
		rep.Sets["set:full"].Acknowledged != run.Set.Acknowledged || rep.Queues["queue:jobs"].Pops != run.Queue.Pops {
		t.Fatalf("recheck %+v\nrun %+v", rep, run)
	}
	if rep.Bounds == nil || *rep.Bounds != check.BoundsFor(250e6) {
		t.Errorf("bounds from the history: %+v", rep.Bounds)
	}
	// The same TTL history is not linearizable if the clocks had been
	// exact: the 250 ms offset shows in it. porcupine's visualisation is
	// written.
	code, rep, stderr = recheck(t, "-clock-offset", "0", dir)
	if code != 1 || rep.TTL.Result != "Illegal" || !strings.Contains(stderr, "TTL keys") {
		t.Fatalf("-clock-offset 0: exit %d, %s, %+v", code, stderr, rep.TTL)
	}
	if _, err := os.Stat(filepath.Join(dir, "recheck-ttl.html")); err != nil {
		t.Errorf("no visualisation: %v", err)
	}
}

// The ack-before-commit run's history shows its lost acknowledged adds
// again.
func TestRecheckLostWrites(t *testing.T) {
	code, rep, stderr := recheck(t, fixture(t, "ack-before-commit"))
	set := rep.Sets["set:acked"]
	if code != 1 || rep.Valid || len(set.Lost) != 190 || set.Acknowledged != 291 || !strings.Contains(stderr, "190 lost") {
		t.Fatalf("exit %d, %s: %+v", code, stderr, set)
	}
}

func TestRecheckUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"a", "b"}, {"-clock-offset", "soon", "x"}, {t.TempDir()}} {
		if code, _, _ := recheck(t, args...); code != 2 {
			t.Errorf("recheck %q: exit %d, want 2", args, code)
		}
	}
}

// The TTL key of TestJepsenTTL/clock-hour-transfers seed 45984148 (its
// history cut to the key ttl:1:1 and the nemesis events; result.json is
// the whole run's): a node took over with the cluster's time ~300 ms
// ahead, and PTTL answered 98 on n1 751 ms after SET ... PX 1162
// (docs/jepsen.md, findings). The history is Illegal, and exactly because
// of that PTTL: without it the key checks Ok. recheck names the SET and
// that PTTL as the key's minimal illegal sub-history.
func TestRecheckClockStep(t *testing.T) {
	dir := fixture(t, "ttl-clock-step")
	code, rep, stderr := recheck(t, dir)
	if code != 1 || rep.TTL == nil || rep.TTL.Result != "Illegal" || rep.TTL.Keys != 1 || !strings.Contains(stderr, "TTL keys") {
		t.Fatalf("exit %d, %s: %+v", code, stderr, rep.TTL)
	}
	// The report and stderr name the culprit: the SET and that PTTL.
	if c := rep.TTLCulprits; c == nil || len(c.Keys) != 1 || len(c.Keys[0].Ops) != 2 || !c.Keys[0].Minimal ||
		c.Keys[0].Ops[0].Op != "SET ttl:1:1 w3-116 PX 1162 -> OK" || c.Keys[0].Ops[1].Op != "PTTL ttl:1:1 -> 98" {
		t.Fatalf("culprits %+v", c)
	}
	for _, s := range []string{"recheck: TTL check Illegal", "recheck:   key ttl:1:1: minimal illegal sub-history, 2 of its 180 ops",
		"SET ttl:1:1 w3-116 PX 1162 -> OK", "15.7249–15.7512 s", "PTTL ttl:1:1 -> 98", "15.9300–16.4763 s"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("no %q in stderr:\n%s", s, stderr)
		}
	}
	path := filepath.Join(dir, "history.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		// The PTTL's invocation and completion.
		if !strings.HasPrefix(line, `{"i":1541,`) && !strings.HasPrefix(line, `{"i":1550,`) {
			kept = append(kept, line)
		}
	}
	if len(kept) != strings.Count(string(b), "\n")+1-2 {
		t.Fatalf("the PTTL's two events are not in the history")
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, rep, stderr = recheck(t, dir); code != 0 || rep.TTL.Result != "Ok" || rep.TTLCulprits != nil {
		t.Fatalf("without the PTTL: exit %d, %s: %+v, %+v", code, stderr, rep.TTL, rep.TTLCulprits)
	}
}
