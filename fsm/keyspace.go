package fsm

import (
	"bytes"
	"slices"
	"strconv"
	"sync/atomic"

	"raftset/internal/setenc"
	"raftset/internal/setenc/hashtable"
	"raftset/internal/slot"
	"raftset/internal/strictint"
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
// A snapshot being persisted reads its chunks in order, once, and publishes
// how many it has finished (liveSnap.passed). A chunk every live snapshot
// has passed is written in place again, and a set in it marked shared is
// changed in place: during a write flood the copies made for a snapshot
// were its whole write-set (20-30 MB on the seed's load, each raising the
// collector's next goal by half as much again), and now they cover only
// the chunks still ahead of the writer. A set moved (by a removal) from a
// chunk a snapshot has yet to read carries movedBit as well: its position
// no longer says where the snapshot reads it, so it is copied before any
// change while any snapshot is live.
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
	// snapshot and is copied before any write, unless every such snapshot
	// has passed it. live lists the live snapshots.
	gen, cowGen uint64
	live        []liveSnap

	// vol indexes the keys that have a deadline, so ExpiredKeys samples them
	// without walking the whole keyspace. It is derived state (rebuilt on
	// restore) and decides no reply: the order of its keys does not matter.
	vol       *hashtable.Table
	volCursor atomic.Uint64
	// peak is the most keys held since the tables were last rebuilt: a
	// hashtable.Table never shrinks its index and arena, so once the keys
	// fall to a quarter of it remove rebuilds them (see shrink).
	peak int

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

	// slotIdx groups the keys by hash slot (slotindex.go), nil until first
	// needed; derived state. slots is each slot's migration state
	// (slots.go), nil while every slot is simply owned: replicated state,
	// carried by snapshots in AuxSlots.
	slotIdx *slotIndex
	slots   *slotStates
}

const (
	chunkShift = 12
	chunkLen   = 1 << chunkShift
	chunkMask  = chunkLen - 1
)

// liveSnap is a snapshot sharing the keyspace's chunks: its generation and
// how many chunks its writer has finished reading (it reads none of them
// again). passed only grows, and a snapshot that is never persisted
// (ExportRDB) leaves it at 0.
type liveSnap struct {
	gen    uint64
	passed *atomic.Int64
}

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
// A string's kind carries its encoding (see strEnc): strInt, the cell holds
// an int64 instead of bytes; strRaw, Redis would report it raw whatever its
// length.
const (
	kindString uint8 = 1
	kindSet    uint8 = 2
	kindMask   uint8 = 0x0f
	strInt     uint8 = 0x10
	strRaw     uint8 = 0x20
	sharedBit  uint8 = 0x80
	movedBit   uint8 = 0x40 // sets only, with sharedBit: see keyspace
)

// strEnc is how a string write is stored, following the object encoding
// Redis gives the value (OBJECT ENCODING; replies must not depend on which
// replica answers, so it is replicated state, carried by snapshots):
//   - encContent is tryObjectEncoding's choice, made by SET, MSET, GETSET,
//     INCR, RESTORE, loading an RDB ...: a strict integer of at most 20
//     characters is stored as an int64 ("int"), anything else as bytes
//     ("embstr" up to 44 bytes, "raw" beyond);
//   - encRaw is what APPEND and SETRANGE leave: bytes, "raw" at any length;
//   - encBytes is createStringObject's choice (INCRBYFLOAT): bytes, by
//     length, even when they spell an integer.
type strEnc uint8

