package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"unsafe"
)

// defragCycle runs Defrag steps until a cycle ends and returns the bytes it
// moved.
func defragCycle(t *testing.T, f *FSM) DefragStats {
	t.Helper()
	var moved int64
	for range 1000 {
		st := f.Defrag(64)
		moved += st.Moved
		if st.CycleDone {
			st.Moved = moved
			return st
		}
	}
	t.Fatal("defrag cycle did not end in 1000 steps")
	return DefragStats{}
}

// settle runs cycles until every key that stays still is in a slab.
func settle(t *testing.T, f *FSM) DefragStats {
	t.Helper()
	var st DefragStats
	for range stableCycles {
		st = defragCycle(t, f)
	}
	return st
}

func inSlab(f *FSM, key string) bool {
	ks := f.ks
	pos := ks.find([]byte(key))
	c, i := ks.cell(pos)
	b, _ := ks.blobAt(c, i)
	return b != nil && ks.defrag.slabOf(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) != nil
}

func TestDefragMovesStableBlobsAndKeepsContent(t *testing.T) {
	f := newTestFSM(t)
	for k := range 300 {
		for m := range 40 {
			// intsets, listpacks, a few hashtables, and strings.
			switch {
			case k%3 == 0:
				applyCmd(t, f, 1, "sadd", fmt.Sprint("i", k), fmt.Sprint(m))
			case k%50 == 1:
				applyCmd(t, f, 1, "sadd", fmt.Sprint("h", k), fmt.Sprintf("%0100d", m))
			default:
				applyCmd(t, f, 1, "sadd", fmt.Sprint("l", k), fmt.Sprint("m", m))
			}
		}
		applyCmd(t, f, 1, "set", fmt.Sprint("s", k), fmt.Sprint("value-", k))
	}
	before, digest := dump(f), doCmd(t, f, 1, "debug", "digest")

	// The first cycles only learn which keys stay still; then they move.
	for c := 1; c < stableCycles; c++ {
		if st := defragCycle(t, f); st.Moved != 0 {
			t.Fatalf("cycle %d moved %d bytes; nothing is known stable yet", c, st.Moved)
		}
	}
	st := defragCycle(t, f)
	if st.Moved == 0 || st.Slabs == 0 {
		t.Fatalf("cycle %d: %+v, want blobs moved into slabs", stableCycles, st)
	}
	if got := dump(f); got != before {
		t.Fatalf("keyspace changed by defrag:\n%s\nwant\n%s", got, before)
	}
	for _, k := range []string{"i0", "l2", "s5"} {
		if !inSlab(f, k) {
			t.Errorf("%s not in a slab after two cycles", k)
		}
	}
	if inSlab(f, "h1") {
		t.Error("a hashtable set counted as a slab blob")
	}

	// Changing moved values never touches their neighbours in the slab.
	for k := 0; k < 300; k += 2 {
		if k%3 == 0 {
			applyCmd(t, f, 1, "srem", fmt.Sprint("i", k), "7")
		} else if k%50 != 1 {
			applyCmd(t, f, 1, "sadd", fmt.Sprint("l", k), "new")
		}
		applyCmd(t, f, 1, "append", fmt.Sprint("s", k), "+")
	}
	for k := 0; k < 300; k += 2 {
		if k%3 == 0 {
			applyCmd(t, f, 1, "sadd", fmt.Sprint("i", k), "7")
		} else if k%50 != 1 {
			applyCmd(t, f, 1, "srem", fmt.Sprint("l", k), "new")
		}
		applyCmd(t, f, 1, "set", fmt.Sprint("s", k), fmt.Sprint("value-", k))
	}
	if got := doCmd(t, f, 1, "debug", "digest"); got != digest {
		t.Fatalf("digest after changing and undoing = %s, want %s", got, digest)
	}
}

