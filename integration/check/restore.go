package check

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// A backup restored into the running cluster mid-history (the restore
// row). The backup (SYNC, `raftset backup`) is a linearizable read of every
// key at once, taken somewhere within its call and return; a restore
// (RAFT.RESTORE) replaces every key's value with the backup's at one point
// of the history, so writes acknowledged after the backup but before the
// restore are legitimately gone afterwards. The checkers are told about
// both as operations:
//
//   - porcupine (per-key sets, registers): the backup is a read of every
//     key that returned the backup's content for it, and each restore
//     attempt a write of every key that installs the backup's content
//     (an indeterminate attempt may take effect any time after its call,
//     a failed one is dropped). Each key is its own partition, so each key
//     may place the restore anywhere within the attempt; the one point
//     common to all keys is not required (weaker, never wrongly strict);
//   - the Jepsen set: an acknowledged add must be present at the end if
//     its element is in the backup, or if it was invoked after every
//     restore attempt returned; it must be absent if it is not in the
//     backup and it returned before an acknowledged restore was invoked.
//     Everything in between may go either way.
//
// In the history the backup is a marker op (F "backup", Key "", N = keys
// in the file) followed by one op per key of the workloads with the
// key's content (Members or Value), all with the backup's call and return
// and process BackupProc; the restore attempts are ops with F "restore".

// BackupProc is the process of the backup's ops in a history.
const BackupProc = -3

// Restore is what a history says about its backup and its restores.
type Restore struct {
	Backup   Op                 // the marker: Call and Ret of the backup
	Sets     map[string][]int64 // set keys in the backup, by key
	Strings  map[string]string  // string keys in the backup, by key
	Attempts []Op               // RAFT.RESTORE attempts of the backup, any outcome
}

// RestoreOf finds the backup and the restore attempts in ops; nil when
// the history has no backup (restores without one are an error).
func RestoreOf(ops []Op) (*Restore, error) {
	var r *Restore
	var attempts []Op
	for _, o := range ops {
		switch {
		case o.F == "backup" && o.Key == "":
			if r != nil {
				return nil, fmt.Errorf("two backups in the history (at %d and %d)", r.Backup.Call, o.Call)
			}
			r = &Restore{Backup: o, Sets: map[string][]int64{}, Strings: map[string]string{}}
		case o.F == "restore":
			attempts = append(attempts, o)
		}
	}
	if r == nil {
		if len(attempts) > 0 {
			return nil, fmt.Errorf("%d restore attempts without a backup in the history", len(attempts))
		}
		return nil, nil
	}
	for _, o := range ops {
		if o.F != "backup" || o.Key == "" {
			continue
		}
		if o.Members != nil {
			r.Sets[o.Key] = o.Members
		} else {
			r.Strings[o.Key] = o.Value
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].Call < attempts[j].Call })
	r.Attempts = attempts
	return r, nil
}

// Counts is how many restore attempts were acknowledged, indeterminate and
// failed.
func (r *Restore) Counts() (ok, info, fail int) {
	for _, a := range r.Attempts {
		switch a.Outcome {
		case OK:
			ok++
		case Fail:
			fail++
		default:
			info++
		}
	}
	return ok, info, fail
}

