package hashtable

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// seed only spreads members over index slots; it never influences an order
// that callers can observe (see the package comment).
var seed = maphash.MakeSeed()

// maxLoadEighths is the index load factor, in eighths: above 6/8 the index
// grows by half. Linear probing stays short at this load and the index costs about
// 6.5 bytes per member on average (8 with the tags).
const maxLoadEighths = 6

// Table is a set of byte strings. The zero value is an empty table.
type Table struct {
	arena []byte
	dense []uint32
	index []uint32
	// tags[i] holds 8 bits of the hash of the member in index slot i, so a
	// probe rejects a slot without reading the member: in a table bigger
	// than the caches each member read is two misses (dense, then arena).
	tags    []uint8
	garbage int // bytes of removed members still in arena
}

// New returns an empty table with room for n members.
func New(n int) *Table {
	t := &Table{}
	t.Reserve(n)
	return t
}

// Reserve sizes the index and the dense array for n members.
func (t *Table) Reserve(n int) {
	if n <= cap(t.dense) {
		return
	}
	d := make([]uint32, len(t.dense), n)
	copy(d, t.dense)
	t.dense = d
	if want := indexSizeFor(n); want > len(t.index) {
		t.rehash(want)
	}
}

// Len returns the number of members.
func (t *Table) Len() int { return len(t.dense) }

// At returns member i of the dense order. The slice aliases the table and is
// valid until the next change.
func (t *Table) At(i int) []byte {
	off := int(t.dense[i])
	n, w := binary.Uvarint(t.arena[off:])
	return t.arena[off+w : off+w+int(n)]
}

// Contains reports whether m is a member.
func (t *Table) Contains(m []byte) bool {
	_, pos := t.find(m, maphash.Bytes(seed, m))
	return pos >= 0
}

// Find returns the dense position of m, or -1 if it is not a member.
func (t *Table) Find(m []byte) int {
	_, pos := t.find(m, maphash.Bytes(seed, m))
	return pos
}

// Add inserts m at the end of the dense order (position Len()-1 afterwards),
// returning false if it was already present.
func (t *Table) Add(m []byte) bool {
	h := maphash.Bytes(seed, m)
	if len(t.index) > 0 {
		if _, pos := t.find(m, h); pos >= 0 {
			return false
		}
	}
	if (len(t.dense)+1)*8 > len(t.index)*maxLoadEighths {
		t.rehash(max(indexSizeFor(len(t.dense)+1), len(t.index)+len(t.index)/2))
	}
	pos := len(t.dense)
	t.dense = appendU32(t.dense, uint32(len(t.arena)))
	t.arena = appendMember(t.arena, m)
	for i := t.home(h); ; i = t.next(i) {
		if t.index[i] == 0 {
			t.index[i], t.tags[i] = uint32(pos+1), tagOf(h)
			return true
		}
	}
}

// Remove deletes m, returning false if it was not a member. The last member
// of the dense order takes m's place.
func (t *Table) Remove(m []byte) bool {
	slot, pos := t.find(m, maphash.Bytes(seed, m))
	if pos < 0 {
		return false
	}
	t.remove(pos, slot)
	return true
}

// RemoveAt deletes the member at dense position pos; the last member of the
// dense order takes its place.
func (t *Table) RemoveAt(pos int) {
	m := t.At(pos)
	slot, _ := t.find(m, maphash.Bytes(seed, m))
	t.remove(pos, slot)
}

// remove deletes the member at dense position pos whose index slot is slot.
func (t *Table) remove(pos, slot int) {
	m := t.At(pos)
	if size := uvarintLen(len(m)) + len(m); int(t.dense[pos])+size == len(t.arena) {
		// The newest bytes in the arena: give them back instead of leaving garbage.
		t.arena = t.arena[:t.dense[pos]]
	} else {
		t.garbage += size
	}
	t.deleteSlot(slot)
	last := len(t.dense) - 1
	if pos != last {
		// Point the last member's slot at its new position.
		lm := t.At(last)
		ls, _ := t.find(lm, maphash.Bytes(seed, lm))
		t.index[ls] = uint32(pos + 1)
		t.dense[pos] = t.dense[last]
	}
	t.dense = t.dense[:last]
	if len(t.dense) == 0 {
		t.arena = t.arena[:0]
		t.garbage = 0
	} else if t.garbage > len(t.arena)/2 {
		t.compact()
	}
}

// Iterate calls fn for every member in dense order until fn returns false.
func (t *Table) Iterate(fn func(m []byte) bool) {
	for i := range t.dense {
		if !fn(t.At(i)) {
			return
		}
	}
}

