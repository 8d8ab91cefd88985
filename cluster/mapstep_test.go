package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMapStepRetriesAConflict: two move drivers on different processes
// (as a former metadata leader's driver and the new one's) each find their
// compare-and-set beaten by the other's step, deterministically: A's plan
// is held between its read and its compare-and-set until B planned, and
// B's flip likewise until A's plan landed. Each reads the map again and
// makes its own change on top of the one that won (mapStep): both moves
// complete, and the map's epoch rose by exactly their six steps (plan,
// flip, stable each), so no step was lost nor landed twice.
func TestMapStepRetriesAConflict(t *testing.T) {
	hosts := servedHostsWith(t, fourShards, 3, patientTimers)
	warmUp(t, hosts)
	ctx := context.Background()
	a, b := hosts[0], hosts[1]
	const aFirst, aLast, aTo = 1000, 1031, 1
	const bFirst, bLast, bTo = 9000, 9031, 3
	before, err := a.readMetaSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	tried := map[*Host][]string{} // each host's steps, one per compare-and-set tried
	try := func(h *Host, step string) int {
		mu.Lock()
		defer mu.Unlock()
		tried[h] = append(tried[h], step)
		return len(tried[h])
	}
	hold := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(2 * time.Minute):
			t.Errorf("%s never came", what)
		}
	}
	bPlanned, aPlanned := make(chan struct{}), make(chan struct{})
	bReply := make(chan string, 1)
	fa := func(step string) {
		switch try(a, step) {
		case 1: // A's plan, from a map without B's move
			go func() { bReply <- string(b.driveMove(ctx, bFirst, bLast, bTo)) }()
			hold(bPlanned, "B's plan")
		case 3: // past A's plan, which landed on its second try
			close(aPlanned)
		}
	}
	fb := func(step string) {
		if try(b, step) == 2 { // B's flip, from a map without A's move
			close(bPlanned)
			hold(aPlanned, "A's plan")
		}
	}
	a.beforeMapCAS.Store(&fa)
	b.beforeMapCAS.Store(&fb)

	if r := string(a.driveMove(ctx, aFirst, aLast, aTo)); r != "+OK\r\n" {
		t.Errorf("A's MOVESLOTS %d %d %d = %q", aFirst, aLast, aTo, r)
	}
	if r := <-bReply; r != "+OK\r\n" {
		t.Errorf("B's MOVESLOTS %d %d %d = %q", bFirst, bLast, bTo, r)
	}
	a.beforeMapCAS.Store(nil)
	b.beforeMapCAS.Store(nil)

	mu.Lock()
	ta, tb := tried[a], tried[b]
	mu.Unlock()
	if len(ta) < 3 || !slices.Equal(ta[:3], []string{"plan", "plan", "flip"}) {
		t.Errorf("A tried %v, want its plan twice (beaten by B's, then landed), then its flip", ta)
	}
	if len(tb) < 3 || !slices.Equal(tb[:3], []string{"plan", "flip", "flip"}) {
		t.Errorf("B tried %v, want its plan, then its flip twice (beaten by A's plan, then landed)", tb)
	}
	after, err := a.readMetaSettled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch+6 {
		t.Errorf("the map's epoch went from %d to %d, want +6 (each move's plan, flip and stable once)", before.Epoch, after.Epoch)
	}
	if len(after.Moves) != 0 {
		t.Errorf("moves left in the map: %v", after.Moves)
	}
	for _, mv := range []struct {
		first, last int
		from, to    uint32
	}{{aFirst, aLast, 0, aTo}, {bFirst, bLast, 2, bTo}} {
		if after.ShardOf(mv.first) != mv.to || after.ShardOf(mv.last) != mv.to || after.ShardOf(mv.first-1) != mv.from || after.ShardOf(mv.last+1) != mv.from {
			t.Errorf("slots %d-%d: owned by %d..%d (around them %d, %d), want %d (around them %d)", mv.first, mv.last,
				after.ShardOf(mv.first), after.ShardOf(mv.last), after.ShardOf(mv.first-1), after.ShardOf(mv.last+1), mv.to, mv.from)
		}
	}
}
