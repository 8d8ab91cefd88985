package check

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Workload (a): per-key sets of small ints (0..63), checked for
// linearizability with porcupine, one partition per key.

type setIn struct {
	F    string
	Key  string
	Elem int64
	Mask uint64 // restore: the key's members in the backup (restore.go)
}

type setOut struct {
	Unknown bool // indeterminate write: any reply, any time after the call
	N       int64
	Mask    uint64
}

// SetModel is the porcupine model of workload (a): per key, the set as a
// bitmask; SADD/SREM return counts are checked.
var SetModel = porcupine.Model{
	Partition: partitionByKey(func(in any) string { return in.(setIn).Key }),
	Init:      func() any { return uint64(0) },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(uint64), in.(setIn), out.(setOut)
		bit := uint64(1) << uint(i.Elem)
		switch i.F {
		case "sadd":
			added := int64(0)
			if st&bit == 0 {
				added = 1
			}
			return o.Unknown || o.N == added, st | bit
		case "srem":
			removed := int64(0)
			if st&bit != 0 {
				removed = 1
			}
			return o.Unknown || o.N == removed, st &^ bit
		case "sismember":
			return o.N == int64(st>>uint(i.Elem)&1), st
		case "smembers":
			return o.Mask == st, st
		case "restore":
			return true, i.Mask
		}
		return false, st
	},
	Hash: func(s any) uint64 { return s.(uint64) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(setIn), out.(setOut)
		var res string
		switch {
		case o.Unknown:
			res = "?"
		case i.F == "smembers":
			res = maskString(o.Mask)
		default:
			res = fmt.Sprint(o.N)
		}
		if i.F == "smembers" {
			return fmt.Sprintf("SMEMBERS %s -> %s", i.Key, res)
		}
		if i.F == "restore" {
			return fmt.Sprintf("RESTORE %s=%s -> %s", i.Key, maskString(i.Mask), res)
		}
		return fmt.Sprintf("%s %s %d -> %s", strings.ToUpper(i.F), i.Key, i.Elem, res)
	},
	DescribeState: func(s any) string { return maskString(s.(uint64)) },
}

// partitionByKey splits a history into one partition per key, in key order.
func partitionByKey(key func(in any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := key(o.Input)
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], o)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	}
}

func maskString(m uint64) string {
	var parts []string
	for m != 0 {
		b := bits.TrailingZeros64(m)
		parts = append(parts, fmt.Sprint(b))
		m &^= 1 << uint(b)
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// setHistory converts completed operations: failed reads and definitely
// failed writes are dropped; indeterminate writes get Return = MaxInt64.
func setHistory(ops []Op) []porcupine.Operation {
	var h []porcupine.Operation
	for _, o := range ops {
		read := o.F == "sismember" || o.F == "smembers"
		in := setIn{F: o.F, Key: o.Key, Elem: o.Elem}
		switch {
		case o.Outcome == OK:
			var m uint64
			for _, e := range o.Members {
				m |= 1 << uint(e)
			}
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: setOut{N: o.N, Mask: m}, Return: o.Ret, Metadata: o.Node})
		case read || o.Outcome == Fail:
			// No effect on the state.
		default:
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: setOut{Unknown: true}, Return: math.MaxInt64, Metadata: o.Node})
		}
	}
	return h
}

// LinResult is a linearizability verdict.
type LinResult struct {
	Result        string `json:"result"` // Ok, Illegal, Unknown
	Operations    int    `json:"operations"`
	Indeterminate int    `json:"indeterminate"`
	Keys          int    `json:"keys"`
	Visualization string `json:"visualization,omitempty"`
}

// Linearizable runs porcupine over workload (a)'s ops; on anything but Ok
// it writes the HTML visualisation to vizPath (when set).
func Linearizable(ops []Op, vizPath string, timeout time.Duration) (LinResult, error) {
	h := setHistory(ops)
	res := LinResult{Operations: len(h)}
	for _, o := range h {
		if o.Output.(setOut).Unknown {
			res.Indeterminate++
		}
	}
	res.Keys = countKeys(h, func(in any) string { return in.(setIn).Key })
	return res, runPorcupine(SetModel, h, vizPath, timeout, &res)
}

func countKeys(h []porcupine.Operation, key func(any) string) int {
	keys := map[string]bool{}
	for _, o := range h {
		keys[key(o.Input)] = true
	}
	return len(keys)
}

