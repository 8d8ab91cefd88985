// Package check holds the Jepsen suite's history format and checkers, apart
// from the suite itself (which is behind the jepsen build tag) so that a
// saved history can be checked again (integration/cmd/recheck) and the
// checkers are unit-tested by the plain "go test ./...".
//
// Checkers: per-key set linearizability with porcupine (Linearizable),
// Jepsen's set workload (Set), SPOP as a queue (Queue) and keys with TTLs
// against a model that allows the clocks' uncertainty (TTL).
package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Outcome classifies a completed operation.
type Outcome string

const (
	OK   Outcome = "ok"   // a reply (which may say "not found")
	Fail Outcome = "fail" // certainly not done (-TRYAGAIN)
	Info Outcome = "info" // indeterminate: may take effect, even later
)

// Event is one line of history.jsonl: an invocation, a completion (ok, fail
// or info) or a nemesis action. T is nanoseconds on the monotonic clock
// since the start of the run.
type Event struct {
	Index int    `json:"i"`
	Proc  int    `json:"proc"` // NemesisProc: the nemesis
	Type  string `json:"type"` // invoke, ok, fail, info
	F     string `json:"f"`
	Key   string `json:"key,omitempty"`
	Elem  *int64 `json:"elem,omitempty"`
	Out   any    `json:"out,omitempty"`
	Nil   bool   `json:"nil,omitempty"` // a nil reply (GET, SPOP)
	TTLms int64  `json:"ttl_ms,omitempty"`
	Err   string `json:"err,omitempty"`
	Node  string `json:"node,omitempty"`
	Value string `json:"value,omitempty"`
	// Expect: a compare-and-set's expected value (Value is its new one).
	Expect string `json:"expect,omitempty"`
	// Moved: on a completion, the -MOVED reply the first node gave; the
	// op's outcome is the reply of the node it named (one redirect, as a
	// cluster client follows it). A redirect alone is never a result.
	Moved string `json:"moved,omitempty"`
	T     int64  `json:"t"`
}

// NemesisProc is the process id of nemesis events; FinalProc of the final
// reads taken after healing.
const (
	NemesisProc = -1
	FinalProc   = -2
)

// Op is one completed client operation.
type Op struct {
	Proc      int
	F         string // sadd, srem, sismember, smembers, spop, final, set, expire, get, ttl, pttl, cas, backup, restore
	Key       string
	Elem      int64 // SADD/SREM/SISMEMBER argument; SPOP's reply
	Outcome   Outcome
	N         int64   // integer reply
	Members   []int64 // SMEMBERS (and final) reply
	Value     string  // SET's and CAS's (new) argument; GET's reply; a string key's backed-up value
	Expect    string  // CAS's expected value
	Nil       bool    // GET or SPOP answered nil
	TTLms     int64   // SET PX / PEXPIRE argument in ms; 0 none
	Call, Ret int64
	Node      string
	Err       string
	Moved     string // the -MOVED reply followed, if any (Event.Moved)
}

// hasElemArg: the op's invocation carries Elem.
func (o Op) hasElemArg() bool {
	return o.F == "sadd" || o.F == "srem" || o.F == "sismember"
}

// InvokeEvent is the history line of o's invocation.
func (o Op) InvokeEvent() Event {
	e := Event{Proc: o.Proc, Type: "invoke", F: o.F, Key: o.Key, Node: o.Node, T: o.Call, TTLms: o.TTLms}
	if o.hasElemArg() {
		el := o.Elem
		e.Elem = &el
	}
	if o.F == "set" || o.F == "cas" {
		e.Value = o.Value
	}
	if o.F == "cas" {
		e.Expect = o.Expect
	}
	return e
}

// CompleteEvent is the history line of o's completion.
func (o Op) CompleteEvent() Event {
	e := Event{Proc: o.Proc, Type: string(o.Outcome), F: o.F, Key: o.Key, Node: o.Node, Err: o.Err, Moved: o.Moved, T: o.Ret}
	if o.Outcome != OK {
		return e
	}
	switch {
	case o.Nil:
		e.Nil = true
	case o.F == "smembers" || o.F == "final" || o.F == "backup" && o.Key != "" && o.Members != nil:
		e.Out = o.Members
		if o.Members == nil {
			e.Out = []int64{}
		}
	case o.F == "spop":
		e.Out = o.Elem
	case o.F == "get" || o.F == "backup" && o.Key != "":
		e.Out = o.Value
	case o.F == "set":
		e.Out = "OK"
	default:
		e.Out = o.N
	}
	return e
}

// ReadHistory reads history.jsonl.
func ReadHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeHistory(f)
}

// DecodeHistory reads JSON lines of events.
func DecodeHistory(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Ops pairs invocations with their completions (a process has at most one
// operation in flight) and returns the completed operations in completion
// order, plus the nemesis events. An invocation without a completion (the
// run stopped while it was in flight) becomes indeterminate.
func Ops(events []Event) ([]Op, []Event, error) {
	var ops []Op
	var nemesis []Event
	open := map[int]Op{}
	for _, e := range events {
		if e.Proc == NemesisProc {
			nemesis = append(nemesis, e)
			continue
		}
		if e.Type == "invoke" {
			if _, busy := open[e.Proc]; busy {
				return nil, nil, fmt.Errorf("event %d: process %d invokes %s with an operation in flight", e.Index, e.Proc, e.F)
			}
			o := Op{Proc: e.Proc, F: e.F, Key: e.Key, Value: e.Value, Expect: e.Expect, TTLms: e.TTLms, Call: e.T, Node: e.Node}
			if e.Elem != nil {
				o.Elem = *e.Elem
			}
			open[e.Proc] = o
			continue
		}
		o, ok := open[e.Proc]
		if !ok {
			return nil, nil, fmt.Errorf("event %d: completion of process %d without an invocation", e.Index, e.Proc)
		}
		delete(open, e.Proc)
		o.Outcome, o.Ret, o.Err, o.Moved = Outcome(e.Type), e.T, e.Err, e.Moved
		if o.Outcome == OK {
			if err := o.setOutput(e); err != nil {
				return nil, nil, fmt.Errorf("event %d: %w", e.Index, err)
			}
		}
		ops = append(ops, o)
	}
	var left []int
	for p := range open {
		left = append(left, p)
	}
	sort.Ints(left)
	for _, p := range left {
		o := open[p]
		o.Outcome, o.Ret = Info, math.MaxInt64
		ops = append(ops, o)
	}
	return ops, nemesis, nil
}

// setOutput fills o's reply from an ok completion.
func (o *Op) setOutput(e Event) error {
	if e.Nil {
		o.Nil = true
		return nil
	}
	switch v := e.Out.(type) {
	case float64:
		if o.F == "spop" {
			o.Elem = int64(v)
		} else {
			o.N = int64(v)
		}
	case string:
		if o.F == "get" || o.F == "backup" {
			o.Value = v
		}
	case []any:
		o.Members = make([]int64, 0, len(v))
		for _, m := range v {
			f, ok := m.(float64)
			if !ok {
				return fmt.Errorf("%s: member %v is not a number", o.F, m)
			}
			o.Members = append(o.Members, int64(f))
		}
	case nil:
		// SADD's :0 and similar are numbers; nil here is an empty reply.
	default:
		return fmt.Errorf("%s: unexpected output %T", o.F, e.Out)
	}
	return nil
}

// ByKeyPrefix returns the ops whose key starts with prefix.
func ByKeyPrefix(ops []Op, prefix string) []Op {
	var out []Op
	for _, o := range ops {
		if strings.HasPrefix(o.Key, prefix) {
			out = append(out, o)
		}
	}
	return out
}
