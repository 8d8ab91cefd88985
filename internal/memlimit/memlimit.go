// Package memlimit keeps the Go runtime's soft memory limit
// (debug.SetMemoryLimit) a step above the live heap, updated after every
// collection, so that the heap cannot overshoot the collector's target when
// what a collection finds live jumps for a moment.
//
// Why: with gc-percent alone the next collection starts at (1 + gc-percent)
// × what the last one found live, and RSS follows that goal plus the free
// pages the runtime has not returned yet. During a write flood two things
// inflate it (docs/benchmarks.md, issue 14): a snapshot's copy-on-write
// copies, live until its writer passes them, raise one cycle's live heap by
// 20-30 MB and so the next goal by half as much again; and the pages that
// collections free are returned to the OS only by the slow background
// scavenger, so 20-40 MB of free heap stay resident. The limit here takes
// the goal from the smallest live heap of the last few cycles, and, being a
// memory limit, makes the runtime return free pages before it grows past
// it. Collections during a snapshot (Transient) stay out of that window:
// on a loaded machine a snapshot at the end of the seed's load lasted 4-6 s,
// several collections, each finding its copies live.
//
// A small heap gets a floor of room instead: gc-percent of a heap of a few
// tens of MB is a few MB, which a write load allocates in milliseconds, and
// each collection has a cost that does not shrink with the heap (stopping
// the world, scanning stacks, sweeping, waking the mark workers). While it
// follows, the package raises the runtime's target (GOGC) for a live heap
// under minGrowth×100/gc-percent, so that the heap may grow at least
// minGrowth past it (Percent); gc-percent (SetPercent) governs larger heaps
// as it did.
//
// The limit is process-wide (as the runtime's is): one Follow per process.
// A bound an operator or maxmemory sets (SetCeiling) caps it.
package memlimit

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// window is how many collections the limit looks back over: a snapshot's
// copies stay live for a second or two, a few collections under a write
// flood, and the dataset itself grows little in that many.
const window = 4

// minHeadroom bounds the limit from below at what is live now plus this
// fraction of gc-percent's headroom: when the live heap grows for good
// (a bulk load, a big value) the limit lags it by up to window
// collections, and the collector must still have room to run at a normal
// pace meanwhile, not back to back.
const minHeadroom = 0.25

// minGrowth is the least room the heap gets past its live heap while the
// limit follows it, whatever gc-percent, and so the lowest limit set (a
// starting node whose live heap is a few MB collected back to back when the
// limit followed heaps of 1-2 MB: 200 collections in its first 3 s, before
// a write). 64 MiB: under it gc-percent 50 collected a node with a 30-50 MB
// dataset several times a second under writes and spent 6-10% of its CPU on
// it (docs/benchmarks.md, "A floor under the collector's headroom"). It
// changes nothing for a live heap of 128 MiB and more at gc-percent 50, such
// as the seed's at the memory peak.
const minGrowth = 64 << 20

// Percent is the runtime target that gives a live heap at least minGrowth
// of room: percent, or more for a heap under minGrowth×100/percent.
func Percent(live uint64, percent int) int {
	if percent <= 0 || live == 0 {
		return percent
	}
	need := (uint64(minGrowth)*100 + live - 1) / live
	if need <= uint64(percent) {
		return percent
	}
	return int(min(need, maxPercent))
}

// maxPercent bounds Percent for a heap of a few KB; the limit (at least
// minGrowth) decides there anyway.
const maxPercent = 1 << 20

// RuntimePercent is the runtime's target in force (GOGC, as gc-percent or
// Percent set it; -1: off), read without setting it: setting it to read it
// back could put back a value the follower had just replaced.
func RuntimePercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	// GOGC=off is the runtime's -1, which reads back as 2^64-1.
	return int(int64(s[0].Value.Uint64()))
}

// Sample is what one collection left: the live heap it marked and the
// memory in use around the objects (fragmentation inside spans, stacks,
// the runtime's metadata).
type Sample struct {
	Live     uint64
	Overhead uint64
}

