package fsm

import (
	"fmt"
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
