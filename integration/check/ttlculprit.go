package check

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// A TTL history that porcupine calls Illegal says nothing about why: CI
// keeps only the test's log, and porcupine's visualisation of thousands of
// ops is no help there. FindTTLCulprits narrows each illegal key's history to
// a minimal illegal sub-history, the way such a culprit was first found by
// hand (docs/jepsen.md, "A node that restarted under a leader slewing
// down"): keep the key's writes and drop its reads one at a time while the
// rest stays Illegal under the same bounds, then drop writes the same way,
// and repeat until no single op can go.
//
// Dropping a read only removes a constraint, but dropping a write can
// create a new violation, which would hide the real one behind a trivial
// one: a read of a value nobody wrote any more, or a read that now finds
// an older, superseded deadline (illegal too, but not what happened). So
// a write is dropped only if no remaining observation (a read, or an
// EXPIRE's answer) can then read from a write it could not read from
// before (lastWrites), and every observation that some write could
// explain, timing aside, still has such a write (sourced). That makes
// one pass not enough: an observation that holds a write in place may go
// in the next pass, and the write after it.

// CulpritLimit bounds the whole search, so that a huge illegal history
// cannot stall a run.
const CulpritLimit = 20 * time.Second

// MaxCulpritKeys bounds how many illegal keys are minimised (the others
// are only named).
const MaxCulpritKeys = 3

// TTLCulprits is what FindTTLCulprits found in an illegal TTL history.
type TTLCulprits struct {
	Bounds ClockBounds `json:"bounds"`
	// IllegalKeys: every key whose own history is Illegal; Keys: the
	// minimal sub-histories of the first MaxCulpritKeys of them.
	IllegalKeys []string     `json:"illegal_keys"`
	Keys        []TTLCulprit `json:"keys"`
	// Stopped says why the search ended early ("" if it did not).
	Stopped string `json:"stopped,omitempty"`
	Took    string `json:"took"`
}

// TTLCulprit is one key's minimal illegal sub-history.
type TTLCulprit struct {
	Key    string `json:"key"`
	KeyOps int    `json:"key_ops"` // the key's ops in the checked history
	// Minimal: the search ran to its end: no read of Ops can be dropped
	// with the history staying Illegal, nor a write under the rule above
	// (which keeps, say, the write an answered EXPIRE read from when a
	// later read needs that EXPIRE). False when the search stopped early:
	// Ops is then Illegal but may hold more than the culprit.
	Minimal bool        `json:"minimal"`
	Ops     []CulpritOp `json:"ops"`
}

// CulpritOp is one op of a culprit; times are seconds since the run
// started (the history's time base).
type CulpritOp struct {
	Op            string  `json:"op"` // e.g. "SET ttl:1:1 w3-116 PX 1162 -> OK"
	Node          string  `json:"node"`
	Proc          int     `json:"proc"`
	Call          float64 `json:"call_s"`
	Ret           float64 `json:"ret_s,omitempty"`
	Indeterminate bool    `json:"indeterminate,omitempty"` // no reply: Ret unknown
}

// errDeadline: the search's deadline passed (or porcupine timed out).
var errDeadline = errors.New("deadline passed")

type culpritSearch struct {
	model    porcupine.Model
	describe func(in, out any) string
	deadline time.Time
}

// check runs porcupine with what is left of the search's time.
func (cs *culpritSearch) check(h []porcupine.Operation) (bool, error) {
	left := time.Until(cs.deadline)
	if left <= 0 {
		return false, errDeadline
	}
	switch porcupine.CheckOperationsTimeout(cs.model, h, left) {
	case porcupine.Illegal:
		return true, nil
	case porcupine.Ok:
		return false, nil
	}
	return false, errDeadline
}

