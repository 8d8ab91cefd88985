package check

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// backupOps is a backup taken over [call, ret] as the suite records it.
func backupOps(call, ret int64, sets map[string][]int64, strs map[string]string) []Op {
	ops := []Op{{Proc: BackupProc, F: "backup", Outcome: OK, N: int64(len(sets) + len(strs)), Call: call, Ret: ret}}
	for k, m := range sets {
		ops = append(ops, Op{Proc: BackupProc, F: "backup", Key: k, Members: m, Outcome: OK, Call: call, Ret: ret})
	}
	for k, v := range strs {
		ops = append(ops, Op{Proc: BackupProc, F: "backup", Key: k, Value: v, Outcome: OK, Call: call, Ret: ret})
	}
	return ops
}

func restoreOp(proc int, out Outcome, call, ret int64) Op {
	return Op{Proc: proc, F: "restore", Outcome: out, Call: call, Ret: ret, Node: "n1"}
}

func mustRestore(t *testing.T, ops []Op) *Restore {
	t.Helper()
	r, err := RestoreOf(ops)
	if err != nil || r == nil {
		t.Fatalf("RestoreOf: %v, %v", r, err)
	}
	return r
}

// A backup and its restores survive the history file: RestoreOf finds them
// in ops read back from history lines.
func TestRestoreHistoryRoundTrip(t *testing.T) {
	ops := backupOps(20, 30, map[string][]int64{"set:full": {1, 2}}, map[string]string{"cas:0:0": "3"})
	ops = append(ops, restoreOp(7, Info, 90, 95), restoreOp(8, OK, 100, 200),
		cas(9, "1", "2", 1, 300, 310))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, o := range ops {
		enc.Encode(o.InvokeEvent())
		enc.Encode(o.CompleteEvent())
	}
	events, err := DecodeHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Ops(events)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ops) {
		t.Fatalf("ops read back:\n got %+v\nwant %+v", got, ops)
	}
	r := mustRestore(t, got)
	if r.Backup.Call != 20 || r.Backup.Ret != 30 || !slices.Equal(r.Sets["set:full"], []int64{1, 2}) ||
		r.Strings["cas:0:0"] != "3" || len(r.Attempts) != 2 {
		t.Fatalf("restore %+v", r)
	}
	if ok, info, fail := r.Counts(); ok != 1 || info != 1 || fail != 0 {
		t.Fatalf("counts %d %d %d", ok, info, fail)
	}
	if _, err := RestoreOf([]Op{restoreOp(1, OK, 1, 2)}); err == nil {
		t.Fatal("a restore without a backup accepted")
	}
	if r, err := RestoreOf([]Op{cas(1, "1", "2", 1, 1, 2)}); r != nil || err != nil {
		t.Fatalf("no backup: %v %v", r, err)
	}
}

