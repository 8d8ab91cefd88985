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
	// stepMoveBytes bounds what one Defrag step copies (it stops after the
	// blob that reaches it). Once writes stop, every key turns stable at
	// once: unbounded, the first cycle copied the whole dataset (150 MB for
	// the seed's) within a second, and what was copied while a collection
	// was marking counted live twice, so that the collector's next goal and
	// RSS rose by more than the dataset itself (RSS 179 → 375 MB after the
	// load). At this bound a step of the node's loop (cluster/defrag.go)
	// copies at most about 13 MB a second.
	stepMoveBytes = 256 << 10
	slabBytes     = 256 << 10
	maxSlabBlob   = 16 << 10 // bigger blobs have spans of their own
	evacuateLive  = 2        // evacuate when live*evacuateLive < used
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

// floodShare: a pass that finds more than 1/floodShare of the keys it looks
// at changed within about a cycle marks a write flood, and the next pass
// packs no heap blob (it still evacuates sparse slabs). Under writes spread
// over every key, when a key was last written says nothing about when it is
// written next: during the seed's 10M SADDs a key packed after three quiet
// cycles grew again soon after, leaving a hole in its slab, and the packing
// copied 0.27-0.71 GB (two to five times the final dataset), garbage for
// the collector and holes the live heap carried until their slab was
// evacuated. Once the flood stops, the first pass that sees it packs again.
const floodShare = 4

// defragState is the keyspace's defragmenter; clear and restore start it over.
type defragState struct {
	slabs []*slab // sorted by base address
	open  *slab
	pos   int // next keyspace position of the current cycle
	// starts holds the keyspace index at the start of the latest cycles,
	// newest last; a blob is stable when its key's version is at most the
	// oldest of them.
	starts []uint64
	// seen and recent count this pass's blobs and those whose key changed
	// since the previous pass began; flood is the previous pass's verdict.
	seen, recent int
	flood        bool
	// cands are the stable heap blobs the pass found, packed after it in
	// address order (see drain) while draining.
	cands    []cand
	draining bool
}

// maxCands bounds the candidates one pass collects (16 MiB of them): a
// bigger keyspace is packed over several passes.
const maxCands = 1 << 20

// cand is a heap blob to pack: its address when found, and its key's
// position.
type cand struct {
	addr uintptr
	pos  int
}

// DefragStats tells what one Defrag step did.
type DefragStats struct {
	Moved       int64 // bytes copied into slabs
	CycleDone   bool  // a full pass over the keyspace just ended
	SlabBytes   int64 // bytes held in slabs
	Slabs       int
	SnapshotRan bool // skipped: a snapshot shares the keyspace
	Flood       bool // with CycleDone: the next pass packs no heap blob (floodShare)
}

// Defrag does one bounded step of the defragmenter: it looks at up to
// budget keys under the write lock, and stops early once it has copied
// stepMoveBytes. Call it again (with a pause between
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
// moves the blobs of slabs marked for evacuation into the open slab, finds
// the stable heap blobs, and counts every slab's live bytes, from which the
// end of the pass marks the slabs the next pass evacuates; then the packing
// of the stable heap blobs it found (drain).
func (ks *keyspace) defragStep(budget int) DefragStats {
	d := &ks.defrag
	var st DefragStats
	if d.draining {
		ks.drain(budget, &st)
		if len(d.cands) == 0 {
			d.draining = false
			st.CycleDone, st.Flood = true, d.flood
		}
		d.stats(&st)
		return st
	}
	if d.pos == 0 {
		d.starts = append(d.starts, ks.index)
		if len(d.starts) > stableCycles {
			d.starts = d.starts[1:]
		}
		for _, s := range d.slabs {
			s.live = 0
		}
	}
	end := min(ks.Len(), d.pos+budget)
	for ; d.pos < end && st.Moved < stepMoveBytes; d.pos++ {
		c, i := ks.cell(d.pos)
		b, isSet := ks.blobAt(c, i)
		if b == nil {
			continue
		}
		d.seen++
		if n := len(d.starts); n >= 2 && c.vers[i] > d.starts[n-2] {
			d.recent++
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		s := d.slabOf(addr)
		if s == nil && !d.flood && d.stable(c.vers[i]) {
			if len(d.cands) < maxCands {
				d.cands = append(d.cands, cand{addr, d.pos})
			}
			continue
		}
		if s == nil || !s.evac {
			if s != nil {
				s.live += len(b)
			}
			continue
		}
		st.Moved += int64(len(b))
		d.move(c, i, b, isSet)
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
		d.flood = d.recent*floodShare > d.seen
		d.seen, d.recent = 0, 0
		if len(d.cands) == 0 {
			st.CycleDone, st.Flood = true, d.flood
		} else {
			slices.SortFunc(d.cands, func(a, b cand) int { return cmp.Compare(a.addr, b.addr) })
			d.draining = true
		}
	}
	d.stats(&st)
	return st
}

// drain packs the pass's stable heap blobs in the order of their addresses:
// the blobs that share the heap's spans leave together, so each span the
// packing reaches empties at once and a collection gives its pages back to
// the allocator for the next slabs. Packed in key order, a span of a dozen
// blobs empties only when its last blob moves, near the end, and the slabs
// needed new pages for the whole dataset: when the seed's writes stopped,
// RSS rose from about 190 to about 390 MB while every key was packed. A
// blob whose key changed, moved or went since the pass is left alone.
func (ks *keyspace) drain(budget int, st *DefragStats) {
	d := &ks.defrag
	n := 0
	for ; n < len(d.cands) && n < budget && st.Moved < stepMoveBytes; n++ {
		cd := d.cands[n]
		if cd.pos >= ks.Len() {
			continue
		}
		c, i := ks.cell(cd.pos)
		b, isSet := ks.blobAt(c, i)
		if b == nil || uintptr(unsafe.Pointer(unsafe.SliceData(b))) != cd.addr || !d.stable(c.vers[i]) {
			continue
		}
		st.Moved += int64(len(b))
		d.move(c, i, b, isSet)
	}
	d.cands = d.cands[n:]
	if len(d.cands) == 0 {
		d.cands = nil
	}
}

// move copies blob b of cell i of c into the open slab.
func (d *defragState) move(c *chunk, i int, b []byte, isSet bool) {
	dst := d.alloc(len(b))
	d.open.live += len(b)
	copy(dst, b)
	if isSet {
		c.vals[i].MoveBlob(dst)
	} else {
		putStringCell(&c.vals[i], dst)
	}
}

// stats fills in the slab figures of st.
func (d *defragState) stats(st *DefragStats) {
	for _, s := range d.slabs {
		st.SlabBytes += int64(s.used)
	}
	st.Slabs = len(d.slabs)
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

// stable says whether a blob last changed at version ver has stayed put
// for the last stableCycles passes (the oldest pass's start is past it).
func (d *defragState) stable(ver uint64) bool {
	return len(d.starts) == stableCycles && ver <= d.starts[0]
}