func TestDefragEvacuatesSparseSlabs(t *testing.T) {
	f := newTestFSM(t)
	for k := range 2000 {
		for m := range 50 {
			applyCmd(t, f, 1, "sadd", fmt.Sprint("k", k), fmt.Sprint("m", m))
		}
	}
	first := settle(t, f)
	if first.Slabs == 0 {
		t.Fatalf("no slabs: %+v", first)
	}
	// Three keys in four change: their blobs leave the slabs for the heap.
	for k := range 2000 {
		if k%4 != 0 {
			applyCmd(t, f, 1, "sadd", fmt.Sprint("k", k), "x")
		}
	}
	digest := doCmd(t, f, 1, "debug", "digest")
	defragCycle(t, f)  // finds the slabs sparse
	defragCycle(t, f)  // evacuates their last quarter
	st := settle(t, f) // packs the changed keys once they are stable

	if got := doCmd(t, f, 1, "debug", "digest"); got != digest {
		t.Fatalf("digest changed by evacuation: %s, want %s", got, digest)
	}
	// Everything is stable again and packed: the live bytes, not the history.
	if st.SlabBytes > first.SlabBytes*11/10+slabBytes {
		t.Fatalf("slab bytes %d after evacuation, want about %d", st.SlabBytes, first.SlabBytes)
	}
}

func TestDefragWaitsForSnapshots(t *testing.T) {
	f := newTestFSM(t)
	for m := range 20 {
		applyCmd(t, f, 1, "sadd", "k", fmt.Sprint("m", m))
	}
	for range stableCycles - 1 {
		defragCycle(t, f)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Defrag(64); !st.SnapshotRan || st.Moved != 0 {
		t.Fatalf("Defrag during a snapshot: %+v", st)
	}
	snap.Release()
	if st := defragCycle(t, f); st.Moved == 0 {
		t.Fatalf("after the snapshot: %+v, want the set moved", st)
	}
}

// TestDefragStepCopiesBoundedBytes: when a whole keyspace turns stable at
// once, one step, whatever its key budget, copies at most stepMoveBytes and
// one more blob; the steps that follow pick up where it stopped, and the
// cycle still packs every key.
func TestDefragStepCopiesBoundedBytes(t *testing.T) {
	f := newTestFSM(t)
	const keys = 3000 // about 390 bytes of listpack each: 1.1 MB, 4-5 steps' worth
	for k := range keys {
		args := []string{"sadd", fmt.Sprint("k", k)}
		for m := range 40 {
			args = append(args, fmt.Sprintf("member-%03d", m))
		}
		applyCmd(t, f, 1, args...)
	}
	digest := doCmd(t, f, 1, "debug", "digest")
	// The first cycles only watch the keys stay still; the one that finds
	// them stable moves them all.
	var steps int
	var total int64
	for cycle := 0; total == 0; cycle++ {
		if cycle > stableCycles {
			t.Fatalf("nothing moved in %d cycles", cycle)
		}
		steps = 0
		for {
			st := f.Defrag(1 << 20)
			steps++
			if st.Moved > stepMoveBytes+maxSlabBlob {
				t.Fatalf("step %d moved %d bytes, want at most %d", steps, st.Moved, stepMoveBytes+maxSlabBlob)
			}
			total += st.Moved
			if st.CycleDone {
				break
			}
		}
	}
	if steps < 2 {
		t.Errorf("the cycle that moved %d bytes took %d step, want more than one", total, steps)
	}
	for k := range keys {
		if key := fmt.Sprint("k", k); !inSlab(f, key) {
			t.Fatalf("%s is not in a slab after the cycle", key)
		}
	}
	if got := doCmd(t, f, 1, "debug", "digest"); got != digest {
		t.Fatalf("digest %s after defragmenting, want %s", got, digest)
	}
}

// TestDefragPausesPackingDuringWriteFlood: while more than a quarter of the
// keys change every cycle, keys that stay quiet are not packed (a flood
// spread over all keys rewrites them soon after); a small hot set does not
// stop the packing of the others; and once the writes stop, everything is
// packed.
func TestDefragPausesPackingDuringWriteFlood(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hotEvery  int // every hotEvery-th key changes before each cycle
		coldMoves bool
	}{
		{"half the keys change each cycle", 2, false},
		{"a twentieth change each cycle", 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFSM(t)
			const keys = 1000
			for k := range keys {
				for m := range 10 {
					applyCmd(t, f, 1, "sadd", fmt.Sprint("k", k), fmt.Sprint("m", m))
				}
			}
			round := 0
			for range stableCycles + 3 {
				round++
				for k := 0; k < keys; k += tc.hotEvery {
					applyCmd(t, f, 1, "sadd", fmt.Sprint("k", k), fmt.Sprint("x", round))
				}
				defragCycle(t, f)
			}
			cold := 0
			for k := range keys {
				if k%tc.hotEvery != 0 && inSlab(f, fmt.Sprint("k", k)) {
					cold++
				}
			}
			if got := cold > 0; got != tc.coldMoves {
				t.Errorf("quiet keys packed during the writes: %d; want some: %v", cold, tc.coldMoves)
			}
			digest := doCmd(t, f, 1, "debug", "digest")
			for range stableCycles + 1 {
				defragCycle(t, f)
			}
			for k := range keys {
				if key := fmt.Sprint("k", k); !inSlab(f, key) {
					t.Fatalf("%s not in a slab once the writes stopped", key)
				}
			}
			if got := doCmd(t, f, 1, "debug", "digest"); got != digest {
				t.Fatalf("digest %s after packing, want %s", got, digest)
			}
		})
	}
}

