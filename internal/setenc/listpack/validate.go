package listpack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"

	"raftset/internal/strictint"
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Validate checks b the way Redis's lpValidateIntegrity does.
//
// Shallow: len(b) >= 7, total_bytes == len(b), last byte 0xFF.
//
// Deep, in addition: every entry has a known encoding, its length field and
// data lie inside the blob before the terminator, its backlen (which
// occupies the bytes lpEncodeBacklen would use for the entry size, as
// Redis's forward walk assumes) decodes, reading leftwards at most 5 bytes,
// to the entry size; the walk ends exactly at the last byte; and the header
// count equals the number of entries unless it is 65535. As in Redis the
// bit pattern of a backlen need not be the canonical one, only its value.
//
// Validate never panics and allocates nothing that depends on lengths
// claimed inside b. Every error wraps ErrCorrupt.
func Validate(b []byte, deep bool) error {
	if len(b) < minSize {
		return corrupt("blob of %d bytes is shorter than the %d-byte minimum", len(b), minSize)
	}
	if tb := binary.LittleEndian.Uint32(b); uint64(tb) != uint64(len(b)) {
		return corrupt("total_bytes header %d at offset 0 does not match blob length %d", tb, len(b))
	}
	if c := b[len(b)-1]; c != terminator {
		return corrupt("last byte 0x%02X at offset %d is not the 0xFF terminator", c, len(b)-1)
	}
	if !deep {
		return nil
	}
	_, err := walk(b)
	return err
}

// walk validates every entry and the header count, returning the number of
// entries.
func walk(b []byte) (int, error) {
	end := len(b) - 1 // offset of the terminator; entries must end at or before it
	count := 0
	p := HeaderSize
	for {
		c := b[p]
		if c == terminator {
			if p != end {
				return 0, corrupt("terminator byte at offset %d before the end of the blob (offset %d)", p, end)
			}
			break
		}
		// Bytes of the encoding's own header (first byte plus length field).
		var hdr int
		var l uint64 // encoding+data size
		switch {
		case c < enc6BitStr:
			hdr, l = 1, 1
		case c < enc13BitInt:
			hdr, l = 1, 1+uint64(c&0x3F)
		case c < enc12BitStr:
			hdr, l = 1, 2
		case c < enc32BitStr:
			hdr = 2
		case c == enc32BitStr:
			hdr = 5
		case c == enc16BitInt:
			hdr, l = 1, 3
		case c == enc24BitInt:
			hdr, l = 1, 4
		case c == enc32BitInt:
			hdr, l = 1, 5
		case c == enc64BitInt:
			hdr, l = 1, 9
		default:
			return 0, corrupt("invalid entry encoding 0x%02X at offset %d", c, p)
		}
		if p+hdr > end {
			return 0, corrupt("length field of entry at offset %d runs past the end", p)
		}
		switch hdr {
		case 2:
			l = 2 + (uint64(c&0x0F)<<8 | uint64(b[p+1]))
		case 5:
			l = 5 + uint64(binary.LittleEndian.Uint32(b[p+1:]))
		}
		size := l + uint64(backlenSize(l))
		if size > uint64(end-p) {
			return 0, corrupt("entry at offset %d of %d bytes (backlen included) runs past the end", p, size)
		}
		next := p + int(size)
		bl, n := decodeBacklen(b, next-1)
		if n == 0 {
			return 0, corrupt("backlen ending at offset %d of entry at offset %d is longer than 5 bytes", next-1, p)
		}
		if bl != l {
			return 0, corrupt("backlen ending at offset %d decodes to %d, entry at offset %d has size %d", next-1, bl, p, l)
		}
		count++
		p = next
	}
	if hc := int(binary.LittleEndian.Uint16(b[4:])); hc != unknownCount && hc != count {
		return 0, corrupt("header count %d at offset 4 does not match %d entries", hc, count)
	}
	return count, nil
}

var dupSeed = maphash.MakeSeed()

type hashPos struct {
	h uint64
	p int // entry offset + 1; 0 marks a free slot
}

// ValidateSet is Validate(b, true) plus Redis's set check
// (lpValidateIntegrityAndDups): no two entries have the same string form,
// so the integer 1 and the string "1" are duplicates. It allocates nothing
// for sets of up to 128 entries.
func ValidateSet(b []byte) error {
	if err := Validate(b, false); err != nil {
		return err
	}
	n, err := walk(b)
	if err != nil {
		return err
	}
	if n < 2 {
		return nil
	}
	// Open addressing over member hashes, at most half full: for the sets
	// that listpacks hold (≤ 128 members by default) the table lives on the
	// stack, and each member costs one hash and usually one probe.
	size := 8
	for size < 2*n {
		size *= 2
	}
	var stack [256]hashPos
	var tab []hashPos
	if size <= len(stack) {
		tab = stack[:size]
	} else {
		tab = make([]hashPos, size)
	}
	mask := uint64(size - 1)
	var buf, obuf [strictint.MaxLen]byte
	for p := First(b); p >= 0; p = Next(b, p) {
		m := memberView(buf[:0], b, p)
		h := maphash.Bytes(dupSeed, m)
		for i := h & mask; ; i = (i + 1) & mask {
			s := &tab[i]
			if s.p == 0 {
				s.h, s.p = h, p+1
				break
			}
			if s.h == h {
				if o := memberView(obuf[:0], b, s.p-1); bytes.Equal(o, m) {
					return corrupt("duplicate set member %q: entries at offsets %d and %d", string(m), s.p-1, p)
				}
			}
		}
	}
	return nil
}

// memberView is AppendMember that returns a string entry's bytes without
// copying them.
func memberView(buf []byte, b []byte, p int) []byte {
	s, v, isInt := Get(b, p)
	if isInt {
		return strictint.Append(buf, v)
	}
	return s
}
