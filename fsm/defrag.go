package fsm

import (
	"cmp"
	"slices"
	"unsafe"
)

// Active defragmentation: Redis's activedefrag, for the Go heap.
//
// A set's intset or listpack grows one allocator size class at a time, each
// step leaving its old blob as garbage among the blobs of other sets. When
// the writes stop, the live blobs are scattered over spans whose other slots
// are free; Go's collector never moves objects, so those spans stay in use.
// After the seed's 10M SADDs that is about a quarter of the heap (HeapInuse
// 236 MB for 171 MB of objects).
//
// The defragmenter copies blobs that have stopped changing into slabs: big
// blocks filled end to end, each blob with exactly its length as capacity.
// The old blobs become garbage and their spans empty out and return to the
// OS. A blob that changes again leaves the slab for the heap the usual way
// (its next growth allocates), leaving a hole; a slab whose live bytes fall
// under half of what it holds is evacuated into the open slab.
//
// Nothing is freed by hand: a snapshot that still reads an old blob, or a
// reply built from one, keeps it alive through the collector. The work is
// incremental (Defrag does a bounded step under the write lock) and skipped
// while a snapshot shares the keyspace (the cells would be rewritten under
// it). It changes where bytes live, never what the state machine holds, so
// replicas need not agree on it.

const (
	slabBytes    = 256 << 10
	maxSlabBlob  = 16 << 10 // bigger blobs have spans of their own
	evacuateLive = 2        // evacuate when live*evacuateLive < used
)

type slab struct {
	buf  []byte
	used int
	live int // bytes of cells found in it by the latest scan
	evac bool
}

func (s *slab) base() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s.buf))) }

func (s *slab) holds(p uintptr) bool { return p >= s.base() && p < s.base()+uintptr(len(s.buf)) }

// stableCycles is how many whole cycles a key must go unchanged before its
// blob moves: under a steady write load most keys change every few seconds,
// and packing a blob that is about to grow again only makes garbage.
const stableCycles = 3

// defragState is the keyspace's defragmenter; clear and restore start it over.
type defragState struct {
	slabs []*slab // sorted by base address
	open  *slab
	pos   int // next keyspace position of the current cycle
	// starts holds the keyspace index at the start of the latest cycles,
	// newest last; a blob is stable when its key's version is at most the
	// oldest of them.
	starts []uint64
}

// DefragStats tells what one Defrag step did.
type DefragStats struct {
	Moved       int64 // bytes copied into slabs
	CycleDone   bool  // a full pass over the keyspace just ended
	SlabBytes   int64 // bytes held in slabs
	Slabs       int
	SnapshotRan bool // skipped: a snapshot shares the keyspace
}

// Defrag does one bounded step of the defragmenter: it looks at up to
// budget keys under the write lock. Call it again (with a pause between
// cycles, see DefragStats.CycleDone) for as long as the node runs.
func (f *FSM) Defrag(budget int) DefragStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	ks := f.ks
	if ks.cowGen != 0 {
		return DefragStats{SnapshotRan: true}
	}
	return ks.defragStep(budget)
}

// defragStep continues the current cycle: one pass over the keyspace that
// moves stable heap blobs and the blobs of slabs marked for evacuation into
// the open slab, and counts every slab's live bytes, from which the end of
// the pass marks the slabs the next pass evacuates.
func (ks *keyspace) defragStep(budget int) DefragStats {
	d := &ks.defrag
	var st DefragStats
	if d.pos == 0 {
		d.starts = append(d.starts, ks.index)
		if len(d.starts) > stableCycles {
			d.starts = d.starts[1:]
		}
		for _, s := range d.slabs {
			s.live = 0
		}
	}
	stable := func(ver uint64) bool { return len(d.starts) == stableCycles && ver <= d.starts[0] }
	end := min(ks.Len(), d.pos+budget)
	for ; d.pos < end; d.pos++ {
		c, i := ks.cell(d.pos)
		b, isSet := ks.blobAt(c, i)
		if b == nil {
			continue
		}
		s := d.slabOf(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		if !((s == nil && stable(c.vers[i])) || (s != nil && s.evac)) {
			if s != nil {
				s.live += len(b)
			}
			continue
		}
		st.Moved += int64(len(b))
		dst := d.alloc(len(b))
		d.open.live += len(b)
		copy(dst, b)
		if isSet {
			c.vals[i].MoveBlob(dst)
		} else {
			putStringCell(&c.vals[i], dst)
		}
	}
	if d.pos >= ks.Len() {
		d.pos = 0
		// The slabs this pass evacuated hold no value any more (a key the
		// pass skipped, because a removal moved it behind the cursor, keeps
		// its slab alive as ordinary garbage until it changes).
		d.slabs = slices.DeleteFunc(d.slabs, func(s *slab) bool { return s.evac })
		for _, s := range d.slabs {
			s.evac = s != d.open && s.live*evacuateLive < s.used
		}
		st.CycleDone = true
	}
	for _, s := range d.slabs {
		st.SlabBytes += int64(s.used)
	}
	st.Slabs = len(d.slabs)
	return st
}

// blobAt returns the bytes a cell's value keeps in one allocation the
// defragmenter may move: an intset or listpack not shared with a snapshot,
// or a string; nil otherwise.
func (ks *keyspace) blobAt(c *chunk, i int) (b []byte, isSet bool) {
	switch k := c.kinds[i]; {
	case k == kindSet: // the shared bit clear
		b, isSet = c.vals[i].Blob(), true
	case k&kindMask == kindString && k&strInt == 0:
		b = stringCell(&c.vals[i])
	}
	if len(b) == 0 || len(b) > maxSlabBlob {
		return nil, false
	}
	return b, isSet
}

// slabOf returns the slab holding address p, or nil.
func (d *defragState) slabOf(p uintptr) *slab {
	i, found := d.search(p)
	if found {
		return d.slabs[i]
	}
	if i > 0 && d.slabs[i-1].holds(p) { // the last slab starting before p
		return d.slabs[i-1]
	}
	return nil
}

// search finds where a slab based at p is or would be in d.slabs.
func (d *defragState) search(p uintptr) (int, bool) {
	return slices.BinarySearchFunc(d.slabs, p, func(s *slab, p uintptr) int { return cmp.Compare(s.base(), p) })
}

// alloc returns n bytes of the open slab, opening a new one when full.
func (d *defragState) alloc(n int) []byte {
	if d.open == nil || len(d.open.buf)-d.open.used < n {
		d.open = &slab{buf: make([]byte, slabBytes)}
		i, _ := d.search(d.open.base())
		d.slabs = slices.Insert(d.slabs, i, d.open)
	}
	s := d.open
	b := s.buf[s.used : s.used+n : s.used+n]
	s.used += n
	return b
}
