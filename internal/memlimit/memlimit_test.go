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
		{"one collection: the target plus the overhead", []Sample{{100 * mib, 10 * mib}}, 50, 160 * mib},
		// A snapshot's copies raised the last collection's live heap: the
		// target stays that of the smallest of the window.
		{"a jump is not a new target", []Sample{{100 * mib, 10 * mib}, {104 * mib, 8 * mib}, {130 * mib, 12 * mib}}, 50,
			100*mib + 50*mib + 12*mib},
		// A jump past the smallest live heap's target: the floor keeps a
		// quarter of the headroom over what is live now.
		{"the floor over a large jump", []Sample{{100 * mib, 0}, {160 * mib, 0}}, 40, 160*mib + 16*mib},
		{"gc-percent 100", []Sample{{64 * mib, 1 * mib}}, 100, 129 * mib},
		{"a small heap: the lowest limit", []Sample{{8 * mib, 2 * mib}}, 50, 64 * mib},
		{"no collection yet", nil, 50, math.MaxInt64},
		{"GOGC=off", []Sample{{64 * mib, 0}}, -1, math.MaxInt64},
	} {
		if got := Limit(c.recent, c.percent); got != c.want {
			t.Errorf("%s: Limit = %d MiB (%d), want %d MiB (%d)", c.name, got/mib, got, c.want/mib, c.want)
		}
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
	l := waitLimit(t, "at 1.5 × the ballast", func(l int64) bool { return l >= size*3/2 })
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
