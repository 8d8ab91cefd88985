package check

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// Workload (e): string keys as registers with compare-and-set, checked for
// linearizability with porcupine, one partition per key. The operations:
// GET, SET k v, and a CAS written as a Lua script (EVAL), which must run
// as one atomic step of the replicated state machine:
//
//	if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[2]) return 1 else return 0 end
//
// On a missing key redis.call('get') is false, never equal to a string, so
// a CAS there answers 0.

// CASScript is the CAS the workload sends with EVAL (1 key, ARGV[1] the
// expected value, ARGV[2] the new one).
const CASScript = "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[2]) return 1 else return 0 end"

// regState is one key's value; Set false is a missing key.
type regState struct {
	Set bool
	V   string
}

type regIn struct {
	F      string // get, set, cas, restore
	Key    string
	Value  string // set, cas: the new value; restore: the value installed
	Expect string // cas
	Absent bool   // restore: the key is not in the backup
}

type regOut struct {
	Unknown bool   // indeterminate write: any reply, any time after the call
	Nil     bool   // get: the key was missing
	Value   string // get
	N       int64  // cas: 1 swapped, 0 not
}

// RegisterModel is the porcupine model of workload (e).
var RegisterModel = porcupine.Model{
	Partition: partitionByKey(func(in any) string { return in.(regIn).Key }),
	Init:      func() any { return regState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(regState), in.(regIn), out.(regOut)
		switch i.F {
		case "get":
			if o.Nil {
				return !st.Set, st
			}
			return st.Set && o.Value == st.V, st
		case "set":
			return true, regState{Set: true, V: i.Value}
		case "cas":
			match := st.Set && st.V == i.Expect
			next := st
			if match {
				next = regState{Set: true, V: i.Value}
			}
			if o.Unknown {
				return true, next
			}
			return o.N == b2i(match), next
		case "restore":
			return true, regState{Set: !i.Absent, V: i.Value}
		}
		return false, st
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(regIn), out.(regOut)
		res := fmt.Sprint(o.N)
		switch {
		case o.Unknown:
			res = "?"
		case i.F == "get" && o.Nil:
			res = "nil"
		case i.F == "get":
			res = o.Value
		case i.F == "set":
			res = "OK"
		}
		switch i.F {
		case "get":
			return fmt.Sprintf("GET %s -> %s", i.Key, res)
		case "set":
			return fmt.Sprintf("SET %s %s -> %s", i.Key, i.Value, res)
		case "cas":
			return fmt.Sprintf("CAS %s %s→%s -> %s", i.Key, i.Expect, i.Value, res)
		}
		if i.Absent {
			return fmt.Sprintf("RESTORE %s (absent) -> %s", i.Key, res)
		}
		return fmt.Sprintf("RESTORE %s=%s -> %s", i.Key, i.Value, res)
	},
	DescribeState: func(s any) string {
		if st := s.(regState); st.Set {
			return st.V
		}
		return "nil"
	},
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// registerHistory converts completed operations: failed reads and definitely
// failed writes are dropped; indeterminate writes get Return = MaxInt64.
func registerHistory(ops []Op) []porcupine.Operation {
	var h []porcupine.Operation
	for _, o := range ops {
		var in regIn
		switch o.F {
		case "get":
			in = regIn{F: "get", Key: o.Key}
		case "set":
			in = regIn{F: "set", Key: o.Key, Value: o.Value}
		case "cas":
			in = regIn{F: "cas", Key: o.Key, Value: o.Value, Expect: o.Expect}
		default:
			continue
		}
		switch {
		case o.Outcome == OK:
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: regOut{Nil: o.Nil, Value: o.Value, N: o.N}, Return: o.Ret, Metadata: o.Node})
		case o.F == "get" || o.Outcome == Fail:
			// No effect on the state.
		default:
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: regOut{Unknown: true}, Return: math.MaxInt64, Metadata: o.Node})
		}
	}
	return h
}

// Register runs porcupine over workload (e)'s ops (GET, SET, CAS); on
// anything but Ok it writes the HTML visualisation to vizPath (when set).
func Register(ops []Op, vizPath string, timeout time.Duration) (LinResult, error) {
	return RegisterRestored(ops, nil, vizPath, timeout)
}

// RegisterRestored is Register for a run with a backup restored into it:
// the backup is a read of every key and each restore attempt a write of
// every key (Restore.registerOps).
func RegisterRestored(ops []Op, r *Restore, vizPath string, timeout time.Duration) (LinResult, error) {
	h := registerHistory(ops)
	res := LinResult{}
	for _, o := range h {
		if o.Output.(regOut).Unknown {
			res.Indeterminate++
		}
	}
	if r != nil {
		h = append(h, r.registerOps(h)...)
	}
	res.Operations = len(h)
	res.Keys = countKeys(h, func(in any) string { return in.(regIn).Key })
	return res, runPorcupine(RegisterModel, h, vizPath, timeout, &res)
}
