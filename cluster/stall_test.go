package cluster

import (
	"testing"
	"time"
)

// TestStallWatch: a round is not trusted while a stall is under way and
// unnoticed, nor if it began before a noticed stall's end plus the gap.
func TestStallWatch(t *testing.T) {
	const gap = int64(100 * time.Millisecond)
	s := newStallWatch(time.Duration(gap))
	if !s.trusted(s.now()) {
		t.Fatal("a fresh watch does not trust a round")
	}
	// The process stops for 3 gaps: the ticker has not run since.
	s.last.Store(s.now() - 3*gap)
	start := s.now()
	if s.trusted(start) {
		t.Fatal("a round trusted while a stall is unnoticed")
	}
	s.tick() // the ticker runs after the resume and notices the stall
	if s.ended.Load() == 0 {
		t.Fatal("tick did not notice a pause of 3 gaps")
	}
	if s.trusted(start) {
		t.Fatal("a round that began just after the stall is trusted")
	}
	if !s.trusted(s.ended.Load() + gap + 1) {
		t.Fatal("a round that began a gap after the stall is not trusted")
	}
	// Ticks within the gap are no stall.
	s.ended.Store(0)
	s.last.Store(s.now() - gap/2)
	s.tick()
	if s.ended.Load() != 0 {
		t.Fatal("a pause of half a gap counted as a stall")
	}
}
