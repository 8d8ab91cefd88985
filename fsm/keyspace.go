package fsm

import (
	"slices"
	"sync/atomic"

	"raftset/internal/setenc"
	"raftset/internal/setenc/hashtable"
)

// A keyspace is one database: the key set and, in parallel dense arrays,
// each key's value, kind, deadline and version. Position i of every array
// belongs to keys.At(i). hashtable.Table keeps its dense order deterministic
// (Add appends, a removal moves the last key into the hole), and remove
// mirrors that move in the arrays, so their order is the Table's: replicated
// state, restored from a snapshot by adding the keys in file order. It also
// gives SCAN its stable cursor (see cmdScan).
//
// The arrays are cut into chunks of chunkLen positions, each chunk holding
// all four arrays for its positions. A snapshot shares the chunks: it copies
// only the chunk pointers (see capture), and the live keyspace copies a
// chunk before it first writes to it (cellW). A set inside a copied chunk
// still shares its contents with the snapshot, so the copy marks it with
// sharedBit, and setForWrite copies the set itself before changing it in
// place. Strings are never changed in place.
//
// Costs per key: the key bytes in the Table's arena plus 4 bytes of dense
// offset and about 8 of index and tags, then 16 (value) + 1 (kind) + 8 (deadline)
// + 8 (version) in the chunks, and the value's own bytes: the string, or the
// set's intset or listpack blob (or hashtable), with no wrapper object.
type keyspace struct {
	keys   *hashtable.Table
	chunks []*chunk
	n      int

	// gen counts captures; cowGen is the generation of the newest live
	// snapshot (0 when none): a chunk whose gen is below it may be read by a
	// snapshot and is copied before any write. live lists the generations
	// of the live snapshots.
	gen, cowGen uint64
	live        []uint64

	// vol indexes the keys that have a deadline, so ExpiredKeys samples them
	// without walking the whole keyspace. It is derived state (rebuilt on
	// restore) and decides no reply: the order of its keys does not matter.
	vol       *hashtable.Table
	volCursor atomic.Uint64

	defrag defragState // where blobs live (defrag.go); not replicated state
	acct   accounting  // memory accounting and access statistics (access.go); not replicated state
	evict  EvictConfig // maxmemory and its policy (evict.go): replicated state

	now     int64 // the state machine's clock: max of every entry's NowMs
	lim     setenc.Limits
	lastDel uint64 // index of the last entry that deleted a key or flushed
	index   uint64 // index and term of the last applied log entry
	term    uint64

	// scripts is the script cache, sha → body (cmd_script.go): replicated
	// state, carried by snapshots in AuxScripts. FLUSHALL keeps it, as in
	// Redis.
	scripts map[string][]byte
}

const (
	chunkShift = 12
	chunkLen   = 1 << chunkShift
	chunkMask  = chunkLen - 1
)

// chunk holds chunkLen positions of the dense arrays (about 132 KiB).
type chunk struct {
	vals  [chunkLen]setenc.Set // a set, or a string as a strCell (see cells.go)
	exps  [chunkLen]int64      // absolute Unix ms, or noExpiry
	vers  [chunkLen]uint64     // index of the key's last change: its WATCH stamp
	kinds [chunkLen]uint8
	gen   uint64 // the keyspace's gen when this copy was made
}

const noExpiry int64 = -1

// Kinds of value. sharedBit marks a set that a live snapshot may still read.
const (
	kindString uint8 = 1
	kindSet    uint8 = 2
	kindMask   uint8 = 0x0f
	sharedBit  uint8 = 0x80
)

func newKeyspace(lim setenc.Limits) *keyspace {
	return &keyspace{keys: hashtable.New(0), vol: hashtable.New(0), lim: lim, evict: DefaultEvictConfig()}
}

// Len returns the number of keys, logically expired ones included.
func (ks *keyspace) Len() int { return ks.n }