// The Jepsen set with a restore: adds acknowledged between the backup and
// the restore may be gone, but one acknowledged after the restore must not
// be; the restore must replace the state, and the backup must hold what was
// acknowledged before it.
func TestSetRestored(t *testing.T) {
	add := func(e int64, out Outcome, call, ret int64) Op {
		return Op{F: "sadd", Key: "set:full", Elem: e, Outcome: out, N: 1, Call: call, Ret: ret}
	}
	adds := []Op{
		add(1, OK, 0, 10),      // before the backup [20, 30]: in it
		add(2, OK, 40, 50),     // between backup and restore [100, 200]: may be gone
		add(4, OK, 150, 160),   // during the restore: either way
		add(3, OK, 300, 310),   // after the restore: must stay
		add(5, Info, 320, 330), // indeterminate: either way
	}
	history := func(backup []int64, restores ...Op) *Restore {
		return mustRestore(t, append(backupOps(20, 30, map[string][]int64{"set:full": backup}, nil), restores...))
	}
	okRestore := restoreOp(7, OK, 100, 200)
	r := history([]int64{1}, okRestore)
	for _, final := range [][]int64{{1, 3}, {1, 3, 4}, {1, 3, 4, 5}} {
		res := SetRestored(adds, [][]int64{final, final}, r, "set:full")
		if !res.OK() || len(res.Lost) != 0 || res.RestoresOK != 1 || res.InBackup != 1 {
			t.Fatalf("clean history, final %v: %+v", final, res)
		}
		// Without the restore in view, the plain set checker calls the
		// undone add lost: the restore point is what makes it legal.
		if plain := Set(adds, [][]int64{final}); plain.OK() {
			t.Fatalf("plain set checker accepted %v: %+v", final, plain)
		}
	}
	if res := SetRestored(adds, [][]int64{{1, 3}}, r, "set:full"); res.GoneByRestore != 2 {
		t.Fatalf("gone by restore %d, want 2 (elements 2 and 4)", res.GoneByRestore)
	}
	bad := []struct {
		name   string
		backup []int64
		final  []int64
		check  func(RestoredSetResult) bool
	}{
		// The case: acknowledged after the restore, then lost.
		{"lost after restore", []int64{1}, []int64{1}, func(s RestoredSetResult) bool { return slices.Equal(s.Lost, []int64{3}) }},
		// In the backup, so restored, then lost.
		{"backup content lost", []int64{1}, []int64{3}, func(s RestoredSetResult) bool { return slices.Equal(s.Lost, []int64{1}) }},
		// Not in the backup, acknowledged before the restore, still there.
		{"survived restore", []int64{1}, []int64{1, 2, 3}, func(s RestoredSetResult) bool { return slices.Equal(s.Survived, []int64{2}) }},
		// Acknowledged before the backup began, missing from it.
		{"backup missing", nil, []int64{3}, func(s RestoredSetResult) bool { return slices.Equal(s.BackupMissing, []int64{1}) }},
		// In the backup, added only after it.
		{"backup too new", []int64{1, 3}, []int64{1, 3}, func(s RestoredSetResult) bool { return slices.Equal(s.BackupTooNew, []int64{3}) }},
		// In the backup, never added by anyone.
		{"backup invented", []int64{1, 99}, []int64{1, 3, 99}, func(s RestoredSetResult) bool { return slices.Contains(s.BackupTooNew, 99) }},
	}
	for _, c := range bad {
		res := SetRestored(adds, [][]int64{c.final}, history(c.backup, okRestore), "set:full")
		if res.OK() || !c.check(res) {
			t.Errorf("%s: %+v", c.name, res)
		}
	}
	// Only an indeterminate attempt: it may take effect any time after its
	// call, so the later add may be undone too, and nothing must be gone.
	r = history([]int64{1}, restoreOp(7, Info, 100, 200), restoreOp(8, Fail, 210, 220))
	for _, final := range [][]int64{{1}, {1, 2, 3, 4}} {
		if res := SetRestored(adds, [][]int64{final}, r, "set:full"); !res.OK() || res.RestoresInfo != 1 || res.RestoresFail != 1 {
			t.Errorf("indeterminate restore, final %v: %+v", final, res)
		}
	}
	// Only a failed attempt: nothing was undone.
	r = history([]int64{1}, restoreOp(8, Fail, 100, 200))
	if res := SetRestored(adds, [][]int64{{1, 3, 4}}, r, "set:full"); res.OK() || !slices.Equal(res.Lost, []int64{2}) {
		t.Errorf("failed restore: %+v", res)
	}
}

