package setenc

import (
	"bytes"
	"unsafe"

	"raftset/internal/setenc/hashtable"
	"raftset/internal/setenc/intset"
	"raftset/internal/setenc/listpack"
	"raftset/internal/strictint"
)

// Set is a set of byte strings in one of Redis's three encodings. Use
// NewForAdd (or the *STORE and load constructors) to make one; a Set is never
// empty for long: callers delete the key when Len reaches 0, as Redis does.
//
// A Set is 16 bytes: one pointer (to the first byte of the intset or listpack,
// or to the hashtable), the blob's length, and its capacity with the encoding
// in the top two bits. A keyspace of 200,000 fifty-member sets spends about
// 750 bytes per key on the listpack itself, so the 24 bytes this saves over
// a plain {Encoding, []byte, *Table} struct are a fair share of what
// separates us from Redis's 800 bytes per key. The one limit it adds: a
// compact blob stays under 1 GiB (capMask), which Redis's own listpack limit
// already implies; an intset that would grow past it becomes a hashtable.
type Set struct {
	p  unsafe.Pointer // *byte (intset, listpack) or *hashtable.Table
	n  uint32         // len of the blob
	ce uint32         // cap of the blob | encoding<<encShift
}

const (
	encShift = 30
	capMask  = 1<<encShift - 1
	// maxCompactBytes leaves room for the allocator's rounding below capMask.
	maxCompactBytes = capMask - 1<<16
)

func blobSet(e Encoding, b []byte) *Set {
	s := &Set{}
	s.setBlob(e, b)
	return s
}

func tableSet(t *hashtable.Table) *Set {
	return &Set{p: unsafe.Pointer(t), ce: uint32(Hashtable) << encShift}
}

func (s *Set) kind() Encoding { return Encoding(s.ce >> encShift) }

// blob returns the intset or listpack bytes.
func (s *Set) blob() []byte {
	if s.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(s.p), s.ce&capMask)[:s.n]
}

func (s *Set) setBlob(e Encoding, b []byte) {
	if cap(b) > capMask {
		panic("setenc: blob over 1 GiB")
	}
	s.p, s.n, s.ce = unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)), uint32(cap(b))|uint32(e)<<encShift
}

func (s *Set) ht() *hashtable.Table { return (*hashtable.Table)(s.p) }

// NewForAdd returns the empty set Redis creates for a key that is about to
// receive hint members, the first of which is first (src/t_set.c
// setTypeCreate): an intset if first is an integer and hint fits an intset, a
// listpack if hint fits a listpack, a hashtable otherwise.
func NewForAdd(first []byte, hint int, lim Limits) *Set {
	if _, ok := strictint.Parse(first); ok && hint <= lim.maxIntset() {
		return blobSet(Intset, intset.New())
	}
	if hint <= lim.MaxListpackEntries {
		return blobSet(Listpack, listpack.New())
	}
	return tableSet(hashtable.New(hint))
}

func newIntset() *Set   { return blobSet(Intset, intset.New()) }
func newListpack() *Set { return blobSet(Listpack, listpack.New()) }

// Encoding returns how the set is stored.
func (s *Set) Encoding() Encoding { return s.kind() }

// Blob returns the intset or listpack bytes, exactly as Redis would hold them.
// It is nil for a hashtable. The slice aliases the set.
func (s *Set) Blob() []byte {
	if s.kind() == Hashtable {
		return nil
	}
	return s.blob()
}

// MoveBlob points an intset or listpack set at dst, which must hold exactly
// the set's Blob bytes; the set no longer refers to its old blob. Its
// capacity becomes len(dst), so the next growth allocates rather than writing
// past dst. A defragmenter uses it to pack blobs into dense slabs.
func (s *Set) MoveBlob(dst []byte) {
	if s.kind() == Hashtable || len(dst) != int(s.n) {
		panic("setenc: MoveBlob needs an intset or listpack and a blob of its length")
	}
	s.setBlob(s.kind(), dst[:len(dst):len(dst)])
}

// Len returns the number of members.
func (s *Set) Len() int {
	switch s.kind() {
	case Intset:
		return intset.Len(s.blob())
	case Listpack:
		return listpack.Len(s.blob())
	default:
		return s.ht().Len()
	}
}

