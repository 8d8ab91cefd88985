package listpack

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"raftset/internal/alloc"
	"raftset/internal/strictint"
)

// ErrCorrupt is wrapped by every error Validate and ValidateSet return.
var ErrCorrupt = errors.New("listpack: corrupt")

const (
	// HeaderSize is the size of total_bytes (u32) plus num_elements (u16).
	HeaderSize = 6
	// MaxSafeBytes is Redis's LISTPACK_MAX_SAFETY_SIZE: lpSafeToAdd refuses
	// to grow a listpack past 1 GiB.
	MaxSafeBytes = 1 << 30

	terminator   = 0xFF
	unknownCount = 65535
	minSize      = HeaderSize + 1
)

// Encoding first bytes and masks (redis/redis src/listpack.c).
const (
	enc7BitUint   = 0x00 // 0xxxxxxx
	enc6BitStr    = 0x80 // 10xxxxxx
	enc13BitInt   = 0xC0 // 110xxxxx
	enc12BitStr   = 0xE0 // 1110xxxx
	enc32BitStr   = 0xF0
	enc16BitInt   = 0xF1
	enc24BitInt   = 0xF2
	enc32BitInt   = 0xF3
	enc64BitInt   = 0xF4
	maxStr6Len    = 63
	maxStr12Len   = 4095
	int13Min      = -4096
	int13Max      = 4095
	int24Min      = -1 << 23
	int24Max      = 1<<23 - 1
	backlenMax1   = 127       // L <= 127: 1 byte
	backlenLimit2 = 16383     // L < 16383: 2 bytes
	backlenLimit3 = 2097151   // L < 2097151: 3 bytes
	backlenLimit4 = 268435455 // L < 268435455: 4 bytes, else 5
)

// New returns an empty listpack: 07 00 00 00 00 00 FF.
func New() []byte {
	b := make([]byte, minSize, alloc.RoundUp(minSize))
	b[0] = minSize
	b[minSize-1] = terminator
	return b
}

// Bytes returns the total_bytes header field (0 for a blob shorter than the
// header).
func Bytes(b []byte) int {
	if len(b) < 4 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b))
}

// Len returns the number of entries: the header count, or a walk of the
// entries when the header holds 65535 ("unknown"). A blob shorter than a
// valid empty listpack (including nil) has 0 entries.
func Len(b []byte) int {
	if len(b) < minSize {
		return 0
	}
	if n := int(binary.LittleEndian.Uint16(b[4:])); n != unknownCount {
		return n
	}
	n := 0
	for p := First(b); p >= 0; p = Next(b, p) {
		n++
	}
	return n
}

// First returns the offset of the first entry, or -1 if b has none.
func First(b []byte) int {
	if len(b) <= minSize {
		return -1
	}
	return HeaderSize
}

// Last returns the offset of the last entry, or -1 if b has none.
func Last(b []byte) int {
	if len(b) <= minSize {
		return -1
	}
	return Prev(b, len(b)-1)
}

// Next returns the offset of the entry after the one at p, or -1 when p is
// the last entry.
func Next(b []byte, p int) int {
	p += entrySize(b, p)
	if b[p] == terminator {
		return -1
	}
	return p
}

// Prev returns the offset of the entry before p, or -1 when p is the first
// entry. p may also be the terminator's offset (len(b)-1), giving the last
// entry.
func Prev(b []byte, p int) int {
	if p <= HeaderSize {
		return -1
	}
	l, _ := decodeBacklen(b, p-1)
	return p - int(l) - backlenSize(l)
}

// Get decodes the entry at p. For a string entry it returns the bytes
// (aliasing b, capacity clipped so appending to s cannot overwrite b) and
// isInt false; for an integer entry it returns s == nil, the value and
// isInt true.
func Get(b []byte, p int) (s []byte, v int64, isInt bool) {
	c := b[p]
	switch {
	case c < enc6BitStr:
		return nil, int64(c), true
	case c < enc13BitInt:
		n := p + 1 + int(c&0x3F)
		return b[p+1 : n : n], 0, false
	case c < enc12BitStr:
		return nil, int13(c, b[p+1]), true
	case c < enc32BitStr:
		n := p + 2 + (int(c&0x0F)<<8 | int(b[p+1]))
		return b[p+2 : n : n], 0, false
	}
	switch c {
	case enc32BitStr:
		n := p + 5 + int(binary.LittleEndian.Uint32(b[p+1:]))
		return b[p+5 : n : n], 0, false
	case enc16BitInt:
		return nil, int64(int16(binary.LittleEndian.Uint16(b[p+1:]))), true
	case enc24BitInt:
		u := uint32(b[p+1]) | uint32(b[p+2])<<8 | uint32(b[p+3])<<16
		return nil, int64(int32(u<<8) >> 8), true
	case enc32BitInt:
		return nil, int64(int32(binary.LittleEndian.Uint32(b[p+1:]))), true
	case enc64BitInt:
		return nil, int64(binary.LittleEndian.Uint64(b[p+1:])), true
	}
	panic("listpack: Get on invalid entry at offset " + strconv.Itoa(p))
}

