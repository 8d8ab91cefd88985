package check

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is what Recheck found in a saved history. Each workload is
// recognised by its keys' prefix: lin: (per-key sets), set: (Jepsen's set),
// queue: (SPOP queue), ttl: (keys with TTLs).
type Report struct {
	History    string                 `json:"history"`
	Operations int                    `json:"operations"`
	Nemesis    int                    `json:"nemesis_events"`
	Lin        *LinResult             `json:"linearizability,omitempty"`
	Sets       map[string]SetResult   `json:"set,omitempty"`
	Queues     map[string]QueueResult `json:"queue,omitempty"`
	TTL        *LinResult             `json:"ttl,omitempty"`
	CAS        *LinResult             `json:"cas,omitempty"`
	// Restored: the set verdicts with the restore point (Sets then hold
	// their SetResult), when the history has a backup.
	Restored map[string]RestoredSetResult `json:"set_restored,omitempty"`
	Bounds   *ClockBounds                 `json:"ttl_clock_bounds,omitempty"`
	// TTLCulprits: the illegal TTL keys' minimal illegal sub-histories
	// (when the TTL check is Illegal).
	TTLCulprits *TTLCulprits `json:"ttl_culprits,omitempty"`
	Problems    []string     `json:"problems"`
	Valid       bool         `json:"valid"`
}

// Recheck re-reads dir/history.jsonl and runs every checker that applies,
// writing porcupine's visualisation to dir/recheck-<workload>.html when a
// history is not linearizable.
func Recheck(dir string, timeout time.Duration, opts ...RecheckOption) (Report, error) {
	var cfg recheckConfig
	for _, o := range opts {
		o(&cfg)
	}
	rep := Report{History: filepath.Join(dir, "history.jsonl")}
	events, err := ReadHistory(rep.History)
	if err != nil {
		return rep, err
	}
	ops, nemesis, err := Ops(events)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", rep.History, err)
	}
	rep.Operations, rep.Nemesis = len(ops), len(nemesis)
	problem := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }
	restored, err := RestoreOf(ops)
	if err != nil {
		problem("restore: %v", err)
	}
	if cfg.ignoreRestore {
		restored = nil
	}

	if lin := ByKeyPrefix(ops, "lin:"); len(lin) > 0 {
		r, err := LinearizableRestored(lin, restored, filepath.Join(dir, "recheck-linearizability.html"), timeout)
		if err != nil {
			return rep, err
		}
		rep.Lin = &r
		if r.Result != string(porcupine.Ok) {
			problem("per-key sets: porcupine %s (%s)", r.Result, r.Visualization)
		}
	}
	for _, key := range keys(ops, "set:") {
		finals := FinalReads(ops, key)
		if len(finals) == 0 {
			problem("set %s: no final reads in the history; not checkable", key)
			continue
		}
		var adds []Op
		for _, o := range ops {
			if o.Key == key && o.F == "sadd" {
				adds = append(adds, o)
			}
		}
		if rep.Sets == nil {
			rep.Sets = map[string]SetResult{}
		}
		r := Set(adds, finals)
		ok := r.OK()
		if restored != nil {
			rr := SetRestored(adds, finals, restored, key)
			if rep.Restored == nil {
				rep.Restored = map[string]RestoredSetResult{}
			}
			rep.Restored[key] = rr
			r, ok = rr.SetResult, rr.OK()
			if len(rr.Survived)+len(rr.BackupMissing)+len(rr.BackupTooNew) > 0 {
				problem("set %s with a restore: %d survived the restore, %d missing from the backup, %d too new in the backup",
					key, len(rr.Survived), len(rr.BackupMissing), len(rr.BackupTooNew))
			}
		}
		rep.Sets[key] = r
		if !ok {
			problem("set %s: %d lost, %d unexpected, %d failed but present, final reads differ: %v",
				key, len(r.Lost), len(r.Unexpected), len(r.FailedPresent), r.FinalDiffer)
		}
	}
	for _, key := range keys(ops, "queue:") {
		finals := FinalReads(ops, key)
		if len(finals) == 0 {
			problem("queue %s: no final reads in the history; not checkable", key)
			continue
		}
		var qops []Op
		for _, o := range ops {
			if o.Key == key {
				qops = append(qops, o)
			}
		}
		if rep.Queues == nil {
			rep.Queues = map[string]QueueResult{}
		}
		r := Queue(qops, finals)
		rep.Queues[key] = r
		if !r.OK() {
			problem("queue %s: %d lost, %d duplicated, %d unexpected", key, r.Lost, len(r.Duplicated), len(r.Unexpected))
		}
	}
	if cas := ByKeyPrefix(ops, "cas:"); len(cas) > 0 {
		r, err := RegisterRestored(cas, restored, filepath.Join(dir, "recheck-cas.html"), timeout)
		if err != nil {
			return rep, err
		}
		rep.CAS = &r
		if r.Result != string(porcupine.Ok) {
			problem("CAS registers: porcupine %s (%s)", r.Result, r.Visualization)
		}
	}
	if ttl := ByKeyPrefix(ops, "ttl:"); len(ttl) > 0 {
		b := Bounds(nemesis)
		if cfg.bounds != nil {
			b = *cfg.bounds
		}
		rep.Bounds = &b
		r, err := TTL(ttl, b, filepath.Join(dir, "recheck-ttl.html"), timeout)
		if err != nil {
			return rep, err
		}
		rep.TTL = &r
		if r.Result != string(porcupine.Ok) {
			problem("TTL keys: porcupine %s (%s)", r.Result, r.Visualization)
		}
		if r.Result == string(porcupine.Illegal) {
			rep.TTLCulprits = FindTTLCulprits(ttl, b, CulpritLimit)
		}
	}
	if rep.Lin == nil && rep.Sets == nil && rep.Queues == nil && rep.TTL == nil && rep.CAS == nil {
		problem("no workload recognised (keys lin:, set:, queue:, ttl:, cas:)")
	}
	rep.Valid = len(rep.Problems) == 0
	return rep, nil
}

// RecheckOption changes what Recheck assumes.
type RecheckOption func(*recheckConfig)

type recheckConfig struct {
	bounds        *ClockBounds
	ignoreRestore bool
}

// IgnoringRestore checks as if the history had no backup and no restore:
// on a run that restored a backup, the writes the restore undid then show
// as violations (how the restore point matters).
func IgnoringRestore() RecheckOption {
	return func(c *recheckConfig) { c.ignoreRestore = true }
}

// WithClockBounds checks TTL keys with b instead of the bounds recorded in
// the history.
func WithClockBounds(b ClockBounds) RecheckOption {
	return func(c *recheckConfig) { c.bounds = &b }
}

// keys lists the distinct keys with prefix, sorted.
func keys(ops []Op, prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range ops {
		if strings.HasPrefix(o.Key, prefix) && !seen[o.Key] {
			seen[o.Key] = true
			out = append(out, o.Key)
		}
	}
	sort.Strings(out)
	return out
}