// Porcupine with a restore: the backup is a read of every key and the
// restore a write of every key, for the per-key sets and the registers.
func TestLinearizableRestored(t *testing.T) {
	lin := func(ops []Op) string {
		t.Helper()
		r, err := RestoreOf(ops)
		if err != nil {
			t.Fatal(err)
		}
		res, err := LinearizableRestored(ops, r, "", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res.Result
	}
	sadd := func(e int64, call, ret int64) Op {
		return Op{Proc: 0, F: "sadd", Key: "lin:0:0", Elem: e, N: 1, Outcome: OK, Call: call, Ret: ret}
	}
	smembers := func(m []int64, call, ret int64) Op {
		return Op{Proc: 1, F: "smembers", Key: "lin:0:0", Members: m, Outcome: OK, Call: call, Ret: ret}
	}
	base := slices.Concat([]Op{sadd(3, 0, 10)},
		backupOps(20, 30, map[string][]int64{"lin:0:0": {3}}, nil),
		[]Op{sadd(5, 40, 50), smembers([]int64{3, 5}, 60, 70), restoreOp(7, OK, 100, 200)})
	clean := append(slices.Clone(base), smembers([]int64{3}, 300, 310), sadd(6, 320, 330), smembers([]int64{3, 6}, 340, 350))
	if got := lin(clean); got != string(porcupine.Ok) {
		t.Fatalf("clean history with a restore: %s", got)
	}
	// Without the backup and restore ops, 5 vanishing is a violation.
	var noRestore []Op
	for _, o := range clean {
		if o.F != "backup" && o.F != "restore" {
			noRestore = append(noRestore, o)
		}
	}
	if got := lin(noRestore); got != string(porcupine.Illegal) {
		t.Fatalf("the same history without the restore: %s", got)
	}
	// Acknowledged after the restore, then lost.
	lost := append(slices.Clone(base), sadd(6, 320, 330), smembers([]int64{3}, 340, 350))
	if got := lin(lost); got != string(porcupine.Illegal) {
		t.Fatalf("add after the restore lost: %s", got)
	}
	// The restore did not take: 5 is still there after it returned.
	survived := append(slices.Clone(base), smembers([]int64{3, 5}, 300, 310))
	if got := lin(survived); got != string(porcupine.Illegal) {
		t.Fatalf("state not restored: %s", got)
	}
	// A backup that misses an add acknowledged before it began.
	stale := slices.Concat([]Op{sadd(3, 0, 10)}, backupOps(20, 30, map[string][]int64{}, nil))
	if got := lin(stale); got != string(porcupine.Illegal) {
		t.Fatalf("stale backup: %s", got)
	}

	// Registers: a CAS acknowledged after the restore must hold.
	reg := func(ops []Op) string {
		t.Helper()
		res, err := RegisterRestored(ops, mustRestore(t, ops), "", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res.Result
	}
	rbase := slices.Concat([]Op{set(0, "1", 0, 10)},
		backupOps(20, 30, nil, map[string]string{"cas:0": "1"}),
		[]Op{cas(1, "1", "2", 1, 40, 50), restoreOp(7, OK, 100, 200), get(0, "1", 300, 310), cas(1, "1", "3", 1, 320, 330)})
	if got := reg(append(slices.Clone(rbase), get(0, "3", 340, 350))); got != string(porcupine.Ok) {
		t.Fatalf("clean register history with a restore: %s", got)
	}
	if got := reg(append(slices.Clone(rbase), get(0, "1", 340, 350))); got != string(porcupine.Illegal) {
		t.Fatalf("CAS after the restore lost: %s", got)
	}
	// A key created after the backup is absent after the restore.
	created := slices.Concat(backupOps(20, 30, nil, nil), []Op{set(0, "1", 40, 50), restoreOp(7, OK, 100, 200)})
	if got := reg(append(slices.Clone(created), get(1, "", 300, 310))); got != string(porcupine.Ok) {
		t.Fatalf("key created after the backup, gone: %s", got)
	}
	if got := reg(append(slices.Clone(created), get(1, "1", 300, 310))); got != string(porcupine.Illegal) {
		t.Fatalf("key created after the backup, still there: %s", got)
	}
}

// Recheck finds the backup and the restore in a saved history and checks
// with them; without them (IgnoringRestore) the undone writes are flagged.
func TestRecheckWithRestore(t *testing.T) {
	add := func(proc int, e int64, call, ret int64) Op {
		return Op{Proc: proc, F: "sadd", Key: "set:full", Elem: e, Outcome: OK, N: 1, Call: call, Ret: ret}
	}
	ops := slices.Concat(
		[]Op{add(0, 1, 0, 10), set(1, "1", 0, 10)},
		backupOps(20, 30, map[string][]int64{"set:full": {1}}, map[string]string{"cas:0": "1"}),
		[]Op{add(0, 2, 40, 50), cas(1, "1", "2", 1, 40, 50), restoreOp(7, OK, 100, 200),
			add(0, 3, 300, 310), get(1, "1", 300, 310),
			{Proc: FinalProc, F: "final", Key: "set:full", Members: []int64{1, 3}, Outcome: OK, Call: 400, Ret: 410}})
	dir := t.TempDir()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, o := range ops {
		enc.Encode(o.InvokeEvent())
		enc.Encode(o.CompleteEvent())
	}
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Recheck(dir, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid || rep.CAS == nil || rep.CAS.Result != string(porcupine.Ok) || rep.Restored["set:full"].GoneByRestore != 1 {
		t.Fatalf("with the restore: %+v", rep)
	}
	rep, err = Recheck(dir, 10*time.Second, IgnoringRestore())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Valid || rep.CAS.Result != string(porcupine.Illegal) || !slices.Equal(rep.Sets["set:full"].Lost, []int64{2}) {
		t.Fatalf("ignoring the restore: %+v", rep)
	}
}