// Contains reports whether m is a member.
func (s *Set) Contains(m []byte) bool {
	switch s.kind() {
	case Intset:
		v, ok := strictint.Parse(m)
		return ok && intset.Contains(s.blob(), v)
	case Listpack:
		return listpack.Find(s.blob(), m) >= 0
	default:
		return s.ht().Contains(m)
	}
}

// AddMany adds members as one SADD does and returns how many were new. Before
// adding, a set that the argument count alone would overflow is converted to
// a hashtable, even if every member turns out to be present already
// (setTypeMaybeConvert).
func (s *Set) AddMany(members [][]byte, lim Limits) int {
	n := len(members)
	if (s.kind() == Listpack && n > lim.MaxListpackEntries) || (s.kind() == Intset && n > lim.maxIntset()) {
		s.toHashtable(s.Len() + n)
	}
	added := 0
	for _, m := range members {
		if s.Add(m, lim) {
			added++
		}
	}
	return added
}

// Add inserts m and reports whether it was new, converting the set when
// Redis would (setTypeAddAux).
func (s *Set) Add(m []byte, lim Limits) bool {
	switch s.kind() {
	case Intset:
		if v, ok := strictint.Parse(m); ok {
			if len(s.blob())+8 > maxCompactBytes {
				s.toHashtable(s.Len() + 1)
				return s.ht().Add(m)
			}
			b, added := intset.Add(s.blob(), v)
			s.setBlob(s.kind(), b)
			if added && intset.Len(b) > lim.maxIntset() {
				s.toHashtable(intset.Len(b))
			}
			return added
		}
		if s.intsetCanTakeString(m, lim) {
			s.intsetToListpack(1)
			s.setBlob(s.kind(), listpack.Append(s.blob(), m))
			return true
		}
		s.toHashtable(s.Len() + 1)
		return s.ht().Add(m)
	case Listpack:
		if listpack.Find(s.blob(), m) >= 0 {
			return false
		}
		if s.listpackCanTake(len(m), lim) {
			s.setBlob(s.kind(), listpack.Append(s.blob(), m))
			return true
		}
		s.toHashtable(s.Len() + 1)
		return s.ht().Add(m)
	default:
		return s.ht().Add(m)
	}
}

// listpackCanTake is the test Redis makes before appending a member of n
// bytes to a listpack set.
func (s *Set) listpackCanTake(n int, lim Limits) bool {
	return listpack.Len(s.blob()) < lim.MaxListpackEntries && n <= lim.MaxListpackValue &&
		len(s.blob())+n <= maxListpackBytes
}

// intsetCanTakeString is Redis's test for turning an intset into a listpack
// when a non-integer member m arrives: the intset must be short enough, m and
// the decimal forms of the intset's extremes short enough, and the result
// safely sized. Otherwise the intset goes straight to hashtable.
func (s *Set) intsetCanTakeString(m []byte, lim Limits) bool {
	n := intset.Len(s.blob())
	maxEle, total := 0, 0
	if n > 0 {
		lo, hi := intset.Min(s.blob()), intset.Max(s.blob())
		maxEle = max(strictint.Len(lo), strictint.Len(hi))
		total = n * max(intEntrySize(lo), intEntrySize(hi))
	}
	return n < lim.MaxListpackEntries && len(m) <= lim.MaxListpackValue &&
		maxEle <= lim.MaxListpackValue && total+len(m) <= maxListpackBytes
}

// Remove deletes m and reports whether it was a member. It never converts.
func (s *Set) Remove(m []byte) bool {
	switch s.kind() {
	case Intset:
		v, ok := strictint.Parse(m)
		if !ok {
			return false
		}
		b, removed := intset.Remove(s.blob(), v)
		s.setBlob(s.kind(), b)
		return removed
	case Listpack:
		p := listpack.Find(s.blob(), m)
		if p < 0 {
			return false
		}
		s.setBlob(s.kind(), listpack.Delete(s.blob(), p))
		return true
	default:
		return s.ht().Remove(m)
	}
}

// Iterate calls fn with each member in storage order (intset ascending,
// listpack insertion order, hashtable dense order) until fn returns false.
// The slice passed to fn is valid only during the call.
func (s *Set) Iterate(fn func(m []byte) bool) {
	if s.kind() == Hashtable {
		s.ht().Iterate(fn)
		return
	}
	iterateBlob(s.kind(), s.blob(), fn)
}

