package intset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"raftset/internal/alloc"
)

// ErrCorrupt is wrapped by every error Validate returns, so callers can tell
// a bad payload from other failures with errors.Is.
var ErrCorrupt = errors.New("intset: corrupt")

const (
	headerSize = 8
	// maxLen is what the u32 length field can count. Redis stops far earlier
	// (set-max-intset-entries ≤ 2^30); this only guards the header itself.
	maxLen = math.MaxUint32
)

var le = binary.LittleEndian

// New returns an empty intset: width 2 and no values, exactly the 8 bytes
// of Redis's intsetNew. Capacity is 8 too, so an empty set costs one
// smallest size class.
func New() []byte {
	b := make([]byte, headerSize)
	le.PutUint32(b, 2)
	return b
}

// Len returns the number of values.
func Len(b []byte) int { return int(le.Uint32(b[4:8])) }

// Width returns the bytes per value: 2, 4 or 8.
func Width(b []byte) int { return int(le.Uint32(b[0:4])) }

// WidthFor returns the smallest width that holds v.
func WidthFor(v int64) int {
	switch {
	case v < math.MinInt32 || v > math.MaxInt32:
		return 8
	case v < math.MinInt16 || v > math.MaxInt16:
		return 4
	default:
		return 2
	}
}

// SizeFor returns the blob size of n values of the given width.
func SizeFor(n, width int) int { return headerSize + n*width }

// at reads value i of width w. Kept tiny so the compiler inlines it into
// the loops below.
func at(b []byte, w, i int) int64 {
	o := headerSize + i*w
	switch w {
	case 2:
		return int64(int16(le.Uint16(b[o:])))
	case 4:
		return int64(int32(le.Uint32(b[o:])))
	default:
		return int64(le.Uint64(b[o:]))
	}
}

// put writes v as value i of width w; v must fit.
func put(b []byte, w, i int, v int64) {
	o := headerSize + i*w
	switch w {
	case 2:
		le.PutUint16(b[o:], uint16(v))
	case 4:
		le.PutUint32(b[o:], uint32(v))
	default:
		le.PutUint64(b[o:], uint64(v))
	}
}

// Get returns value i, 0 ≤ i < Len(b). The explicit check matters: a small
// negative i would otherwise read header bytes instead of panicking.
func Get(b []byte, i int) int64 {
	if uint(i) >= uint(Len(b)) {
		panic("intset: Get index out of range")
	}
	return at(b, Width(b), i)
}

// Min returns the smallest value; Len(b) must be > 0.
func Min(b []byte) int64 { return Get(b, 0) }

// Max returns the largest value; Len(b) must be > 0.
func Max(b []byte) int64 { return Get(b, Len(b)-1) }

// Search returns the position of v, or where v would be inserted when it is
// absent. Like Redis's intsetSearch it answers values beyond either end
// without a binary search: appending ascending values (common for ids and
// timestamps) then costs two comparisons.
func Search(b []byte, v int64) (pos int, found bool) {
	n := Len(b)
	if n == 0 {
		return 0, false
	}
	w := Width(b)
	if v > at(b, w, n-1) {
		return n, false
	}
	if v < at(b, w, 0) {
		return 0, false
	}
	// One loop per width so the width switch is outside the hot loop.
	lo, hi := 0, n-1
	switch w {
	case 2:
		for lo <= hi {
			mid := int(uint(lo+hi) >> 1)
			cur := int64(int16(le.Uint16(b[headerSize+mid*2:])))
			switch {
			case v > cur:
				lo = mid + 1
			case v < cur:
				hi = mid - 1
			default:
				return mid, true
			}
		}
	case 4:
		for lo <= hi {
			mid := int(uint(lo+hi) >> 1)
			cur := int64(int32(le.Uint32(b[headerSize+mid*4:])))
			switch {
			case v > cur:
				lo = mid + 1
			case v < cur:
				hi = mid - 1
			default:
				return mid, true
			}
		}
	default:
		for lo <= hi {
			mid := int(uint(lo+hi) >> 1)
			cur := int64(le.Uint64(b[headerSize+mid*8:]))
			switch {
			case v > cur:
				lo = mid + 1
			case v < cur:
				hi = mid - 1
			default:
				return mid, true
			}
		}
	}
	return lo, false
}

// Contains reports whether v is in the set. A value wider than the set's
// width cannot be in it, which skips the search (Redis intsetFind).
func Contains(b []byte, v int64) bool {
	if WidthFor(v) > Width(b) {
		return false
	}
	_, found := Search(b, v)
	return found
}

// Add inserts v and reports whether it was absent. It returns the possibly
// moved slice, like append; when it must grow, the new capacity is the Go
// allocator's size class for the new size (alloc.Grow), not append's
// geometric growth, because sets are many and small.
func Add(b []byte, v int64) ([]byte, bool) {
	w, vw := Width(b), WidthFor(v)
	if vw > w {
		return upgradeAndAdd(b, v, w, vw), true
	}
	pos, found := Search(b, v)
	if found {
		return b, false
	}
	n := Len(b)
	if n >= maxLen {
		panic("intset: length field overflow")
	}
	b = alloc.Grow(b, w)
	b = b[:len(b)+w]
	o := headerSize + pos*w
	copy(b[o+w:], b[o:len(b)-w])
	put(b, w, pos, v)
	le.PutUint32(b[4:8], uint32(n+1))
	return b, true
}