// Limit is the soft limit after the collections in recent (oldest first,
// at least one): the smallest live heap among them with gc-percent's
// headroom, or minGrowth when that is more, plus the largest overhead among
// them; at least the newest live heap with minHeadroom of that headroom.
func Limit(recent []Sample, percent int) int64 {
	if len(recent) == 0 || percent < 0 {
		return math.MaxInt64
	}
	minLive, over := recent[0].Live, recent[0].Overhead
	for _, s := range recent[1:] {
		minLive = min(minLive, s.Live)
		over = max(over, s.Overhead)
	}
	live := recent[len(recent)-1].Live
	head := float64(percent) / 100
	l := float64(minLive) + max(float64(minLive)*head, minGrowth) + float64(over)
	floor := float64(live)*(1+head*minHeadroom) + float64(over)
	l = max(l, floor)
	if l >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(l)
}

// maxTransient bounds how many collections in a row stay out of the window
// during transient stretches: a snapshot that outlasts them (a huge
// dataset, a starved writer) is then simply what the heap holds, and the
// limit follows it rather than running on the floor alone.
const maxTransient = 2 * window

// recentSamples is the window of collections the limit is taken from.
type recentSamples struct {
	s       []Sample // oldest first, at most window
	skipped int      // transient samples left out in a row
}

// add takes the sample of a collection and returns the limit. A transient
// sample (taken while copies that are about to become garbage were live)
// does not enter the window: it still counts for the floor and the
// overhead of this limit, but the next ones are not taken from the smallest
// live heap it raised. The window's first sample always enters, and so does
// any after maxTransient left out in a row.
func (r *recentSamples) add(s Sample, transient bool, percent int) int64 {
	if transient && len(r.s) > 0 && r.skipped < maxTransient {
		r.skipped++
		return Limit(append(r.s[:len(r.s):len(r.s)], s), percent)
	}
	r.skipped = 0
	if len(r.s) == window {
		copy(r.s, r.s[1:])
		r.s = r.s[:window-1]
	}
	r.s = append(r.s, s)
	return Limit(r.s, percent)
}

// transient counts the stretches under way (Transient) and tail says one
// ended since the last collection looked.
var transient struct {
	active atomic.Int64
	tail   atomic.Bool
}

// Transient marks the start of a stretch during which the live heap holds
// copies that will be garbage once it ends: a Raft snapshot being written,
// whose copy-on-write keeps the old values the writer has yet to read
// beside the new ones (20-30 MB at the seed's end), for as long as the
// writer takes, which on a loaded machine is several collections. Without
// this, a snapshot spanning the window's collections raised the limit by
// gc-percent of its copies, and the peak with it (docs/benchmarks.md,
// session 11). Call end once when the stretch is over; the collection
// after it still counts as transient, as its mark may have begun before.
func Transient() (end func()) {
	transient.active.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			transient.tail.Store(true)
			transient.active.Add(-1)
		})
	}
}

// InTransient reports whether a transient stretch is under way.
func InTransient() bool { return transient.active.Load() > 0 }

// takeTransient reports whether the collection just ended may hold a
// transient stretch's copies, and consumes the mark a finished one left.
func takeTransient() bool {
	tail := transient.tail.Swap(false)
	return tail || transient.active.Load() > 0
}

// generations counts Follow calls over every follower (tests swap f), so
// that no sentinel of an earlier Follow matches a later one.
var generations atomic.Uint64

// follower is the process's one: the runtime's limit is process-wide.
var f = newFollower()

// newFollower is a follower that is off and sets no limit of its own: a
// ceiling alone (maxmemory with gc-follow-live no) is then the limit.
func newFollower() *follower { return &follower{ceiling: math.MaxInt64, limit: math.MaxInt64} }