func iterateBlob(e Encoding, b []byte, fn func(m []byte) bool) {
	var buf [strictint.MaxLen]byte
	if e == Intset {
		intset.Iterate(b, func(v int64) bool { return fn(strictint.Append(buf[:0], v)) })
		return
	}
	for p := listpack.First(b); p >= 0; p = listpack.Next(b, p) {
		if !fn(listpack.AppendMember(buf[:0], b, p)) {
			return
		}
	}
}

// Members returns copies of all members in storage order.
func (s *Set) Members() [][]byte {
	out := make([][]byte, 0, s.Len())
	s.Iterate(func(m []byte) bool { out = append(out, bytes.Clone(m)); return true })
	return out
}

// Clone returns an independent copy in the same encoding and order.
func (s *Set) Clone() *Set {
	if s.kind() == Hashtable {
		return tableSet(s.ht().Clone())
	}
	return blobSet(s.kind(), bytes.Clone(s.blob()))
}

// MemoryUsage estimates the heap bytes the set holds, for INFO and MEMORY
// USAGE.
func (s *Set) MemoryUsage() int {
	const header = 48
	if s.kind() == Hashtable {
		return header + s.ht().MemoryUsage()
	}
	return header + cap(s.blob())
}

// Scan returns up to about count members from cursor on, and the cursor to
// pass next; 0 starts and ends a scan. Intsets and listpacks return every
// member in one call with cursor 0, as Redis does.
func (s *Set) Scan(cursor uint64, count int, fn func(m []byte)) uint64 {
	if s.kind() == Hashtable {
		return s.ht().Scan(cursor, count, fn)
	}
	s.Iterate(func(m []byte) bool { fn(m); return true })
	return 0
}

// memberAt returns the member at storage position i, appended to dst.
func (s *Set) memberAt(dst []byte, i int) []byte {
	switch s.kind() {
	case Intset:
		return strictint.Append(dst, intset.Get(s.blob(), i))
	case Listpack:
		return listpack.AppendMember(dst, s.blob(), listpack.Seek(s.blob(), i))
	default:
		return append(dst, s.ht().At(i)...)
	}
}

func (s *Set) intsetToListpack(extra int) {
	lp := listpack.New()
	if n := intset.Len(s.blob()); n > 0 {
		lp = listpackReserve(lp, n*max(intEntrySize(intset.Min(s.blob())), intEntrySize(intset.Max(s.blob())))+extra*16)
	}
	intset.Iterate(s.blob(), func(v int64) bool { lp = listpack.AppendInt(lp, v); return true })
	s.setBlob(Listpack, lp)
}

// toHashtable converts an intset or listpack, keeping storage order, and
// sizes the table for hint members.
func (s *Set) toHashtable(hint int) {
	if s.kind() == Hashtable {
		return
	}
	t := hashtable.New(max(hint, s.Len()))
	s.Iterate(func(m []byte) bool { t.Add(m); return true })
	*s = *tableSet(t)
}

// listpackReserve gives lp room for n more bytes without changing it.
func listpackReserve(lp []byte, n int) []byte {
	if n <= 0 {
		return lp
	}
	nb := make([]byte, len(lp), len(lp)+n)
	copy(nb, lp)
	return nb
}

// intEntrySize is the listpack entry size (encoding, data and backlen) of v,
// as Redis's lpEstimateBytesRepeatedInteger uses it.
func intEntrySize(v int64) int {
	switch {
	case v >= 0 && v <= 127:
		return 2
	case v >= -4096 && v <= 4095:
		return 3
	case v >= -32768 && v <= 32767:
		return 4
	case v >= -8388608 && v <= 8388607:
		return 5
	case v >= -2147483648 && v <= 2147483647:
		return 6
	default:
		return 10
	}
}

// Warm loads the first byte of the set's storage (its blob, or its
// hashtable's header) and returns it: a caller about to use many sets loads
// them all first so that their cache misses overlap (fsm's keyspace warm).
func (s *Set) Warm() byte {
	if s.p == nil || (s.n == 0 && s.kind() != Hashtable) {
		return 0
	}
	return *(*byte)(s.p)
}
