package stats

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Hist is a latency histogram with a fixed log-linear layout: values in
// nanoseconds, eight buckets per power of two (each at most 12.5% wide), up
// to 2^maxExp ns (about 18 minutes; longer values count in the last bucket).
// Add is one atomic add, so connections on every core can share one Hist;
// readers see each bucket atomically but not the whole histogram at one
// instant, which is what a monitoring read needs. The zero value is ready.
type Hist struct {
	b   [NumBuckets]atomic.Uint64
	sum atomic.Uint64 // nanoseconds
}

const (
	subBits = 3
	sub     = 1 << subBits
	maxExp  = 40
	// NumBuckets is the number of buckets of a Hist.
	NumBuckets = (maxExp-subBits+1)*sub + sub
)

// bucket returns the index of the bucket holding v.
func bucket(v uint64) int {
	if v < sub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1))
	if e > maxExp {
		return NumBuckets - 1
	}
	m := int(v>>(e-subBits)) & (sub - 1)
	return (e-subBits+1)*sub + m
}

// Upper returns the largest value bucket i holds.
func Upper(i int) uint64 {
	if i < sub {
		return uint64(i)
	}
	e := i/sub + subBits - 1
	m := uint64(i % sub)
	return (sub+m+1)<<(e-subBits) - 1
}

// Add records one value.
func (h *Hist) Add(d time.Duration) { h.AddN(d, 1) }

// AddN records n values of d (a pipelined run answered by one call).
func (h *Hist) AddN(d time.Duration, n uint64) {
	v := uint64(max(d, 0))
	h.b[bucket(v)].Add(n)
	h.sum.Add(v * n)
}

// Reset empties h (CONFIG RESETSTAT).
func (h *Hist) Reset() {
	for i := range h.b {
		h.b[i].Store(0)
	}
	h.sum.Store(0)
}

// Snapshot is a copy of a Hist's counts.
type Snapshot struct {
	Counts [NumBuckets]uint64
	Count  uint64
	Sum    time.Duration
}

// Snapshot copies h.
func (h *Hist) Snapshot() Snapshot {
	var s Snapshot
	h.SnapshotInto(&s)
	return s
}

// SnapshotInto copies h into s and returns s.
func (h *Hist) SnapshotInto(s *Snapshot) *Snapshot {
	s.Count = 0
	for i := range h.b {
		c := h.b[i].Load()
		s.Counts[i] = c
		s.Count += c
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// Merge adds o's counts to s.
func (s *Snapshot) Merge(o *Snapshot) {
	for i, c := range o.Counts {
		s.Counts[i] += c
	}
	s.Count += o.Count
	s.Sum += o.Sum
}

// Percentile returns the upper edge of the bucket holding the p-th
// percentile (0 < p <= 100), 0 for an empty histogram: like an HDR
// histogram's highest equivalent value, never below the true value.
func (s *Snapshot) Percentile(p float64) time.Duration {
	if s.Count == 0 {
		return 0
	}
	want := uint64(float64(s.Count)*p/100 + 0.5)
	want = min(max(want, 1), s.Count)
	var cum uint64
	for i, c := range s.Counts {
		cum += c
		if cum >= want {
			return time.Duration(Upper(i))
		}
	}
	return time.Duration(Upper(NumBuckets - 1))
}

// CountBelow returns how many values were below 2^exp ns: bucket edges at
// powers of two are exact, so this is a true cumulative count.
func (s *Snapshot) CountBelow(exp int) uint64 {
	if exp > maxExp {
		return s.Count
	}
	end := int(1) << exp // first bucket at or above 2^exp
	var cum uint64
	for i := 0; i < NumBuckets && uint64(Upper(i)) < uint64(end); i++ {
		cum += s.Counts[i]
	}
	return cum
}