// TestDefragPacksInAddressOrder: the blobs a pass finds stable are packed in
// the order of their heap addresses, so that the heap's spans empty one
// after another: within a slab, blobs sit in the order of their old
// addresses, and the old address ranges of two slabs do not overlap. A key
// changed between the pass and the packing is left where it is.
func TestDefragPacksInAddressOrder(t *testing.T) {
	f := newTestFSM(t)
	const keys = 4000 // about 1.2 MB of listpacks: several slabs
	for m := range 30 {
		for k := range keys {
			// Interleaved growth scatters each key's blob over the heap.
			applyCmd(t, f, 1, "sadd", fmt.Sprint("k", k), fmt.Sprintf("member-%02d", m))
		}
	}
	addrOf := func(key string) uintptr {
		c, i := f.ks.cell(f.ks.find([]byte(key)))
		b, _ := f.ks.blobAt(c, i)
		return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	}
	// Step until the pass that finds every key stable has ended.
	for steps := 0; !f.ks.defrag.draining; steps++ {
		if steps == 1_000_000 {
			t.Fatal("no pass found every key stable and began packing")
		}
		f.Defrag(64)
	}
	old := make(map[string]uintptr, keys)
	for k := range keys {
		old[fmt.Sprint("k", k)] = addrOf(fmt.Sprint("k", k))
	}
	applyCmd(t, f, 1, "sadd", "k7", "changed") // after the pass: not packed this cycle
	for steps := 0; !f.Defrag(64).CycleDone; steps++ {
		if steps == 1_000_000 {
			t.Fatal("the cycle never ended")
		}
	}
	if inSlab(f, "k7") {
		t.Errorf("k7, changed after the pass found it stable, was packed")
	}
	type span struct{ lo, hi uintptr }
	bySlab := map[*slab][]string{}
	for k := range keys {
		key := fmt.Sprint("k", k)
		if key == "k7" {
			continue
		}
		s := f.ks.defrag.slabOf(addrOf(key))
		if s == nil {
			t.Fatalf("%s not packed", key)
		}
		bySlab[s] = append(bySlab[s], key)
	}
	if len(bySlab) < 3 {
		t.Fatalf("%d slabs; the test needs several", len(bySlab))
	}
	var ranges []span
	for _, ks := range bySlab {
		slices.SortFunc(ks, func(a, b string) int { return cmp.Compare(addrOf(a), addrOf(b)) })
		for i := 1; i < len(ks); i++ {
			if old[ks[i]] < old[ks[i-1]] {
				t.Fatalf("in a slab %s follows %s, but its old address %#x is below %#x", ks[i], ks[i-1], old[ks[i]], old[ks[i-1]])
			}
		}
		ranges = append(ranges, span{old[ks[0]], old[ks[len(ks)-1]]})
	}
	slices.SortFunc(ranges, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for i := 1; i < len(ranges); i++ {
		if ranges[i].lo <= ranges[i-1].hi {
			t.Errorf("two slabs hold blobs from overlapping old address ranges: %#x-%#x and %#x-%#x",
				ranges[i-1].lo, ranges[i-1].hi, ranges[i].lo, ranges[i].hi)
		}
	}
}