// upgradeAndAdd widens every value to vw and adds v, which needs vw > w.
// A value too wide for the current width lies outside the current range,
// so it becomes the new min (v < 0) or max; Redis's intsetUpgradeAndAdd
// relies on the same fact to skip the search.
func upgradeAndAdd(b []byte, v int64, w, vw int) []byte {
	n := Len(b)
	if n >= maxLen {
		panic("intset: length field overflow")
	}
	size := SizeFor(n+1, vw)
	b = alloc.Grow(b, size-len(b))
	b = b[:size]
	prepend := 0
	if v < 0 {
		prepend = 1
	}
	// Back to front: every value moves to a higher offset, so a value is
	// read before anything overwrites it.
	for i := n - 1; i >= 0; i-- {
		put(b, vw, i+prepend, at(b, w, i))
	}
	if prepend == 1 {
		put(b, vw, 0, v)
	} else {
		put(b, vw, n, v)
	}
	le.PutUint32(b[0:4], uint32(vw))
	le.PutUint32(b[4:8], uint32(n+1))
	return b
}

// Remove deletes v and reports whether it was present. It shrinks the blob
// in place and keeps the capacity (a set that shrank often grows again), and
// it never lowers the width, as Redis does not: the width records every
// value ever added, and matching that keeps our bytes equal to Redis's.
func Remove(b []byte, v int64) ([]byte, bool) {
	w := Width(b)
	if WidthFor(v) > w {
		return b, false
	}
	pos, found := Search(b, v)
	if !found {
		return b, false
	}
	o := headerSize + pos*w
	copy(b[o:], b[o+w:])
	b = b[:len(b)-w]
	le.PutUint32(b[4:8], uint32(Len(b)-1))
	return b, true
}

// Iterate calls fn on each value in ascending order until fn returns false.
func Iterate(b []byte, fn func(v int64) bool) {
	n := Len(b)
	end := headerSize + n*Width(b)
	switch Width(b) {
	case 2:
		for o := headerSize; o < end; o += 2 {
			if !fn(int64(int16(le.Uint16(b[o:])))) {
				return
			}
		}
	case 4:
		for o := headerSize; o < end; o += 4 {
			if !fn(int64(int32(le.Uint32(b[o:])))) {
				return
			}
		}
	default:
		for o := headerSize; o < end; o += 8 {
			if !fn(int64(le.Uint64(b[o:]))) {
				return
			}
		}
	}
}

// FromSorted builds an intset of vals, which must be strictly ascending, at
// the smallest width that fits them (what Redis would have after adding
// them to an empty set). The capacity is exactly the allocator's size class
// for the blob, so a converted set wastes no more than the allocator does.
// It panics if vals is not strictly ascending: such input is a caller bug,
// and silently writing a corrupt blob would put it into snapshots.
func FromSorted(vals []int64) []byte {
	n := len(vals)
	if n >= maxLen {
		panic("intset: length field overflow")
	}
	w := 2
	if n > 0 {
		// Sorted, so the extremes decide the width.
		w = max(WidthFor(vals[0]), WidthFor(vals[n-1]))
	}
	size := SizeFor(n, w)
	b := make([]byte, size, alloc.RoundUp(size))
	le.PutUint32(b[0:4], uint32(w))
	le.PutUint32(b[4:8], uint32(n))
	for i, v := range vals {
		if i > 0 && v <= vals[i-1] {
			panic(fmt.Sprintf("intset: FromSorted: value %d at index %d is not above %d", v, i, vals[i-1]))
		}
		put(b, w, i, v)
	}
	return b
}

// Validate checks b the way Redis's intsetValidateIntegrity does before it
// trusts a loaded blob, in the same order: header present, legal width,
// length consistent with the size, and length not zero (Redis treats an
// empty intset on load as corruption). deep also checks that values are
// strictly ascending, which is what Search and every accessor rely on.
// It never panics and allocates only to build an error.
func Validate(b []byte, deep bool) error {
	if len(b) < headerSize {
		return fmt.Errorf("header truncated: blob is %d bytes, header needs %d: %w", len(b), headerSize, ErrCorrupt)
	}
	w := le.Uint32(b[0:4])
	if w != 2 && w != 4 && w != 8 {
		return fmt.Errorf("encoding %d at offset 0 is not 2, 4 or 8: %w", w, ErrCorrupt)
	}
	n := le.Uint32(b[4:8])
	// uint64 so a huge length cannot wrap around on any platform.
	if want := headerSize + uint64(n)*uint64(w); want != uint64(len(b)) {
		return fmt.Errorf("length %d at offset 4 with width %d needs %d bytes, blob is %d: %w",
			n, w, want, len(b), ErrCorrupt)
	}
	if n == 0 {
		return fmt.Errorf("length 0 at offset 4: empty intset: %w", ErrCorrupt)
	}
	if !deep {
		return nil
	}
	width := int(w)
	prev := at(b, width, 0)
	for i := 1; i < int(n); i++ {
		cur := at(b, width, i)
		if cur <= prev {
			return fmt.Errorf("value %d at index %d (offset %d) is not above previous value %d: %w",
				cur, i, headerSize+i*width, prev, ErrCorrupt)
		}
		prev = cur
	}
	return nil
}
