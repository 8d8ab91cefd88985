//go:build jepsen

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// event is one line of history.jsonl: an invocation, a completion (ok, fail
// or info) or a nemesis action. T is nanoseconds on the monotonic clock
// since the start of the run.
type event struct {
	Index int    `json:"i"`
	Proc  int    `json:"proc"` // -1: the nemesis
	Type  string `json:"type"` // invoke, ok, fail, info
	F     string `json:"f"`
	Key   string `json:"key,omitempty"`
	Elem  *int64 `json:"elem,omitempty"`
	Out   any    `json:"out,omitempty"`
	Err   string `json:"err,omitempty"`
	Node  string `json:"node,omitempty"`
	Value string `json:"value,omitempty"`
	T     int64  `json:"t"`
}

// recorder writes events as JSON lines and keeps the completed client
// operations for the checkers.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	n    int
	ops  []op
}

// op is one completed client operation.
type op struct {
	Proc      int
	F         string // sadd, srem, sismember, smembers
	Key       string
	Elem      int64
	Outcome   outcome
	N         int64   // integer reply
	Members   []int64 // SMEMBERS reply
	Call, Ret int64
	Node      string
	Err       string
}

func newRecorder(path string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &recorder{base: time.Now(), f: f, w: bufio.NewWriter(f)}, nil
}

func (r *recorder) now() int64 { return int64(time.Since(r.base)) }

func (r *recorder) write(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = r.n
	r.n++
	b, _ := json.Marshal(e)
	r.w.Write(b)
	r.w.WriteByte('\n')
}

// invoke records an invocation and returns its time.
func (r *recorder) invoke(proc int, f, key string, elem int64, node string) int64 {
	t := r.now()
	e := event{Proc: proc, Type: "invoke", F: f, Key: key, Node: node, T: t}
	if f != "smembers" {
		e.Elem = &elem
	}
	r.write(e)
	return t
}

// complete records the completion of o (Call already set) and keeps it.
func (r *recorder) complete(o op) {
	e := event{Proc: o.Proc, Type: string(o.Outcome), F: o.F, Key: o.Key, Node: o.Node, Err: o.Err, T: o.Ret}
	if o.Outcome == outOK {
		if o.F == "smembers" {
			e.Out = o.Members
		} else {
			e.Out = o.N
		}
	}
	r.write(e)
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) nemesis(f, value string) {
	r.write(event{Proc: -1, Type: "info", F: f, Value: value, T: r.now()})
}

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.Flush()
	return r.f.Close()
}

func (r *recorder) operations() []op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]op(nil), r.ops...)
}

// --- porcupine model: a set of small ints (0..63) per key -------------------

type setIn struct {
	F    string
	Key  string
	Elem int64
}

type setOut struct {
	Unknown bool // indeterminate write: any reply, any time after the call
	N       int64
	Mask    uint64
}

var setModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Input.(setIn).Key
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
	},
	Init: func() any { return uint64(0) },
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
		return fmt.Sprintf("%s %s %d -> %s", strings.ToUpper(i.F), i.Key, i.Elem, res)
	},
	DescribeState: func(s any) string { return maskString(s.(uint64)) },
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

// toPorcupine converts completed operations: failed reads and definitely
// failed writes are dropped; indeterminate writes get Return = MaxInt64.
func toPorcupine(ops []op) []porcupine.Operation {
	var h []porcupine.Operation
	for _, o := range ops {
		read := o.F == "sismember" || o.F == "smembers"
		in := setIn{F: o.F, Key: o.Key, Elem: o.Elem}
		switch {
		case o.Outcome == outOK:
			var m uint64
			for _, e := range o.Members {
				m |= 1 << uint(e)
			}
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: setOut{N: o.N, Mask: m}, Return: o.Ret, Metadata: o.Node})
		case read || o.Outcome == outFail:
			// No effect on the state.
		default:
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: setOut{Unknown: true}, Return: math.MaxInt64, Metadata: o.Node})
		}
	}
	return h
}

// linResult is the linearizability verdict of one run.
type linResult struct {
	Result        string `json:"result"` // Ok, Illegal, Unknown
	Operations    int    `json:"operations"`
	Indeterminate int    `json:"indeterminate"`
	Keys          int    `json:"keys"`
	Visualization string `json:"visualization,omitempty"`
}

// checkLinearizable runs porcupine over ops; on anything but Ok it writes
// the HTML visualisation to vizPath.
func checkLinearizable(ops []op, vizPath string, timeout time.Duration) (linResult, error) {
	h := toPorcupine(ops)
	res := linResult{Operations: len(h)}
	keys := map[string]bool{}
	for _, o := range h {
		keys[o.Input.(setIn).Key] = true
		if o.Output.(setOut).Unknown {
			res.Indeterminate++
		}
	}
	res.Keys = len(keys)
	r, info := porcupine.CheckOperationsVerbose(setModel, h, timeout)
	res.Result = string(r)
	if r != porcupine.Ok && vizPath != "" {
		if err := porcupine.VisualizePath(setModel, info, vizPath); err != nil {
			return res, err
		}
		res.Visualization = vizPath
	}
	return res, nil
}

// --- Jepsen's set checker ----------------------------------------------------

type setResult struct {
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

func (s setResult) ok() bool {
	return len(s.Lost) == 0 && len(s.Unexpected) == 0 && len(s.FailedPresent) == 0 && s.BadReplies == 0 &&
		!s.FinalDiffer && s.Acknowledged > 0
}

// checkSet compares the set workload's adds with the final reads (one per
// node, taken after healing).
func checkSet(adds []op, finals [][]int64) setResult {
	var res setResult
	status := map[int64]outcome{}
	for _, o := range adds {
		res.Attempted++
		status[o.Elem] = o.Outcome
		switch o.Outcome {
		case outOK:
			res.Acknowledged++
			if o.N != 1 {
				res.BadReplies++
			}
		case outFail:
			res.Failed++
		default:
			res.Indeterminate++
		}
	}
	if len(finals) == 0 {
		return res
	}
	final := map[int64]bool{}
	for i, f := range finals {
		res.FinalReads = append(res.FinalReads, len(f))
		m := map[int64]bool{}
		for _, e := range f {
			m[e] = true
		}
		if i == 0 {
			final = m
		} else if len(m) != len(final) {
			res.FinalDiffer = true
		} else {
			for e := range m {
				if !final[e] {
					res.FinalDiffer = true
				}
			}
		}
	}
	res.FinalSize = len(final)
	for e, st := range status {
		switch {
		case st == outOK && !final[e]:
			res.Lost = append(res.Lost, e)
		case st == outInfo && final[e]:
			res.Recovered++
		case st == outFail && final[e]:
			res.FailedPresent = append(res.FailedPresent, e)
		}
	}
	for e := range final {
		if _, ok := status[e]; !ok {
			res.Unexpected = append(res.Unexpected, e)
		}
	}
	for _, s := range [][]int64{res.Lost, res.Unexpected, res.FailedPresent} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return res
}
