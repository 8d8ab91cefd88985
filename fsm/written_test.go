package fsm

import (
	"slices"
	"testing"
)

// TestOnWritten: every key an entry changes or deletes reaches the hook
// (expiry deletions and script writes included), a flush says so, a read or
// a write that changes nothing does not call it, and without a hook nothing
// is collected.
func TestOnWritten(t *testing.T) {
	f := New(Config{})
	var got []string
	var flushes int
	f.OnWritten(func(keys [][]byte, flushed bool) {
		if flushed {
			flushes++
		}
		for _, k := range keys {
			got = append(got, string(k))
		}
	})
	now := int64(1000)
	apply := func(args ...string) {
		t.Helper()
		applyCmd(t, f, now, args...)
	}
	apply("SADD", "s", "a")
	apply("SADD", "s", "a") // no change
	apply("SET", "k", "v")
	apply("DEL", "k", "nosuch")
	apply("RENAME", "s", "t")
	apply("EVAL", "redis.call('set', KEYS[1], 'x')", "1", "fromscript")
	if want := []string{"s", "k", "k", "t", "s", "fromscript"}; !sameSet(got, want) {
		t.Errorf("keys = %q, want %q (any order)", got, want)
	}
	apply("FLUSHALL")
	if flushes != 1 {
		t.Errorf("flushes = %d, want 1", flushes)
	}
	f.OnWritten(nil)
	got = nil
	apply("SET", "k", "v")
	if len(got) != 0 {
		t.Errorf("keys after OnWritten(nil) = %q", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
