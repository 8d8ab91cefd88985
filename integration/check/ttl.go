package check

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Workload (c): string keys with TTLs — SET k v [PX ms], PEXPIRE-style
// EXPIRE, GET, TTL, PTTL — checked for linearizability against a model
// that allows the clocks' uncertainty.
//
// What the system promises (docs/design.md, State): a leader turns a relative
// TTL into a deadline on its own clock when it proposes the write
// (D = clock_leader(t_propose) + ttl), and a node decides "expired" when
// its clock E = max(own clock, the latest entry time it applied) has
// reached D. Every node's clock is true time plus an offset in
// [Lo, Hi] (Lo ≤ 0 ≤ Hi: the run's configured offsets plus a few ms for
// millisecond truncation and the harness's clock). So, with times on the
// harness's clock and an operation running over [call, ret]:
//
//   - a write that set a deadline did so with D in
//     [call + Lo + ttl, ret + Hi + ttl]; and since its linearization point
//     precedes that of every later operation, D ≤ ret' + Hi + ttl for any
//     operation linearized after it (this bounds indeterminate writes);
//   - a read that sees the key alive had E < D with E ≥ call + Lo: it is
//     legal only if call + Lo < D is possible, and it narrows D to
//     D > call + Lo;
//   - a read that sees it gone had E ≥ D with E ≤ ret + Hi: legal only
//     if D ≤ ret + Hi is possible, and it narrows D to D ≤ ret + Hi. The
//     key is not gone for later reads: a node whose clock is behind may
//     still see it until the bounds meet;
//   - PTTL p narrows D to [call + Lo + p, ret + Hi + p] (± 1 ms); TTL s
//     to the same with p in [1000s − 500, 1000s + 499] ms (Redis rounds);
//   - EXPIRE answers 1 if the key was alive at the entry's time (then the
//     new deadline holds) and 0 if it was gone (then it is gone for
//     everyone: later linearizable reads are on nodes that applied it).
//
// Concretely: a GET that starts more than ttl + (Hi − Lo) after a SET
// PX ttl returned must not see the value, and one that returns less than
// ttl − (Hi − Lo) after the SET was invoked must see it (if nothing else
// wrote the key).
//
// The cluster clock (cluster/DESIGN.md, "Cluster time") makes a weaker
// and more useful promise, whatever the nodes' offsets: the cluster's
// time runs at between 1 − Slew and 1 + Slew of real speed while it slews
// towards the leader's wall clock, and a node's view of it is within
// [Lo, Hi] of it (a follower counts from the newest entry it applied).
// The model then measures deadlines in real time: a write's deadline
// passes between ttl/(1 + Slew) and ttl/(1 − Slew) after it took effect,
// so D lies in [call + Lo + ttl/(1 + Slew), ret + Hi + ttl/(1 − Slew)],
// and the reads are checked as above. Slew 0 is the model of fixed
// offsets.

// ClockBounds is the offset range of the nodes' clocks, in nanoseconds.
type ClockBounds struct {
	Lo int64 `json:"lo_ns"`
	Hi int64 `json:"hi_ns"`
	// Slew bounds the clock's rate: between 1 − Slew and 1 + Slew of real
	// speed (0: exact speed).
	Slew float64 `json:"slew,omitempty"`
}

// ClusterSlew is the cluster clock's bound on its rate (cluster/clock.go,
// clockSlewDiv: at most 1/20 of elapsed time).
const ClusterSlew = 1.0 / 20

// ViewSlack bounds how far a node's view of cluster time is from the
// leader's: a follower counts from the newest entry it applied, so it is
// behind by the delay between the leader stamping an entry and the
// follower applying it. (A node that restarts and leads at once resumes
// from the cluster time it saved, counting the time since at the slowest
// speed: that is within Slew, not ViewSlack.)
const ViewSlack = 100 * time.Millisecond

// ClusterBounds are the bounds of the cluster clock, whatever the nodes'
// offsets.
func ClusterBounds() ClockBounds {
	return ClockBounds{Lo: -int64(ViewSlack + ClockSlack), Hi: int64(ViewSlack + ClockSlack), Slew: ClusterSlew}
}

// ClockSlack widens the bounds for millisecond truncation of the nodes'
// clocks and the harness's monotonic clock drifting from the wall clock
// over a run.
const ClockSlack = 5 * time.Millisecond

// BoundsFor returns the bounds of a cluster whose nodes have offsets (an
// absent node has offset 0).
func BoundsFor(offsets ...time.Duration) ClockBounds {
	b := ClockBounds{Lo: -int64(ClockSlack), Hi: int64(ClockSlack)}
	for _, o := range offsets {
		b.Lo = min(b.Lo, int64(o)-int64(ClockSlack))
		b.Hi = max(b.Hi, int64(o)+int64(ClockSlack))
	}
	return b
}