const (
	encContent strEnc = iota
	encRaw
	encBytes
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
	if c.gen < ks.cowGen && ks.chunkRead(ci, c.gen) {
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
	ci := pos >> chunkShift
	c, i := ks.cell(pos)
	return c.gen < ks.cowGen && ks.chunkRead(ci, c.gen) || ks.setShared(ci, c.kinds[i])
}

// chunkRead reports whether a live snapshot that shares chunk ci (taken
// while it had generation gen) has yet to read it.
func (ks *keyspace) chunkRead(ci int, gen uint64) bool {
	for _, l := range ks.live {
		if gen < l.gen && l.passed.Load() <= int64(ci) {
			return true
		}
	}
	return false
}

// setShared reports whether a set of kind k in chunk ci may still be read by
// a live snapshot: one moved there from elsewhere while any is live, one
// marked when its chunk was copied while a snapshot has yet to pass ci.
func (ks *keyspace) setShared(ci int, k uint8) bool {
	if k&sharedBit == 0 {
		return false
	}
	if k&movedBit != 0 {
		return true
	}
	for _, l := range ks.live {
		if l.passed.Load() <= int64(ci) {
			return true
		}
	}
	return false
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
	ks.peak = max(ks.peak, ks.n)
	c, i := ks.cellW(pos)
	c.vals[i], c.kinds[i], c.exps[i], c.vers[i] = setenc.Set{}, kind, exp, 0
	if exp != noExpiry {
		ks.vol.Add(key)
	}
	if ks.slotIdx != nil {
		ks.slotIdx.add(pos, slot.Of(key))
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

// addString inserts key holding b (which the keyspace now owns unless it
// is stored as an integer), encoded by content.
func (ks *keyspace) addString(key, b []byte, exp int64) int {
	return ks.addStringEnc(key, b, encContent, exp)
}

// addStringEnc inserts key holding b stored as enc.
func (ks *keyspace) addStringEnc(key, b []byte, enc strEnc, exp int64) int {
	pos := ks.add(key, kindString, exp)
	c, i := ks.cell(pos)
	c.kinds[i] = storeString(&c.vals[i], b, enc)
	return pos
}

// copyString inserts key holding a copy of the string at pos, in the same
// encoding (COPY: Redis's dupStringObject keeps it).
func (ks *keyspace) copyString(key []byte, pos int, exp int64) int {
	sc, si := ks.cell(pos)
	kind, val := sc.kinds[si], sc.vals[si]
	if kind&strInt == 0 {
		b := bytes.Clone(stringCell(&val))
		if b == nil {
			b = []byte{}
		}
		putStringCell(&val, b)
	}
	np := ks.add(key, kind, exp)
	c, i := ks.cell(np)
	c.vals[i] = val
	return np
}

// addInt inserts key holding the integer v.
func (ks *keyspace) addInt(key []byte, v int64, exp int64) int {
	pos := ks.add(key, kindString|strInt, exp)
	c, i := ks.cell(pos)
	putIntCell(&c.vals[i], v)
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
		tc.kinds[ti] |= sharedBit | movedBit
	}
}

// remove deletes the key at pos; the last key takes its place, exactly as in
// the Table. Pointers into the chunks are invalid afterwards.
func (ks *keyspace) remove(pos int) {
	ks.acct.remove(pos, ks.n-1)
	if ks.exp(pos) != noExpiry {
		ks.vol.Remove(ks.keys.At(pos))
	}
	last := ks.n - 1
	if ks.slotIdx != nil {
		ks.slotIdx.remove(pos, slot.Of(ks.keys.At(pos)), last, slot.Of(ks.keys.At(last)))
	}
	ks.keys.RemoveAt(pos)
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
	if ks.n*4 < ks.peak && ks.peak >= shrinkMin {
		ks.shrink()
	}
}

// shrinkMin is the smallest peak worth rebuilding the tables for.
const shrinkMin = 1024

// shrink rebuilds the key and deadline tables at their current size, as
// Redis's dict resizes down when expiry or deletions empty it (1,000,000
// keys with short TTLs left 10 MB of empty tables behind). Clone keeps the
// dense order, so every key keeps its position; the copying is amortized
// over the three quarters of the keys removed since the last rebuild.
func (ks *keyspace) shrink() {
	if ks.n == 0 {
		ks.keys, ks.vol = hashtable.New(0), hashtable.New(0)
	} else {
		ks.keys, ks.vol = ks.keys.Clone(), ks.vol.Clone()
	}
	ks.volCursor.Store(0)
	ks.peak = ks.n
	// The accounting arrays, one entry a key, keep their capacity too: 8
	// bytes for every key of the peak (1.6 MB after 200,000 keys expired).
	// (Not slices.Clone: the clone of an empty slice still points into the
	// old array.)
	ks.acct.sz = append([]uint32(nil), ks.acct.sz...)
	ks.acct.acc = append([]uint32(nil), ks.acct.acc...)
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

// str returns the string at pos; the caller must not modify it. An integer
// is formatted into a new slice.
func (ks *keyspace) str(pos int) []byte {
	c, i := ks.cell(pos)
	return cellString(c, i)
}

// cellString is the string in cell i of c.
func cellString(c *chunk, i int) []byte {
	if c.kinds[i]&strInt != 0 {
		return strconv.AppendInt(make([]byte, 0, 20), intCell(&c.vals[i]), 10)
	}
	return stringCell(&c.vals[i])
}

// strInt returns the integer at pos if the string there is stored as one.
func (ks *keyspace) strInt(pos int) (int64, bool) {
	c, i := ks.cell(pos)
	if c.kinds[i]&strInt == 0 {
		return 0, false
	}
	return intCell(&c.vals[i]), true
}

// strLen is the length of the string at pos.
func (ks *keyspace) strLen(pos int) int {
	c, i := ks.cell(pos)
	if c.kinds[i]&strInt != 0 {
		return strictint.Len(intCell(&c.vals[i]))
	}
	return int(cellOf(&c.vals[i]).n)
}

// strEncoding is the OBJECT ENCODING of the string at pos.
func (ks *keyspace) strEncoding(pos int) string {
	c, i := ks.cell(pos)
	switch k := c.kinds[i]; {
	case k&strInt != 0:
		return "int"
	case k&strRaw != 0 || cellOf(&c.vals[i]).n > embstrMax:
		return "raw"
	}
	return "embstr"
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
	if k := c.kinds[i]; k&sharedBit != 0 {
		c.kinds[i] = k &^ (sharedBit | movedBit)
		if ks.setShared(pos>>chunkShift, k) {
			c.vals[i] = *c.vals[i].Clone()
		}
	}
	return &c.vals[i]
}

// putSet replaces the value at pos with s, a new set the keyspace now owns.
func (ks *keyspace) putSet(pos int, s *setenc.Set) {
	c, i := ks.cellW(pos)
	c.vals[i], c.kinds[i] = *s, kindSet
}

// putString replaces the value at pos with b, encoded by content; the
// keyspace owns b unless it is stored as an integer.
func (ks *keyspace) putString(pos int, b []byte) { ks.putStringEnc(pos, b, encContent) }

// putStringEnc replaces the value at pos with b stored as enc.
func (ks *keyspace) putStringEnc(pos int, b []byte, enc strEnc) {
	c, i := ks.cellW(pos)
	c.kinds[i] = storeString(&c.vals[i], b, enc)
}

// putInt replaces the value at pos with the integer v.
func (ks *keyspace) putInt(pos int, v int64) {
	c, i := ks.cellW(pos)
	putIntCell(&c.vals[i], v)
	c.kinds[i] = kindString | strInt
}

// clear empties the keyspace (FLUSHALL): new chunks, so snapshots keep theirs.
func (ks *keyspace) clear() {
	ks.keys, ks.vol = hashtable.New(0), hashtable.New(0)
	ks.chunks, ks.n, ks.peak = nil, 0, 0
	ks.volCursor.Store(0)
	ks.defrag = defragState{}
	ks.acct.reset()
	if ks.slotIdx != nil {
		ks.slotIdx = newSlotIndex()
	}
}

// share records a new snapshot of the chunks, whose writer reports the
// chunks it finished in passed, and returns its generation.
func (ks *keyspace) share(passed *atomic.Int64) uint64 {
	ks.gen++
	ks.cowGen = ks.gen
	ks.live = append(ks.live, liveSnap{gen: ks.gen, passed: passed})
	return ks.gen
}

// unshare ends the snapshot of generation gen. When none is left, no chunk
// or set needs copying any more, and the shared marks are cleared.
func (ks *keyspace) unshare(gen uint64) {
	ks.live = slices.DeleteFunc(ks.live, func(l liveSnap) bool { return l.gen == gen })
	if len(ks.live) > 0 {
		ks.cowGen = 0
		for _, l := range ks.live {
			ks.cowGen = max(ks.cowGen, l.gen)
		}
		return
	}
	ks.cowGen = 0
	for _, c := range ks.chunks {
		for i, k := range c.kinds {
			if k&kindMask == kindSet {
				c.kinds[i] = k &^ (sharedBit | movedBit)
			}
		}
	}
}