// AppendMember appends the string form of the entry at p to dst: the bytes
// of a string entry, the decimal text of an integer entry.
func AppendMember(dst []byte, b []byte, p int) []byte {
	s, v, isInt := Get(b, p)
	if isInt {
		return strictint.Append(dst, v)
	}
	return append(dst, s...)
}

// Seek returns the offset of the entry with the given index (negative
// indexes count from the end: -1 is the last entry), or -1 when out of
// range. It walks from whichever end is nearer.
func Seek(b []byte, index int) int {
	n := Len(b)
	if index < 0 {
		index += n
	}
	if index < 0 || index >= n {
		return -1
	}
	if index <= n/2 {
		p := First(b)
		for ; index > 0; index-- {
			p = Next(b, p)
		}
		return p
	}
	p := Last(b)
	for i := n - 1; i > index; i-- {
		p = Prev(b, p)
	}
	return p
}

// Find returns the offset of the first entry equal to member, or -1. As in
// Redis's lpFind, string entries compare by bytes and integer entries by
// value against member's strict-integer value (so member "01" never equals
// the integer 1).
func Find(b []byte, member []byte) int {
	if len(b) <= minSize {
		return -1
	}
	iv, isInt := strictint.Parse(member)
	if !isInt {
		return findString(b, member)
	}
	n := len(member)
	end := len(b) - 1
	p := HeaderSize
	for p < end {
		c := b[p]
		switch {
		case c < enc6BitStr: // 7-bit uint, 1 byte + 1 backlen
			if isInt && iv == int64(c) {
				return p
			}
			p += 2
		case c < enc13BitInt: // 6-bit string: L <= 64, 1-byte backlen
			l := int(c & 0x3F)
			if l == n && string(b[p+1:p+1+l]) == string(member) {
				return p
			}
			p += l + 2
		case c < enc12BitStr: // 13-bit int
			if isInt && iv == int13(c, b[p+1]) {
				return p
			}
			p += 3
		case c < enc32BitStr: // 12-bit string
			l := int(c&0x0F)<<8 | int(b[p+1])
			if l == n && string(b[p+2:p+2+l]) == string(member) {
				return p
			}
			p += l + 2 + backlenSize(uint64(l+2))
		case c == enc32BitStr:
			l := int(binary.LittleEndian.Uint32(b[p+1:]))
			if l == n && string(b[p+5:p+5+l]) == string(member) {
				return p
			}
			p += l + 5 + backlenSize(uint64(l+5))
		case c == enc16BitInt:
			if isInt && iv == int64(int16(binary.LittleEndian.Uint16(b[p+1:]))) {
				return p
			}
			p += 4
		case c == enc24BitInt:
			if isInt {
				u := uint32(b[p+1]) | uint32(b[p+2])<<8 | uint32(b[p+3])<<16
				if iv == int64(int32(u<<8)>>8) {
					return p
				}
			}
			p += 5
		case c == enc32BitInt:
			if isInt && iv == int64(int32(binary.LittleEndian.Uint32(b[p+1:]))) {
				return p
			}
			p += 6
		case c == enc64BitInt:
			if isInt && iv == int64(binary.LittleEndian.Uint64(b[p+1:])) {
				return p
			}
			p += 10
		default: // invalid encoding or a stray terminator: not a valid blob
			return -1
		}
	}
	return -1
}

// skipTab[c] is the whole size (backlen included) of an entry whose first
// byte c alone determines it: integers and 6-bit strings. It is 0 for 12-
// and 32-bit strings, invalid encodings and the terminator.
var skipTab = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c < enc6BitStr:
			t[c] = 2
		case c < enc13BitInt:
			t[c] = uint8(c&0x3F) + 2
		case c < enc12BitStr:
			t[c] = 3
		}
	}
	t[enc16BitInt], t[enc24BitInt], t[enc32BitInt], t[enc64BitInt] = 4, 5, 6, 10
	return t
}()