type ttlIn struct {
	F         string // set, expire, get, ttl, pttl
	Key       string
	Value     string
	TTL       int64 // ns; set: 0 = no deadline
	Call, Ret int64 // Ret MaxInt64: indeterminate
}

type ttlOut struct {
	Unknown bool
	Nil     bool
	Value   string
	N       int64
}

// ttlState is one possible state of a key. A deadline D is known to lie in
// [Dlo, Dhi]; Pend is the TTL it was set with (to bound it by later ops).
type ttlState struct {
	Exists   bool
	Value    string
	HasTTL   bool
	Dlo, Dhi int64
	Pend     int64
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// TTLModel is the model above for the bounds b.
func TTLModel(b ClockBounds) porcupine.Model {
	const msNs = int64(time.Millisecond)
	// shortest and longest real time a remaining time d lasts.
	shortest := func(d int64) int64 { return int64(float64(d) / (1 + b.Slew)) }
	longest := func(d int64) int64 { return int64(math.Ceil(float64(d) / (1 - b.Slew))) }
	alive := func(s ttlState, eLo int64) (ttlState, bool) { // E ≥ eLo and E < D
		if !s.Exists {
			return s, false
		}
		if !s.HasTTL {
			return s, true
		}
		if eLo >= s.Dhi {
			return s, false
		}
		s.Dlo = max(s.Dlo, eLo)
		return s, true
	}
	gone := func(s ttlState, eHi int64) (ttlState, bool) { // E ≤ eHi and E ≥ D
		if !s.Exists {
			return s, true
		}
		if !s.HasTTL || eHi < s.Dlo {
			return s, false
		}
		s.Dhi = min(s.Dhi, eHi)
		return s, true
	}
	// within narrows D to [lo, hi] (an observed remaining time).
	within := func(s ttlState, lo, hi int64) (ttlState, bool) {
		if !s.Exists || !s.HasTTL || hi < s.Dlo || lo > s.Dhi {
			return s, false
		}
		s.Dlo, s.Dhi = max(s.Dlo, lo), min(s.Dhi, hi)
		return s, true
	}
	deadline := func(i ttlIn) ttlState {
		return ttlState{Exists: true, HasTTL: true, Dlo: i.Call + b.Lo + shortest(i.TTL),
			Dhi: satAdd(satAdd(i.Ret, b.Hi), longest(i.TTL)), Pend: i.TTL}
	}
	step := func(st, in, out any) []any {
		s, i, o := st.(ttlState), in.(ttlIn), out.(ttlOut)
		if s.HasTTL && i.Ret != math.MaxInt64 {
			// This op is linearized after the write that set the deadline.
			s.Dhi = min(s.Dhi, satAdd(satAdd(i.Ret, b.Hi), longest(s.Pend)))
			if s.Dhi < s.Dlo {
				return nil
			}
		}
		eLo, eHi := i.Call+b.Lo, satAdd(i.Ret, b.Hi)
		var next []any
		switch i.F {
		case "set":
			if i.TTL == 0 {
				return []any{ttlState{Exists: true, Value: i.Value}}
			}
			d := deadline(i)
			d.Value = i.Value
			return []any{d}
		case "expire":
			if o.Unknown || o.N == 1 {
				if a, ok := alive(s, eLo); ok {
					d := deadline(i)
					d.Value = a.Value
					next = append(next, d)
				}
			}
			if o.Unknown || o.N == 0 {
				if _, ok := gone(s, eHi); ok {
					next = append(next, ttlState{})
				}
			}
		case "get":
			if o.Nil {
				if g, ok := gone(s, eHi); ok {
					next = append(next, g)
				}
			} else if a, ok := alive(s, eLo); ok && a.Value == o.Value {
				next = append(next, a)
			}
		case "ttl", "pttl":
			switch {
			case o.N == -2:
				if g, ok := gone(s, eHi); ok {
					next = append(next, g)
				}
			case o.N == -1:
				if s.Exists && !s.HasTTL {
					next = append(next, s)
				}
			case o.N >= 0:
				lo, hi := o.N*msNs-msNs, o.N*msNs+msNs
				if i.F == "ttl" {
					lo, hi = (o.N*1000-500)*msNs-msNs, (o.N*1000+499)*msNs+msNs
				}
				lo, hi = shortest(lo), longest(hi)
				if a, ok := alive(s, eLo); ok {
					if w, ok := within(a, eLo+lo, satAdd(eHi, hi)); ok {
						next = append(next, w)
					}
				}
			}
		}
		return next
	}
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey(func(in any) string { return in.(ttlIn).Key }),
		Init:      func() []any { return []any{ttlState{}} },
		Step:      step,
		DescribeOperation: func(in, out any) string {
			i, o := in.(ttlIn), out.(ttlOut)
			var call string
			switch i.F {
			case "set":
				call = fmt.Sprintf("SET %s %s", i.Key, i.Value)
				if i.TTL > 0 {
					call += fmt.Sprintf(" PX %d", i.TTL/msNs)
				}
			case "expire":
				call = fmt.Sprintf("PEXPIRE %s %d", i.Key, i.TTL/msNs)
			default:
				call = strings.ToUpper(i.F) + " " + i.Key
			}
			switch {
			case o.Unknown:
				return call + " -> ?"
			case o.Nil:
				return call + " -> nil"
			case i.F == "get":
				return call + " -> " + o.Value
			case i.F == "set":
				return call + " -> OK"
			}
			return fmt.Sprintf("%s -> %d", call, o.N)
		},
		DescribeState: func(st any) string {
			s := st.(ttlState)
			switch {
			case !s.Exists:
				return "absent"
			case !s.HasTTL:
				return s.Value + " (no TTL)"
			}
			hi := "∞"
			if s.Dhi != math.MaxInt64 {
				hi = fmt.Sprintf("%.3fs", float64(s.Dhi)/1e9)
			}
			return fmt.Sprintf("%s, deadline in [%.3fs, %s]", s.Value, float64(s.Dlo)/1e9, hi)
		},
	}
	return nm.ToModel()
}

