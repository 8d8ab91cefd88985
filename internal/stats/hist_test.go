package stats

import (
	"testing"
	"time"
)

func TestBucketEdges(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<20; v++ {
		b := bucket(v)
		if b < prev {
			t.Fatalf("bucket(%d) = %d after %d: not monotonic", v, b, prev)
		}
		if v > Upper(b) {
			t.Fatalf("bucket(%d) = %d whose upper is %d", v, b, Upper(b))
		}
		if b > 0 && v <= Upper(b-1) {
			t.Fatalf("bucket(%d) = %d but bucket %d reaches %d", v, b, b-1, Upper(b-1))
		}
		prev = b
	}
	// Width: at most 1/8 of the value, as documented.
	for i := sub; i < NumBuckets-1; i++ {
		lo := Upper(i-1) + 1
		if w := Upper(i) - lo + 1; w*8 > lo {
			t.Fatalf("bucket %d [%d,%d] wider than 1/8", i, lo, Upper(i))
		}
	}
	if got := bucket(1 << 62); got != NumBuckets-1 {
		t.Fatalf("huge value in bucket %d", got)
	}
}

func TestPercentileAndCountBelow(t *testing.T) {
	var h Hist
	for i := 0; i < 990; i++ {
		h.Add(10 * time.Microsecond)
	}
	h.AddN(5*time.Millisecond, 9)
	h.Add(time.Second)
	s := h.Snapshot()
	if s.Count != 1000 || s.Sum != 990*10*time.Microsecond+9*5*time.Millisecond+time.Second {
		t.Fatalf("count %d sum %v", s.Count, s.Sum)
	}
	check := func(p float64, lo, hi time.Duration) {
		t.Helper()
		if got := s.Percentile(p); got < lo || got > hi {
			t.Errorf("p%v = %v, want in [%v, %v]", p, got, lo, hi)
		}
	}
	check(50, 10*time.Microsecond, 11250*time.Nanosecond)
	check(99, 10*time.Microsecond, 11250*time.Nanosecond)
	check(99.9, 5*time.Millisecond, 5625*time.Microsecond)
	check(100, time.Second, 1125*time.Millisecond)
	if got := s.CountBelow(14); got != 990 { // 16.384 µs
		t.Errorf("below 2^14 ns: %d", got)
	}
	if got := s.CountBelow(13); got != 0 { // 8.192 µs
		t.Errorf("below 2^13 ns: %d", got)
	}
	if got := s.CountBelow(29); got != 999 { // 537 ms
		t.Errorf("below 2^29 ns: %d", got)
	}
	var empty Snapshot
	if empty.Percentile(50) != 0 {
		t.Error("empty percentile")
	}
}

func BenchmarkAdd(b *testing.B) {
	var h Hist
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(1)
		for pb.Next() {
			h.Add(d)
			d = d*3 + 7
		}
	})
}