func (ks *keyspace) find(key []byte) int { return ks.keys.Find(key) }

// cell returns the chunk and index of pos for reading.
func (ks *keyspace) cell(pos int) (*chunk, int) {
	return ks.chunks[pos>>chunkShift], pos & chunkMask
}

// cellW returns the chunk and index of pos for writing: a chunk a live
// snapshot may read is replaced by a copy first, whose sets are marked
// shared (their contents still are).
func (ks *keyspace) cellW(pos int) (*chunk, int) {
	ci := pos >> chunkShift
	c := ks.chunks[ci]
	if c.gen < ks.cowGen {
		nc := new(chunk)
		*nc = *c
		nc.gen = ks.gen
		for i, k := range nc.kinds {
			if k == kindSet {
				nc.kinds[i] = k | sharedBit
			}
		}
		ks.chunks[ci] = nc
		c = nc
	}
	ks.acct.mark(pos)
	return c, pos & chunkMask
}

func (ks *keyspace) kind(pos int) uint8 {
	c, i := ks.cell(pos)
	return c.kinds[i] & kindMask
}

func (ks *keyspace) isSet(pos int) bool { return ks.kind(pos) == kindSet }

func (ks *keyspace) exp(pos int) int64 {
	c, i := ks.cell(pos)
	return c.exps[i]
}

func (ks *keyspace) ver(pos int) uint64 {
	c, i := ks.cell(pos)
	return c.vers[i]
}

func (ks *keyspace) setVer(pos int, v uint64) {
	c, i := ks.cellW(pos)
	c.vers[i] = v
}

func (ks *keyspace) expiredAt(pos int, now int64) bool {
	e := ks.exp(pos)
	return e != noExpiry && e <= now
}

// shared reports whether the value at pos may be read by a live snapshot.
func (ks *keyspace) shared(pos int) bool {
	c, i := ks.cell(pos)
	return c.gen < ks.cowGen || c.kinds[i]&sharedBit != 0
}

// add inserts a key that is not present, with a zero value of the given
// kind, and returns its position. The caller stores the value and version.
func (ks *keyspace) add(key []byte, kind uint8, exp int64) int {
	if !ks.keys.Add(key) {
		panic("fsm: add of a present key")
	}
	pos := ks.n
	ks.acct.add(pos, initAccess(ks.now, ks.evict.Policy.lfu()))
	if pos>>chunkShift == len(ks.chunks) {
		ks.chunks = append(ks.chunks, &chunk{gen: ks.gen})
	}
	ks.n++
	c, i := ks.cellW(pos)
	c.vals[i], c.kinds[i], c.exps[i], c.vers[i] = setenc.Set{}, kind, exp, 0
	if exp != noExpiry {
		ks.vol.Add(key)
	}
	return pos
}

// addSet inserts key holding s (which the keyspace now owns).
func (ks *keyspace) addSet(key []byte, s *setenc.Set, exp int64) int {
	pos := ks.add(key, kindSet, exp)
	c, i := ks.cell(pos)
	c.vals[i] = *s
	return pos
}

// addString inserts key holding b (which the keyspace now owns).
func (ks *keyspace) addString(key, b []byte, exp int64) int {
	pos := ks.add(key, kindString, exp)
	c, i := ks.cell(pos)
	putStringCell(&c.vals[i], b)
	return pos
}

// move copies the value, kind, deadline and version at from to to (the
// deadline index is the caller's business). A value a snapshot may read
// stays marked as shared.
func (ks *keyspace) move(from, to int) {
	sh := ks.shared(from)
	fc, fi := ks.cell(from)
	tc, ti := ks.cellW(to)
	tc.vals[ti], tc.kinds[ti], tc.exps[ti], tc.vers[ti] = fc.vals[fi], fc.kinds[fi], fc.exps[fi], fc.vers[fi]
	if sh && tc.kinds[ti]&kindMask == kindSet {
		tc.kinds[ti] |= sharedBit
	}
}