// ttlHistory converts the TTL workload's ops: failed ops and failed or
// indeterminate reads are dropped; indeterminate writes get Return =
// MaxInt64.
func ttlHistory(ops []Op) []porcupine.Operation {
	var h []porcupine.Operation
	for _, o := range ops {
		write := o.F == "set" || o.F == "expire"
		in := ttlIn{F: o.F, Key: o.Key, Value: o.Value, TTL: o.TTLms * int64(time.Millisecond), Call: o.Call, Ret: o.Ret}
		switch {
		case o.Outcome == OK:
			out := ttlOut{Nil: o.Nil, N: o.N}
			if o.F == "get" {
				in.Value, out.Value = "", o.Value
			}
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call, Output: out,
				Return: o.Ret, Metadata: o.Node})
		case write && o.Outcome == Info:
			in.Ret = math.MaxInt64
			h = append(h, porcupine.Operation{ClientId: o.Proc, Input: in, Call: o.Call,
				Output: ttlOut{Unknown: true}, Return: math.MaxInt64, Metadata: o.Node})
		}
	}
	return h
}

// TTL runs porcupine over the TTL workload's ops with the clock bounds b;
// on anything but Ok it writes the HTML visualisation to vizPath (when
// set).
func TTL(ops []Op, b ClockBounds, vizPath string, timeout time.Duration) (LinResult, error) {
	h := ttlHistory(ops)
	res := LinResult{Operations: len(h)}
	for _, o := range h {
		if o.Output.(ttlOut).Unknown {
			res.Indeterminate++
		}
	}
	res.Keys = countKeys(h, func(in any) string { return in.(ttlIn).Key })
	return res, runPorcupine(TTLModel(b), h, vizPath, timeout, &res)
}

// ClusterClockEvent is the nemesis event a run records when its nodes
// keep a cluster clock (ClusterBounds), so that Bounds knows the model.
func ClusterClockEvent() Event {
	return Event{Proc: NemesisProc, Type: "info", F: "cluster-clock", Value: strconv.FormatFloat(ClusterSlew, 'g', -1, 64)}
}

// ClockOffsetEvent is the nemesis event a run records for each node started
// with a clock offset, so that its history alone gives the TTL checker its
// bounds.
func ClockOffsetEvent(node string, offset time.Duration) Event {
	return Event{Proc: NemesisProc, Type: "info", F: "clock-offset", Node: node, Value: offset.String()}
}

// Bounds returns the clock bounds recorded in a history's nemesis events:
// ClusterBounds after a cluster-clock event, else those of the recorded
// clock offsets (no clock-offset event: every clock true, within
// ClockSlack).
func Bounds(nemesis []Event) ClockBounds {
	var offs []time.Duration
	for _, e := range nemesis {
		if e.F == "cluster-clock" {
			return ClusterBounds()
		}
		if e.F != "clock-offset" {
			continue
		}
		if d, err := time.ParseDuration(e.Value); err == nil {
			offs = append(offs, d)
		}
	}
	return BoundsFor(offs...)
}
