package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

const mib = 1 << 20

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		recent  []Sample
		percent int
		want    int64
	}{
		{"one collection: the target plus the overhead", []Sample{{200 * mib, 10 * mib}}, 50, 310 * mib},
		{"under 128 MiB: minGrowth, not gc-percent", []Sample{{100 * mib, 10 * mib}}, 50, 174 * mib},
		// A snapshot's copies raised the last collection's live heap: the
		// target stays that of the smallest of the window.
		{"a jump is not a new target", []Sample{{200 * mib, 10 * mib}, {204 * mib, 8 * mib}, {230 * mib, 12 * mib}}, 50,
			200*mib + 100*mib + 12*mib},
		// A jump past the smallest live heap's target: the floor keeps a
		// quarter of the headroom over what is live now.
		{"the floor over a large jump", []Sample{{100 * mib, 0}, {160 * mib, 0}}, 40, 160*mib + 16*mib},
		{"gc-percent 100", []Sample{{64 * mib, 1 * mib}}, 100, 129 * mib},
		{"a small heap: minGrowth of room", []Sample{{8 * mib, 2 * mib}}, 50, 8*mib + 64*mib + 2*mib},
		{"the smallest of the window gets minGrowth", []Sample{{20 * mib, 0}, {30 * mib, 1 * mib}}, 50, 20*mib + 64*mib + 1*mib},
		{"no collection yet", nil, 50, math.MaxInt64},
		{"GOGC=off", []Sample{{64 * mib, 0}}, -1, math.MaxInt64},
	} {
		if got := Limit(c.recent, c.percent); got != c.want {
			t.Errorf("%s: Limit = %d MiB (%d), want %d MiB (%d)", c.name, got/mib, got, c.want/mib, c.want)
		}
	}
}

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live    uint64
		percent int
		want    int
	}{
		{0, 50, 50},            // no collection yet
		{256 * mib, 50, 50},    // gc-percent gives more than minGrowth
		{128 * mib, 50, 50},    // exactly minGrowth
		{96 * mib, 50, 67},     // 64/96, rounded up
		{32 * mib, 50, 200},    // a 30 MB dataset: 64 MiB of room, not 16
		{32 * mib, 300, 300},   // a target above the floor stands
		{1 << 10, 50, 1 << 20}, // a few KB: bounded
		{32 * mib, -1, -1},     // off stays off
	} {
		got := Percent(c.live, c.percent)
		if got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.percent, got, c.want)
		}
		if c.live < 1<<20 {
			continue // no collection yet, or bounded
		}
		if c.percent > 0 && c.live*uint64(got)/100 < minGrowth {
			t.Errorf("Percent(%d, %d) = %d leaves %d bytes of room, under minGrowth", c.live, c.percent, got, c.live*uint64(got)/100)
		}
	}
}

// TestSetPercentFollowing: while the limit follows, the runtime's target is
// gc-percent raised for a small live heap, gc-percent itself for a large
// one, and gc-percent again once it stops.
func TestSetPercentFollowing(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	saved, old := f, debug.SetGCPercent(100)
	t.Cleanup(func() {
		Stop()
		f = saved
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(math.MaxInt64)
	})
	f = newFollower()
	SetPercent(50)
	if got := RuntimePercent(); got != 50 {
		t.Fatalf("SetPercent(50), not following: target %d", got)
	}
	if !Follow() {
		t.Fatal("Follow did not start")
	}
	// A test binary's live heap is a few MB: raised well past 50.
	waitTarget(t, "raised for a small heap", func(p int) bool { return p > 1000 })
	const size = 256 * mib
	ballast = make([]byte, size)
	waitTarget(t, "gc-percent for a 256 MiB heap", func(p int) bool { return p == 50 })
	ballast = nil
	waitTarget(t, "raised again once the heap is small", func(p int) bool { return p > 1000 })
	SetPercent(60)
	if got := RuntimePercent(); got <= 1000 {
		t.Errorf("SetPercent(60) while following a small heap: target %d, want it raised", got)
	}
	Stop()
	if got := RuntimePercent(); got != 60 {
		t.Errorf("after Stop: target %d, want gc-percent 60", got)
	}
}