// FindTTLCulprits checks each key of ops on its own under the bounds b and
// minimises the illegal ones, within limit in total.
func FindTTLCulprits(ops []Op, b ClockBounds, limit time.Duration) *TTLCulprits {
	start := time.Now()
	m := TTLModel(b)
	cs := &culpritSearch{model: m, describe: m.DescribeOperation, deadline: start.Add(limit)}
	res := &TTLCulprits{Bounds: b, IllegalKeys: []string{}, Keys: []TTLCulprit{}}
	defer func() { res.Took = time.Since(start).Round(time.Millisecond).String() }()

	byKey := map[string][]porcupine.Operation{}
	var order []string
	for _, o := range ttlHistory(ops) {
		k := o.Input.(ttlIn).Key
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], o)
	}
	sort.Strings(order)
	for i, k := range order {
		illegal, err := cs.check(byKey[k])
		if err != nil {
			res.Stopped = fmt.Sprintf("time limit %s reached after checking %d of %d keys", limit, i, len(order))
			return res
		}
		if illegal {
			res.IllegalKeys = append(res.IllegalKeys, k)
		}
	}
	for i, k := range res.IllegalKeys {
		if i == MaxCulpritKeys {
			res.Stopped = fmt.Sprintf("only the first %d of %d illegal keys minimised", MaxCulpritKeys, len(res.IllegalKeys))
			break
		}
		h, err := cs.minimise(byKey[k])
		res.Keys = append(res.Keys, TTLCulprit{Key: k, KeyOps: len(byKey[k]), Minimal: err == nil, Ops: cs.culpritOps(h)})
		if err != nil {
			res.Stopped = fmt.Sprintf("time limit %s reached while minimising key %s (%d ops left of %d)", limit, k, len(h), len(byKey[k]))
			break
		}
	}
	return res
}

func isTTLRead(o porcupine.Operation) bool {
	f := o.Input.(ttlIn).F
	return f == "get" || f == "ttl" || f == "pttl"
}

// observes: the op's reply says something about the state (a read, or an
// EXPIRE that answered).
func observes(o porcupine.Operation) bool {
	return isTTLRead(o) || !o.Output.(ttlOut).Unknown && o.Input.(ttlIn).F == "expire"
}

// without returns h without its i-th op.
func without(h []porcupine.Operation, i int) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(h)-1)
	out = append(out, h[:i]...)
	return append(out, h[i+1:]...)
}

// minimise returns an illegal sub-history of the illegal h from which no
// single op can be dropped; on errDeadline the illegal sub-history it had
// reached.
func (cs *culpritSearch) minimise(h []porcupine.Operation) ([]porcupine.Operation, error) {
	for changed := true; changed; {
		changed = false
		// Reads first (dropping one only removes a constraint), then
		// writes under the rule above.
		for _, reads := range []bool{true, false} {
			for i := 0; i < len(h); i++ {
				if isTTLRead(h[i]) != reads {
					continue
				}
				try := without(h, i)
				drop, err := cs.check(try)
				if err == nil && drop && !reads {
					drop, err = cs.keepsSources(h, try)
				}
				if err != nil {
					return h, err
				}
				if drop {
					h, changed = try, true
					i--
				}
			}
		}
	}
	return h, nil
}

// keepsSources: dropping writes from h to get try leaves every
// observation reading from writes it could read from before (no write
// that h's dropped write superseded becomes visible to it), and every
// observation that some write of h explained (sourced) is still explained
// by a write of try.
func (cs *culpritSearch) keepsSources(h, try []porcupine.Operation) (bool, error) {
	for _, o := range try {
		if !observes(o) {
			continue
		}
		was := lastWrites(o, h)
		for w := range lastWrites(o, try) {
			if !was[w] {
				return false, nil
			}
		}
		before, err := cs.sourced(o, h)
		if err != nil {
			return false, err
		}
		if !before {
			continue // no write explained it: nothing to keep
		}
		after, err := cs.sourced(o, try)
		if err != nil || !after {
			return false, err
		}
	}
	return true, nil
}

// initialState stands for the key's state before any write in
// lastWrites.
const initialState = -1