// syntheticOps adds, for every key of h, the backup as a read and each
// restore attempt as a write; mk builds a key's input and output.
func (r *Restore) syntheticOps(h []porcupine.Operation, key func(in any) string,
	read func(key string) (in, out any), write func(key string, unknown bool) (in, out any)) []porcupine.Operation {
	client := 0
	var keys []string
	seen := map[string]bool{}
	for _, o := range h {
		client = max(client, o.ClientId+1)
		if k := key(o.Input); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []porcupine.Operation
	for _, k := range keys {
		in, o := read(k)
		out = append(out, porcupine.Operation{ClientId: client, Input: in, Output: o,
			Call: r.Backup.Call, Return: r.Backup.Ret, Metadata: "backup"})
		for i, a := range r.Attempts {
			ret := a.Ret
			switch a.Outcome {
			case Fail:
				continue
			case Info:
				ret = math.MaxInt64
			}
			in, o := write(k, a.Outcome != OK)
			out = append(out, porcupine.Operation{ClientId: client + 1 + i, Input: in, Output: o,
				Call: a.Call, Return: ret, Metadata: "restore " + a.Node})
		}
	}
	return out
}

func (r *Restore) setOps(h []porcupine.Operation) []porcupine.Operation {
	mask := func(k string) uint64 {
		var m uint64
		for _, e := range r.Sets[k] {
			m |= 1 << uint(e)
		}
		return m
	}
	return r.syntheticOps(h, func(in any) string { return in.(setIn).Key },
		func(k string) (any, any) { return setIn{F: "smembers", Key: k}, setOut{Mask: mask(k)} },
		func(k string, unknown bool) (any, any) {
			return setIn{F: "restore", Key: k, Mask: mask(k)}, setOut{Unknown: unknown}
		})
}

func (r *Restore) registerOps(h []porcupine.Operation) []porcupine.Operation {
	return r.syntheticOps(h, func(in any) string { return in.(regIn).Key },
		func(k string) (any, any) {
			v, ok := r.Strings[k]
			return regIn{F: "get", Key: k}, regOut{Nil: !ok, Value: v}
		},
		func(k string, unknown bool) (any, any) {
			v, ok := r.Strings[k]
			return regIn{F: "restore", Key: k, Value: v, Absent: !ok}, regOut{Unknown: unknown}
		})
}

// LinearizableRestored is Linearizable (workload a) for a run with a
// backup restored into it; r nil is Linearizable.
func LinearizableRestored(ops []Op, r *Restore, vizPath string, timeout time.Duration) (LinResult, error) {
	// The backup's and the restores' own ops are not set operations.
	var setOps []Op
	for _, o := range ops {
		switch o.F {
		case "sadd", "srem", "sismember", "smembers":
			setOps = append(setOps, o)
		}
	}
	h := setHistory(setOps)
	res := LinResult{}
	for _, o := range h {
		if o.Output.(setOut).Unknown {
			res.Indeterminate++
		}
	}
	if r != nil {
		h = append(h, r.setOps(h)...)
	}
	res.Operations = len(h)
	res.Keys = countKeys(h, func(in any) string { return in.(setIn).Key })
	return res, runPorcupine(SetModel, h, vizPath, timeout, &res)
}

// RestoredSetResult is the Jepsen set's verdict (workload b) for a run
// with a backup restored into it. Lost holds only the acknowledged adds
// that had to survive (see above).
type RestoredSetResult struct {
	SetResult
	InBackup int `json:"in_backup"`
	// GoneByRestore: acknowledged adds not in the backup and absent at the
	// end, which the restore may have undone (allowed).
	GoneByRestore int `json:"gone_by_restore"`
	// Survived: not in the backup, acknowledged before an acknowledged
	// restore was invoked, yet present at the end: the restore did not
	// replace the state.
	Survived []int64 `json:"survived_restore"`
	// BackupMissing: acknowledged before the backup was invoked, not in it.
	BackupMissing []int64 `json:"backup_missing"`
	// BackupTooNew: in the backup, but added only after the backup
	// returned, failed (-TRYAGAIN) or never attempted.
	BackupTooNew []int64 `json:"backup_too_new"`
	RestoresOK   int     `json:"restores_ok"`
	RestoresInfo int     `json:"restores_indeterminate"`
	RestoresFail int     `json:"restores_failed"`
}

// OK: the set checker's conditions with the restore-aware Lost, and a
// backup and a final state that agree with the history.
func (s RestoredSetResult) OK() bool {
	return s.SetResult.OK() && len(s.Survived) == 0 && len(s.BackupMissing) == 0 && len(s.BackupTooNew) == 0
}

// SetRestored checks the Jepsen set's key against its final reads, with r's
// backup of key and restores accounted for.
func SetRestored(adds []Op, finals [][]int64, r *Restore, key string) RestoredSetResult {
	res := RestoredSetResult{SetResult: Set(adds, finals)}
	res.Lost = nil
	res.RestoresOK, res.RestoresInfo, res.RestoresFail = r.Counts()
	inBackup := map[int64]bool{}
	for _, e := range r.Sets[key] {
		inBackup[e] = true
	}
	res.InBackup = len(inBackup)
	// lastRet: the latest any restore attempt may have taken effect;
	// lastOKCall: the latest call of an acknowledged one.
	lastRet, lastOKCall := int64(math.MinInt64), int64(math.MinInt64)
	for _, a := range r.Attempts {
		switch a.Outcome {
		case OK:
			lastRet = max(lastRet, a.Ret)
			lastOKCall = max(lastOKCall, a.Call)
		case Info:
			lastRet = math.MaxInt64
		}
	}
	final := map[int64]bool{}
	if len(finals) > 0 {
		for _, e := range finals[0] {
			final[e] = true
		}
	}
	attempted := map[int64]bool{}
	for _, a := range adds {
		e, inB := a.Elem, inBackup[a.Elem]
		attempted[e] = true
		if a.Outcome == OK && a.Ret < r.Backup.Call && !inB {
			res.BackupMissing = append(res.BackupMissing, e)
		}
		if inB && (a.Outcome == Fail || a.Call > r.Backup.Ret) {
			res.BackupTooNew = append(res.BackupTooNew, e)
		}
		if len(finals) == 0 {
			continue
		}
		mustStay := inB || a.Outcome == OK && a.Call > lastRet
		mustGo := !inB && a.Outcome == OK && a.Ret < lastOKCall
		switch {
		case mustStay && !final[e]:
			res.Lost = append(res.Lost, e)
		case mustGo && final[e]:
			res.Survived = append(res.Survived, e)
		case a.Outcome == OK && !inB && !final[e]:
			res.GoneByRestore++
		}
	}
	for e := range inBackup {
		if !attempted[e] {
			res.BackupTooNew = append(res.BackupTooNew, e)
		}
	}
	for _, s := range [][]int64{res.Lost, res.Survived, res.BackupMissing, res.BackupTooNew} {
		sortInts(s)
	}
	return res
}