// waitTarget collects until the runtime's target satisfies ok.
func waitTarget(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		p := RuntimePercent()
		if ok(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %d: never %s", p, what)
		}
		time.Sleep(time.Millisecond) // let the finalizer goroutine run
	}
}

// waitLimit collects until the runtime's limit satisfies ok (the follower
// sets it from the finalizer goroutine, after the collection).
func waitLimit(t *testing.T, what string, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		l := debug.SetMemoryLimit(-1)
		if ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("limit %d MiB (%d): never %s", l/mib, l, what)
		}
		time.Sleep(time.Millisecond) // let the finalizer goroutine run
	}
}

// TestCeilingWithoutFollow: with the follower never started (gc-follow-live
// no), a ceiling (maxmemory's) is the runtime's limit, not a limit of 0.
func TestCeilingWithoutFollow(t *testing.T) {
	saved, prev := f, debug.SetMemoryLimit(-1)
	t.Cleanup(func() { f = saved; debug.SetMemoryLimit(prev) })
	f = newFollower()
	const ceiling = 1 << 40
	SetCeiling(ceiling)
	if got := debug.SetMemoryLimit(-1); got != ceiling {
		t.Fatalf("SetCeiling(%d) without Follow left the limit at %d", int64(ceiling), got)
	}
}

var ballast []byte

// TestFollowTracksLiveHeap: the limit rises with the live heap, to its
// gc-percent target, and falls once the heap shrank for a whole window;
// a ceiling caps it; Stop leaves the ceiling alone.
func TestFollowTracksLiveHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	old := debug.SetGCPercent(50)
	t.Cleanup(func() {
		Stop()
		SetCeiling(math.MaxInt64)
		debug.SetGCPercent(old)
	})
	if !Follow() || !Following() {
		t.Fatal("Follow did not start")
	}
	const size = 96 * mib
	ballast = make([]byte, size)
	for i := range ballast {
		ballast[i] = 1 // touched: counted by the OS as well
	}
	// With the ballast live the target is at least 1.5 × 96 MiB; the
	// overhead of a test binary is a few MiB, never tens.
	// (No limit yet, math.MaxInt64, is not the target: the follower may
	// not have run its first step.)
	l := waitLimit(t, "at 1.5 × the ballast", func(l int64) bool { return l >= size*3/2 && l < math.MaxInt64 })
	// No SetPercent (GOGC from the environment): the runtime's target is
	// left as it is.
	if got := RuntimePercent(); got != 50 {
		t.Errorf("following without SetPercent: target %d, want 50 untouched", got)
	}
	if l > size*3/2+64*mib {
		t.Errorf("limit with %d MiB live = %d MiB, want about %d MiB", size/mib, l/mib, size*3/2/mib)
	}

	// A ceiling below the target caps it; lifted, the target is back.
	SetCeiling(size * 5 / 4)
	if got := debug.SetMemoryLimit(-1); got != size*5/4 {
		t.Errorf("limit under a ceiling of %d MiB = %d MiB", size*5/4/mib, got/mib)
	}
	SetCeiling(math.MaxInt64)
	waitLimit(t, "back at 1.5 × the ballast", func(l int64) bool { return l >= size*3/2 && l < math.MaxInt64 })

	ballast = nil
	waitLimit(t, "down once the ballast is gone", func(l int64) bool { return l < size })

	SetCeiling(512 * mib)
	Stop()
	if Following() {
		t.Error("Following after Stop")
	}
	if got := debug.SetMemoryLimit(-1); got != 512*mib {
		t.Errorf("limit after Stop = %d, want the ceiling %d", got, 512*mib)
	}

	// Started again, it follows again (the stopped one's sentinel is
	// ignored: it belongs to an older generation).
	if !Follow() {
		t.Fatal("Follow after Stop did not start")
	}
	waitLimit(t, "following again, under the ceiling", func(l int64) bool { return l < 512*mib })
}

func TestGOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	if Follow() || Following() {
		t.Error("Follow started although GOMEMLIMIT is set")
	}
}

// TestTransientSamplesStayOutOfTheWindow: collections during a snapshot
// (copies live until its writer passes them) do not raise the limit however
// many of the window they span, but still count for the floor; a stretch
// longer than maxTransient collections is followed.
func TestTransientSamplesStayOutOfTheWindow(t *testing.T) {
	var r recentSamples
	for range window {
		r.add(Sample{100 * mib, 10 * mib}, false, 50)
	}
	base := int64(100*mib + minGrowth + 10*mib)
	// A snapshot's copies: 30 MiB more live for a whole window and more.
	for i := range window + 1 {
		if got := r.add(Sample{130 * mib, 10 * mib}, true, 50); got != base {
			t.Fatalf("transient collection %d: limit %d MiB, want %d MiB (the window's)", i+1, got/mib, base/mib)
		}
	}
	// The same collections not marked transient raise it once they fill the window.
	var plain recentSamples
	for range window {
		plain.add(Sample{100 * mib, 10 * mib}, false, 50)
	}
	var got int64
	for range window {
		got = plain.add(Sample{130 * mib, 10 * mib}, false, 50)
	}
	if want := int64(130*mib + 65*mib + 10*mib); got != want {
		t.Errorf("a window of 130 MiB collections: limit %d MiB, want %d MiB", got/mib, want/mib)
	}
	// A transient jump past the window's target still gets the floor.
	if got, want := r.add(Sample{200 * mib, 10 * mib}, true, 50), int64(200*mib+25*mib+10*mib); got != want {
		t.Errorf("transient jump to 200 MiB: limit %d MiB, want the floor %d MiB", got/mib, want/mib)
	}
	// Beyond maxTransient in a row, a transient sample enters the window.
	var long recentSamples
	long.add(Sample{100 * mib, 0}, false, 50)
	for range maxTransient {
		long.add(Sample{130 * mib, 0}, true, 50)
	}
	if len(long.s) != 1 {
		t.Fatalf("after %d transient collections the window holds %d samples, want 1", maxTransient, len(long.s))
	}
	long.add(Sample{130 * mib, 0}, true, 50)
	if len(long.s) != 2 || long.s[1].Live != 130*mib {
		t.Errorf("collection %d of a transient stretch: window %v, want it entered", maxTransient+1, long.s)
	}
	// An empty window takes the first sample, transient or not.
	var first recentSamples
	if got, want := first.add(Sample{100 * mib, 0}, true, 50), int64(100*mib+minGrowth); got != want || len(first.s) != 1 {
		t.Errorf("first sample, transient: limit %d MiB, window %d samples; want %d MiB, 1", got/mib, len(first.s), want/mib)
	}
}

// TestTransient: a stretch is transient from Transient until the first
// collection after its end (that collection's mark may have begun before);
// ending twice ends once.
func TestTransient(t *testing.T) {
	t.Cleanup(func() { takeTransient() })
	takeTransient()
	if InTransient() || takeTransient() {
		t.Fatal("transient before any stretch")
	}
	end := Transient()
	end2 := Transient()
	if !InTransient() || !takeTransient() {
		t.Fatal("not transient during a stretch")
	}
	end()
	end()
	if !InTransient() {
		t.Fatal("one of two stretches ended (twice): no longer transient")
	}
	end2()
	if InTransient() {
		t.Error("transient after both stretches ended")
	}
	if !takeTransient() {
		t.Error("the first collection after a stretch ended is not transient")
	}
	if takeTransient() {
		t.Error("the second collection after a stretch ended is transient")
	}
}