// remove deletes the key at pos; the last key takes its place, exactly as in
// the Table. Pointers into the chunks are invalid afterwards.
func (ks *keyspace) remove(pos int) {
	ks.acct.remove(pos, ks.n-1)
	if ks.exp(pos) != noExpiry {
		ks.vol.Remove(ks.keys.At(pos))
	}
	ks.keys.RemoveAt(pos)
	last := ks.n - 1
	if pos != last {
		ks.move(last, pos)
	}
	c, i := ks.cellW(last)
	c.vals[i] = setenc.Set{} // drop the reference for the GC
	ks.n--
	if ks.n&chunkMask == 0 {
		// The last chunk is empty.
		ks.chunks[len(ks.chunks)-1] = nil
		ks.chunks = ks.chunks[:len(ks.chunks)-1]
	}
}

// setExpire sets or clears (noExpiry) the deadline of the key at pos.
func (ks *keyspace) setExpire(pos int, when int64) {
	c, i := ks.cellW(pos)
	old := c.exps[i]
	c.exps[i] = when
	switch {
	case old == noExpiry && when != noExpiry:
		ks.vol.Add(ks.keys.At(pos))
	case old != noExpiry && when == noExpiry:
		ks.vol.Remove(ks.keys.At(pos))
	}
}

// str returns the string at pos; the caller must not modify it.
func (ks *keyspace) str(pos int) []byte {
	c, i := ks.cell(pos)
	return stringCell(&c.vals[i])
}

// set returns the set at pos for reading. The pointer is valid until the
// next change to the keyspace.
func (ks *keyspace) set(pos int) *setenc.Set {
	c, i := ks.cell(pos)
	return &c.vals[i]
}

// setForWrite is set for a change in place: a set a live snapshot may read
// is copied first. The pointer is valid until the next add or remove.
func (ks *keyspace) setForWrite(pos int) *setenc.Set {
	c, i := ks.cellW(pos)
	if c.kinds[i]&sharedBit != 0 {
		c.kinds[i] &^= sharedBit
		c.vals[i] = *c.vals[i].Clone()
	}
	return &c.vals[i]
}

// putSet replaces the value at pos with s, a new set the keyspace now owns.
func (ks *keyspace) putSet(pos int, s *setenc.Set) {
	c, i := ks.cellW(pos)
	c.vals[i], c.kinds[i] = *s, kindSet
}

// putString replaces the value at pos with b, which the keyspace now owns.
func (ks *keyspace) putString(pos int, b []byte) {
	c, i := ks.cellW(pos)
	putStringCell(&c.vals[i], b)
	c.kinds[i] = kindString
}

// clear empties the keyspace (FLUSHALL): new chunks, so snapshots keep theirs.
func (ks *keyspace) clear() {
	ks.keys, ks.vol = hashtable.New(0), hashtable.New(0)
	ks.chunks, ks.n = nil, 0
	ks.volCursor.Store(0)
	ks.defrag = defragState{}
	ks.acct.reset()
}

// share records a new snapshot of the chunks and returns its generation.
func (ks *keyspace) share() uint64 {
	ks.gen++
	ks.cowGen = ks.gen
	ks.live = append(ks.live, ks.gen)
	return ks.gen
}

// unshare ends the snapshot of generation gen. When none is left, no chunk
// or set needs copying any more, and the shared marks are cleared.
func (ks *keyspace) unshare(gen uint64) {
	if i := slices.Index(ks.live, gen); i >= 0 {
		ks.live = slices.Delete(ks.live, i, i+1)
	}
	if len(ks.live) > 0 {
		ks.cowGen = slices.Max(ks.live)
		return
	}
	ks.cowGen = 0
	for _, c := range ks.chunks {
		for i, k := range c.kinds {
			c.kinds[i] = k &^ sharedBit
		}
	}
}