type follower struct {
	mu      sync.Mutex
	on      bool
	percent int    // gc-percent as set (SetPercent); 0: not set, the runtime's own (GOGC) stands
	live    uint64 // the live heap of the last collection seen
	gogc    int    // the runtime's target as the follower last set it
	gen     uint64 // this Follow's generation (generations), so a stopped follower's last sentinel does nothing
	ceiling int64
	recent  recentSamples
	limit   int64 // what the samples give, before the ceiling
	samples []metrics.Sample
}

// Follow starts keeping the limit above the live heap, unless GOMEMLIMIT is
// set (an operator's explicit limit wins) or it already runs. It reports
// whether the limit now follows the heap.
func Follow() bool {
	if os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on {
		return true
	}
	f.on = true
	f.gen = generations.Add(1)
	f.live = 0
	f.recent = recentSamples{}
	f.limit = math.MaxInt64
	arm(f, f.gen)
	return true
}

// Stop stops following and leaves the ceiling alone in force.
func Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return
	}
	f.on = false
	f.limit = math.MaxInt64
	debug.SetMemoryLimit(f.ceiling)
	if f.percent > 0 {
		f.gogc = f.percent
		debug.SetGCPercent(f.percent)
	}
}

// SetPercent sets gc-percent, the runtime's target (GOGC) from here on:
// as it is, or raised for a small heap (Percent) while the limit follows.
func SetPercent(p int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.percent = p
	if f.on {
		p = Percent(f.live, p)
	}
	f.gogc = p
	debug.SetGCPercent(p)
}

// Following reports whether the limit follows the live heap.
func Following() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on
}

// SetCeiling sets a bound the limit never exceeds (math.MaxInt64: none),
// such as the one maxmemory derives; without Follow it is the limit.
func SetCeiling(c int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ceiling = c
	debug.SetMemoryLimit(min(f.ceiling, f.limit))
}

// sentinel is garbage from the moment it is armed, so its finalizer runs
// after the next collection. It holds a pointer so that it is not a tiny
// allocation, which shares its block (and its finalizer's fate) with
// others.
type sentinel struct {
	_ *byte
	_ [2]uintptr
}

func arm(fl *follower, gen uint64) {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { collected(fl, gen) })
}

// collected runs on the finalizer goroutine after each collection. The
// sentinel carries its follower: the package's f is not read here, so a
// test that swaps f does not race with a sentinel still armed.
func collected(fl *follower, gen uint64) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if !fl.on || fl.gen != gen {
		return
	}
	s, percent := fl.read()
	fl.live = s.Live
	if fl.percent > 0 {
		// The runtime's target may be one Percent raised: the limit takes
		// gc-percent's headroom.
		percent = fl.percent
		if p := Percent(s.Live, fl.percent); p != fl.gogc {
			fl.gogc = p
			debug.SetGCPercent(p)
		}
	}
	fl.limit = fl.recent.add(s, takeTransient(), percent)
	debug.SetMemoryLimit(min(fl.ceiling, fl.limit))
	arm(fl, gen)
}

// read samples the runtime after a collection. The overhead is what is in
// use beside the heap's objects and its free pages; read while the sweep
// of the cycle just ended is still under way, it counts some of the
// fragmentation as objects, so the limit errs low by that, which costs
// only an earlier collection.
func (f *follower) read() (Sample, int) {
	if f.samples == nil {
		f.samples = []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/total:bytes"},
			{Name: "/memory/classes/heap/released:bytes"},
			{Name: "/memory/classes/heap/free:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/gogc:percent"},
		}
	}
	metrics.Read(f.samples)
	var v [6]uint64
	for i, s := range f.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	var over uint64
	if used := v[1] - min(v[1], v[2]+v[3]); used > v[4] {
		over = used - v[4]
	}
	percent := -1 // GOGC=off reads as -1 converted: no target, no limit
	if v[5] <= math.MaxInt32 {
		percent = int(v[5])
	}
	return Sample{Live: v[0], Overhead: over}, percent
}