// runPorcupine checks h and writes the visualisation unless it is Ok.
func runPorcupine(m porcupine.Model, h []porcupine.Operation, vizPath string, timeout time.Duration, res *LinResult) error {
	r, info := porcupine.CheckOperationsVerbose(m, h, timeout)
	res.Result = string(r)
	if r != porcupine.Ok && vizPath != "" {
		if err := porcupine.VisualizePath(m, info, vizPath); err != nil {
			return fmt.Errorf("porcupine visualisation: %w", err)
		}
		res.Visualization = vizPath
	}
	return nil
}

// --- Jepsen's set checker ----------------------------------------------------

// SetResult is the verdict of workload (b): unique SADDs, final reads.
type SetResult struct {
	Attempted     int     `json:"attempted"`
	Acknowledged  int     `json:"acknowledged"`
	Indeterminate int     `json:"indeterminate"`
	Failed        int     `json:"failed"`
	FinalSize     int     `json:"final_size"`
	Lost          []int64 `json:"lost"`               // acknowledged, missing from the final read
	Unexpected    []int64 `json:"unexpected"`         // present, never attempted
	Recovered     int     `json:"recovered"`          // indeterminate, present
	FailedPresent []int64 `json:"failed_but_present"` // -TRYAGAIN, yet present: a dishonest error
	BadReplies    int     `json:"unexpected_replies"` // SADD of a unique element answered :0
	FinalReads    []int   `json:"final_read_sizes"`   // per node
	FinalDiffer   bool    `json:"final_reads_differ"` // nodes disagree on the final read
}

// OK: nothing lost, nothing unexpected, no dishonest error, the final
// reads agree, and something was acknowledged at all.
func (s SetResult) OK() bool {
	return len(s.Lost) == 0 && len(s.Unexpected) == 0 && len(s.FailedPresent) == 0 && s.BadReplies == 0 &&
		!s.FinalDiffer && s.Acknowledged > 0
}

// Set compares the set workload's adds with the final reads (one per
// node, taken after healing).
func Set(adds []Op, finals [][]int64) SetResult {
	var res SetResult
	status := map[int64]Outcome{}
	for _, o := range adds {
		res.Attempted++
		status[o.Elem] = o.Outcome
		switch o.Outcome {
		case OK:
			res.Acknowledged++
			if o.N != 1 {
				res.BadReplies++
			}
		case Fail:
			res.Failed++
		default:
			res.Indeterminate++
		}
	}
	if len(finals) == 0 {
		return res
	}
	final, differ := agree(finals)
	res.FinalDiffer = differ
	for _, f := range finals {
		res.FinalReads = append(res.FinalReads, len(f))
	}
	res.FinalSize = len(final)
	for e, st := range status {
		switch {
		case st == OK && !final[e]:
			res.Lost = append(res.Lost, e)
		case st == Info && final[e]:
			res.Recovered++
		case st == Fail && final[e]:
			res.FailedPresent = append(res.FailedPresent, e)
		}
	}
	for e := range final {
		if _, ok := status[e]; !ok {
			res.Unexpected = append(res.Unexpected, e)
		}
	}
	for _, s := range [][]int64{res.Lost, res.Unexpected, res.FailedPresent} {
		sortInts(s)
	}
	return res
}

// agree returns the first final read as a set and whether any other
// read differs from it.
func agree(finals [][]int64) (map[int64]bool, bool) {
	var first map[int64]bool
	differ := false
	for i, f := range finals {
		m := make(map[int64]bool, len(f))
		for _, e := range f {
			m[e] = true
		}
		if i == 0 {
			first = m
			continue
		}
		if len(m) != len(first) {
			differ = true
			continue
		}
		for e := range m {
			if !first[e] {
				differ = true
			}
		}
	}
	return first, differ
}

func sortInts(s []int64) { sort.Slice(s, func(i, j int) bool { return s[i] < s[j] }) }

// FinalReads returns the final reads (FinalProc "final" ops) of key, one
// per node, in history order.
func FinalReads(ops []Op, key string) [][]int64 {
	var out [][]int64
	for _, o := range ops {
		if o.F == "final" && o.Key == key && o.Outcome == OK {
			out = append(out, o.Members)
		}
	}
	return out
}