// lastWrites is the writes of h (by ClientId and Call) that may be the
// last one linearized before o, and initialState if none need be: a write
// that began before o returned and that no other write must follow
// before o is called.
func lastWrites(o porcupine.Operation, h []porcupine.Operation) map[[2]int64]bool {
	out := map[[2]int64]bool{}
	var writes []porcupine.Operation
	for _, w := range h {
		if !isTTLRead(w) && !sameOp(w, o) && w.Call < o.Return {
			writes = append(writes, w)
		}
	}
	superseded := func(w porcupine.Operation) bool {
		for _, v := range writes {
			if w.Return < v.Call && v.Return < o.Call {
				return true
			}
		}
		return false
	}
	init := true
	for _, w := range writes {
		if w.Return < o.Call {
			init = false
		}
		if !superseded(w) {
			out[[2]int64{int64(w.ClientId), w.Call}] = true
		}
	}
	if init {
		out[[2]int64{initialState, 0}] = true
	}
	return out
}

// sourced: the writes of h could have produced o's reply if the clocks
// were no constraint. o keeps its place in real-time order, but its own
// clock reading may be anything, and the other EXPIREs' replies are
// ignored (they are observations of their own).
func (cs *culpritSearch) sourced(o porcupine.Operation, h []porcupine.Operation) (bool, error) {
	var s []porcupine.Operation
	for _, w := range h {
		switch {
		case sameOp(w, o):
			in := w.Input.(ttlIn)
			// Far enough in the past to pass every deadline's bounds, and
			// far enough from MinInt64 that adding them cannot overflow.
			in.Call, in.Ret = math.MinInt64/4, math.MaxInt64
			w.Input = in
		case isTTLRead(w):
			continue
		case w.Input.(ttlIn).F == "expire":
			w.Output = ttlOut{Unknown: true}
		}
		s = append(s, w)
	}
	illegal, err := cs.check(s)
	return !illegal, err
}

// sameOp: a and b are the same op of the history (a process has one op
// in flight at a time).
func sameOp(a, b porcupine.Operation) bool { return a.ClientId == b.ClientId && a.Call == b.Call }

func (cs *culpritSearch) culpritOps(h []porcupine.Operation) []CulpritOp {
	out := make([]CulpritOp, 0, len(h))
	for _, o := range h {
		c := CulpritOp{Op: cs.describe(o.Input, o.Output), Proc: o.ClientId, Call: float64(o.Call) / 1e9}
		c.Node, _ = o.Metadata.(string)
		if o.Return == math.MaxInt64 {
			c.Indeterminate = true
		} else {
			c.Ret = float64(o.Return) / 1e9
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Lines is the culprits as text for a test log, a few lines per key.
func (c *TTLCulprits) Lines() []string {
	lines := []string{fmt.Sprintf("TTL check Illegal: %d key(s) illegal on their own %v; bounds %s; times in s since the run started; search took %s",
		len(c.IllegalKeys), c.IllegalKeys, describeBounds(c.Bounds), c.Took)}
	for _, k := range c.Keys {
		what := "minimal illegal sub-history"
		if !k.Minimal {
			what = "illegal sub-history (NOT minimal: the search stopped early)"
		}
		lines = append(lines, fmt.Sprintf("  key %s: %s, %d of its %d ops:", k.Key, what, len(k.Ops), k.KeyOps))
		for _, o := range k.Ops {
			ret := "?"
			if !o.Indeterminate {
				ret = fmt.Sprintf("%.4f", o.Ret)
			}
			lines = append(lines, fmt.Sprintf("    %-44s node %-3s proc %-3d %.4f–%s s", o.Op, o.Node, o.Proc, o.Call, ret))
		}
	}
	if c.Stopped != "" {
		lines = append(lines, "  search stopped early: "+c.Stopped)
	}
	return lines
}

// describeBounds is the bounds as the culprit lines show them.
func describeBounds(b ClockBounds) string {
	return fmt.Sprintf("clock offsets in [%s, %s], rate within 1 ± %g", time.Duration(b.Lo), time.Duration(b.Hi), b.Slew)
}