// Scan returns up to count members walking down from cursor and the cursor
// to resume from; 0 starts a scan and a returned 0 ends it. See the package
// comment for why members present throughout are never missed.
func (t *Table) Scan(cursor uint64, count int, fn func(m []byte)) uint64 {
	c := uint64(len(t.dense))
	if cursor != 0 && cursor < c {
		c = cursor
	}
	if count < 1 {
		count = 1
	}
	for ; c > 0 && count > 0; count-- {
		c--
		fn(t.At(int(c)))
	}
	return c
}

// Clone returns an independent copy with the same dense order.
func (t *Table) Clone() *Table {
	n := &Table{}
	n.Reserve(t.Len())
	t.Iterate(func(m []byte) bool { n.Add(m); return true })
	return n
}

// MemoryUsage estimates the bytes the table holds on the heap.
func (t *Table) MemoryUsage() int {
	return cap(t.arena) + 4*cap(t.dense) + 5*cap(t.index) + 64
}

// find returns the index slot and dense position of m, or (-1, -1).
func (t *Table) find(m []byte, h uint64) (slot, pos int) {
	if len(t.index) == 0 {
		return -1, -1
	}
	tag := tagOf(h)
	for i := t.home(h); ; i = t.next(i) {
		v := t.index[i]
		if v == 0 {
			return -1, -1
		}
		if t.tags[i] == tag && bytes.Equal(t.At(int(v-1)), m) {
			return i, int(v - 1)
		}
	}
}

// deleteSlot empties slot i and shifts later members of its probe run back,
// so that lookups never need tombstones (Knuth's Algorithm R).
func (t *Table) deleteSlot(i int) {
	j := i
	for {
		t.index[i] = 0
		for {
			j = t.next(j)
			v := t.index[j]
			if v == 0 {
				return
			}
			k := t.home(maphash.Bytes(seed, t.At(int(v-1))))
			// Move v into the hole at i unless its home k lies cyclically in (i, j].
			if i <= j {
				if i < k && k <= j {
					continue
				}
			} else if i < k || k <= j {
				continue
			}
			t.index[i], t.tags[i] = v, t.tags[j]
			i = j
			break
		}
	}
}

func (t *Table) rehash(size int) {
	t.index, t.tags = make([]uint32, size), make([]uint8, size)
	for pos := range t.dense {
		h := maphash.Bytes(seed, t.At(pos))
		for i := t.home(h); ; i = t.next(i) {
			if t.index[i] == 0 {
				t.index[i], t.tags[i] = uint32(pos+1), tagOf(h)
				break
			}
		}
	}
}

// compact rewrites the arena without removed members. Dense positions do not
// change, so neither does any observable order.
func (t *Table) compact() {
	a := make([]byte, 0, len(t.arena)-t.garbage)
	for i := range t.dense {
		m := t.At(i)
		t.dense[i] = uint32(len(a))
		a = appendMember(a, m)
	}
	t.arena = a
	t.garbage = 0
}

// home maps a hash onto the index by multiplication rather than a mask, so
// that the index need not be a power of two: it grows by half rather than
// doubling, which saves about four bytes per member on average.
func (t *Table) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.index)))
	return int(hi)
}

// tagOf takes the hash's low bits: home uses its high ones.
func tagOf(h uint64) uint8 { return uint8(h) }

func (t *Table) next(i int) int {
	if i++; i == len(t.index) {
		return 0
	}
	return i
}

func indexSizeFor(n int) int {
	return max(8, (n*8+maxLoadEighths-1)/maxLoadEighths+1)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// appendMember grows the arena by an eighth at a time rather than append's
// doubling: a 10,000-member set should not carry 50% slack.
func appendMember(a []byte, m []byte) []byte {
	need := len(a) + uvarintLen(len(m)) + len(m)
	if need > cap(a) {
		nc := cap(a) + cap(a)/8
		if nc < need {
			nc = need
		}
		if nc < 64 {
			nc = 64
		}
		na := make([]byte, len(a), nc)
		copy(na, a)
		a = na
	}
	a = binary.AppendUvarint(a, uint64(len(m)))
	return append(a, m...)
}

func appendU32(d []uint32, v uint32) []uint32 {
	if len(d) == cap(d) {
		nc := cap(d) + cap(d)/8
		if nc < 16 {
			nc = 16
		}
		nd := make([]uint32, len(d), nc)
		copy(nd, d)
		d = nd
	}
	return append(d, v)
}