// findString is Find for a member that is not a strict integer: only
// string entries can match, so integer entries are skipped by their first
// byte. A member shorter than 64 bytes is first matched against the first
// byte of its canonical 6-bit string entry (which encodes the length), then
// by its last byte, before the bytes are compared.
func findString(b []byte, member []byte) int {
	n := len(member)
	end := len(b) - 1
	want := -1 // first byte of a 6-bit string entry of length n
	var last byte
	if n <= maxStr6Len {
		want = enc6BitStr | n
		if n > 0 {
			last = member[n-1]
		}
	}
	p := HeaderSize
	for p < end {
		c := b[p]
		if int(c) == want {
			if b[p+n] == last || n == 0 {
				if string(b[p+1:p+1+n]) == string(member) {
					return p
				}
			}
			p += n + 2
			continue
		}
		if s := skipTab[c]; s != 0 {
			p += int(s)
			continue
		}
		var hdr, l int
		switch {
		case c >= enc12BitStr && c < enc32BitStr:
			hdr, l = 2, int(c&0x0F)<<8|int(b[p+1])
		case c == enc32BitStr:
			hdr, l = 5, int(binary.LittleEndian.Uint32(b[p+1:]))
		default: // invalid encoding or a stray terminator: not a valid blob
			return -1
		}
		if l == n && string(b[p+hdr:p+hdr+l]) == string(member) {
			return p
		}
		p += hdr + l + backlenSize(uint64(hdr+l))
	}
	return -1
}

// EntrySize returns the number of bytes Append(b, member) adds to b,
// backlen included. Use it with MaxSafeBytes for Redis's lpSafeToAdd check.
func EntrySize(member []byte) int {
	if v, ok := strictint.Parse(member); ok {
		return intEntrySize(v)
	}
	l := strEncSize(len(member))
	return l + backlenSize(uint64(l))
}

// SafeToAdd reports whether b can grow by add bytes without passing Redis's
// 1 GiB listpack limit (lpSafeToAdd).
func SafeToAdd(b []byte, add int) bool {
	return Bytes(b)+add <= MaxSafeBytes
}

// Append appends member as a new last entry and returns the possibly moved
// blob. The member is stored as the smallest integer entry exactly when
// strictint.Parse accepts it, otherwise as a 6-, 12- or 32-bit string
// entry. An empty b (nil) is treated as New().
func Append(b []byte, member []byte) []byte {
	if v, ok := strictint.Parse(member); ok {
		return AppendInt(b, v)
	}
	l := strEncSize(len(member))
	b = grow(b, l+backlenSize(uint64(l)))
	b = appendStrEntry(b[:len(b)-1], member)
	return finishAppend(b)
}

// AppendInt appends the integer v as a new last entry (smallest integer
// encoding) and returns the possibly moved blob.
func AppendInt(b []byte, v int64) []byte {
	b = grow(b, intEntrySize(v))
	b = appendIntEntry(b[:len(b)-1], v)
	return finishAppend(b)
}

// FromMembers builds a listpack holding members in order, with one
// allocation whose capacity is the allocator's size class for its length
// (what the allocator reserves anyway; no geometric slack).
func FromMembers(members [][]byte) []byte {
	total := minSize
	for _, m := range members {
		total += EntrySize(m)
	}
	b := make([]byte, HeaderSize, alloc.RoundUp(total))
	for _, m := range members {
		if v, ok := strictint.Parse(m); ok {
			b = appendIntEntry(b, v)
		} else {
			b = appendStrEntry(b, m)
		}
	}
	b = append(b, terminator)
	setTotal(b)
	n := len(members)
	if n > unknownCount {
		n = unknownCount
	}
	binary.LittleEndian.PutUint16(b[4:], uint16(n))
	return b
}

// Delete removes the entry at p in place (the tail moves down), updates the
// header and returns the shortened blob; the capacity is kept. As in Redis,
// a count of 65535 ("unknown") stays 65535.
func Delete(b []byte, p int) []byte {
	size := entrySize(b, p)
	copy(b[p:], b[p+size:])
	b = b[:len(b)-size]
	setTotal(b)
	if n := binary.LittleEndian.Uint16(b[4:]); n != unknownCount {
		binary.LittleEndian.PutUint16(b[4:], n-1)
	}
	return b
}

// grow makes room for n more bytes (a nil or too-short b becomes New()).
func grow(b []byte, n int) []byte {
	if len(b) < minSize {
		b = New()
	}
	return alloc.Grow(b, n)
}

// finishAppend writes the terminator and updates both header fields after
// an entry was appended in place of the old terminator.
func finishAppend(b []byte) []byte {
	b = append(b, terminator)
	setTotal(b)
	if n := binary.LittleEndian.Uint16(b[4:]); n != unknownCount {
		binary.LittleEndian.PutUint16(b[4:], n+1)
	}
	return b
}

func setTotal(b []byte) {
	if uint64(len(b)) > math.MaxUint32 {
		panic("listpack: blob larger than 4 GiB")
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
}

func strEncSize(n int) int {
	switch {
	case n <= maxStr6Len:
		return 1 + n
	case n <= maxStr12Len:
		return 2 + n
	}
	return 5 + n
}

func intEncSize(v int64) int {
	switch {
	case v >= 0 && v <= 127:
		return 1
	case v >= int13Min && v <= int13Max:
		return 2
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return 3
	case v >= int24Min && v <= int24Max:
		return 4
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return 5
	}
	return 9
}

func intEntrySize(v int64) int { return intEncSize(v) + 1 } // L <= 9: 1-byte backlen

// appendStrEntry appends a string entry (encoding, bytes, backlen).
func appendStrEntry(b []byte, s []byte) []byte {
	n := len(s)
	switch {
	case n <= maxStr6Len:
		b = append(b, enc6BitStr|byte(n))
	case n <= maxStr12Len:
		b = append(b, enc12BitStr|byte(n>>8), byte(n))
	default:
		b = append(b, enc32BitStr)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	b = append(b, s...)
	return appendBacklen(b, uint64(strEncSize(n)))
}

// appendIntEntry appends the smallest integer entry for v, with backlen.
func appendIntEntry(b []byte, v int64) []byte {
	switch l := intEncSize(v); l {
	case 1:
		return append(b, byte(v), 1)
	case 2:
		u := uint64(v) & 0x1FFF
		return append(b, enc13BitInt|byte(u>>8), byte(u), 2)
	case 3:
		return append(b, enc16BitInt, byte(v), byte(v>>8), 3)
	case 4:
		return append(b, enc24BitInt, byte(v), byte(v>>8), byte(v>>16), 4)
	case 5:
		return append(b, enc32BitInt, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), 5)
	}
	b = append(b, enc64BitInt)
	b = binary.LittleEndian.AppendUint64(b, uint64(v))
	return append(b, 9)
}

// backlenSize is the size of Redis's lpEncodeBacklen(l) (note the "<").
func backlenSize(l uint64) int {
	switch {
	case l <= backlenMax1:
		return 1
	case l < backlenLimit2:
		return 2
	case l < backlenLimit3:
		return 3
	case l < backlenLimit4:
		return 4
	}
	return 5
}

// appendBacklen appends l in 7-bit groups, most significant first, every
// byte after the first with bit 7 set (lpEncodeBacklen).
func appendBacklen(b []byte, l uint64) []byte {
	n := backlenSize(l)
	b = append(b, byte(l>>(7*(n-1))&127))
	for i := n - 2; i >= 0; i-- {
		b = append(b, byte(l>>(7*i)&127)|128)
	}
	return b
}

// decodeBacklen decodes the backlen whose last byte is at b[i], reading
// leftwards (lpDecodeBacklen). It returns the value and the number of bytes
// read, or n == 0 when the encoding runs past 5 bytes or the start of b.
func decodeBacklen(b []byte, i int) (l uint64, n int) {
	for shift := 0; shift <= 28; shift += 7 {
		if i < 0 {
			return 0, 0
		}
		c := b[i]
		l |= uint64(c&127) << shift
		n++
		if c&128 == 0 {
			return l, n
		}
		i--
	}
	return 0, 0
}

// entrySize returns the whole size (backlen included) of the valid entry
// at p.
func entrySize(b []byte, p int) int {
	if s := skipTab[b[p]]; s != 0 {
		return int(s)
	}
	l := encSize(b, p)
	return l + backlenSize(uint64(l))
}

// encSize returns the size of the encoding+data of the valid entry at p.
func encSize(b []byte, p int) int {
	c := b[p]
	switch {
	case c < enc6BitStr:
		return 1
	case c < enc13BitInt:
		return 1 + int(c&0x3F)
	case c < enc12BitStr:
		return 2
	case c < enc32BitStr:
		return 2 + (int(c&0x0F)<<8 | int(b[p+1]))
	}
	switch c {
	case enc32BitStr:
		return 5 + int(binary.LittleEndian.Uint32(b[p+1:]))
	case enc16BitInt:
		return 3
	case enc24BitInt:
		return 4
	case enc32BitInt:
		return 5
	case enc64BitInt:
		return 9
	}
	panic("listpack: invalid entry encoding at offset " + strconv.Itoa(p))
}

func int13(c, next byte) int64 {
	u := int64(c&0x1F)<<8 | int64(next)
	if u >= 4096 {
		u -= 8192
	}
	return u
}
