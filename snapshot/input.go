package snapshot

import (
	"encoding/binary"
	"io"
	"math"
	"strconv"
)

// readBufSize is the reader's window. Anything up to this size is parsed in
// place; longer strings are copied out in chunks of this size, so memory
// follows the bytes actually present, never a length field's claim.
const readBufSize = 64 << 10

// maxStringLen rejects absurd length fields before any read is attempted. No
// listpack or intset reaches it (their size fields are 32-bit) and Redis's
// own string limit (proto-max-bulk-len) defaults to 512 MB.
const maxStringLen = min(1<<32-1, math.MaxInt)

// input is a buffered io.Reader that knows the file offset of every byte and
// keeps the CRC64 of the bytes consumed so far, which is what the trailer
// covers (bytes read ahead into the buffer are not yet included).
type input struct {
	r        io.Reader
	buf      []byte
	pos, end int    // buf[pos:end] is read but not consumed
	crcPos   int    // buf[:crcPos] has been folded into crc; crcPos <= pos
	base     int64  // file offset of buf[0]
	crc      uint64 // of everything before buf[crcPos]
	rerr     error  // sticky error from r
}

func newInput(r io.Reader) *input {
	return &input{r: r, buf: make([]byte, readBufSize)}
}

// offset is the file offset of the next unconsumed byte.
func (in *input) offset() int64 { return in.base + int64(in.pos) }

// checksum returns the CRC64 of every byte consumed so far.
func (in *input) checksum() uint64 {
	in.crc = crc64Update(in.crc, in.buf[in.crcPos:in.pos])
	in.crcPos = in.pos
	return in.crc
}

// fill makes at least n (<= len(buf)) unconsumed bytes available.
func (in *input) fill(n int) error {
	if in.end-in.pos >= n {
		return nil
	}
	if in.pos > 0 {
		in.checksum()
		copy(in.buf, in.buf[in.pos:in.end])
		in.base += int64(in.pos)
		in.end -= in.pos
		in.pos, in.crcPos = 0, 0
	}
	for in.end < n {
		if in.rerr != nil {
			if in.rerr == io.EOF {
				return corruptf(in.base+int64(in.end), io.ErrUnexpectedEOF, "file ends %d bytes short", n-in.end)
			}
			return in.rerr
		}
		k, err := in.r.Read(in.buf[in.end:])
		in.end += k
		if err != nil {
			if err != io.EOF {
				err = &readError{off: in.base + int64(in.end), err: err}
			}
			in.rerr = err
		}
	}
	return nil
}

// readError is an I/O failure of the underlying reader, not corruption.
type readError struct {
	off int64
	err error
}

func (e *readError) Error() string {
	return "snapshot: read at offset " + strconv.FormatInt(e.off, 10) + ": " + e.err.Error()
}
func (e *readError) Unwrap() error { return e.err }

func (in *input) readByte() (byte, error) {
	if in.pos == in.end {
		if err := in.fill(1); err != nil {
			return 0, err
		}
	}
	c := in.buf[in.pos]
	in.pos++
	return c, nil
}

// view consumes n <= len(buf) bytes and returns them in place; the slice is
// valid until the next read.
func (in *input) view(n int) ([]byte, error) {
	if err := in.fill(n); err != nil {
		return nil, err
	}
	p := in.buf[in.pos : in.pos+n]
	in.pos += n
	return p, nil
}

// owned consumes n bytes into a new slice. Above the window size the slice
// grows as data arrives, so a truncated file fails having allocated at most
// about twice what it really holds.
func (in *input) owned(n int) ([]byte, error) {
	if n <= len(in.buf) {
		p, err := in.view(n)
		if err != nil {
			return nil, err
		}
		out := make([]byte, n)
		copy(out, p)
		return out, nil
	}
	out := make([]byte, 0, len(in.buf))
	for len(out) < n {
		if in.pos == in.end {
			if err := in.fill(1); err != nil {
				return nil, err
			}
		}
		k := min(in.end-in.pos, n-len(out))
		out = append(out, in.buf[in.pos:in.pos+k]...)
		in.pos += k
	}
	return out, nil
}

// skip consumes n bytes.
func (in *input) skip(n uint64) error {
	for n > 0 {
		if in.pos == in.end {
			if err := in.fill(1); err != nil {
				return err
			}
		}
		k := int(min(uint64(in.end-in.pos), n))
		in.pos += k
		n -= uint64(k)
	}
	return nil
}

// readLength reads an RDB length (src/rdb.c rdbLoadLenByRef). special
// reports a first byte of 11xxxxxx: then the value is a string encoding
// (encInt8..encLZF), not a length.
func (in *input) readLength() (n uint64, special bool, err error) {
	off := in.offset()
	c, err := in.readByte()
	if err != nil {
		return 0, false, err
	}
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3F), false, nil
	case 1:
		d, err := in.readByte()
		if err != nil {
			return 0, false, err
		}
		return uint64(c&0x3F)<<8 | uint64(d), false, nil
	case 3:
		return uint64(c & 0x3F), true, nil
	}
	switch c {
	case 0x80:
		p, err := in.view(4)
		if err != nil {
			return 0, false, err
		}
		return uint64(binary.BigEndian.Uint32(p)), false, nil
	case 0x81:
		p, err := in.view(8)
		if err != nil {
			return 0, false, err
		}
		return binary.BigEndian.Uint64(p), false, nil
	}
	return 0, false, corruptf(off, nil, "unknown length encoding 0x%02X", c)
}

// readLen reads a length where a string encoding is not allowed.
func (in *input) readLen(what string) (uint64, error) {
	off := in.offset()
	n, special, err := in.readLength()
	if err != nil {
		return 0, err
	}
	if special {
		return 0, corruptf(off, nil, "%s: string encoding 0x%02X where a length belongs", what, 0xC0|n)
	}
	return n, nil
}

// strDecoder decodes RDB strings. It keeps a scratch buffer so that members of
// a type-2 set and other transient strings cost no allocation.
type strDecoder struct {
	in      *input
	scratch []byte // int-encoded text and decompressed LZF for views
}

// read decodes one string (src/rdb.c rdbGenericLoadStringObject). With own
// the result is a fresh slice the caller keeps; otherwise it is valid only
// until the next read.
func (s *strDecoder) read(what string, own bool) ([]byte, error) {
	in := s.in
	off := in.offset()
	n, special, err := in.readLength()
	if err != nil {
		return nil, err
	}
	if !special {
		if n > maxStringLen {
			return nil, corruptf(off, nil, "%s: length %d is beyond any RDB string", what, n)
		}
		if own || int(n) > len(in.buf) {
			return in.owned(int(n))
		}
		return in.view(int(n))
	}
	var v int64
	switch n {
	case encInt8:
		c, err := in.readByte()
		if err != nil {
			return nil, err
		}
		v = int64(int8(c))
	case encInt16:
		p, err := in.view(2)
		if err != nil {
			return nil, err
		}
		v = int64(int16(binary.LittleEndian.Uint16(p)))
	case encInt32:
		p, err := in.view(4)
		if err != nil {
			return nil, err
		}
		v = int64(int32(binary.LittleEndian.Uint32(p)))
	case encLZF:
		return s.readLZF(what, off, own)
	default:
		return nil, corruptf(off, nil, "%s: unknown string encoding %d", what, n)
	}
	if own {
		return strconv.AppendInt(nil, v, 10), nil
	}
	s.scratch = strconv.AppendInt(s.scratch[:0], v, 10)
	return s.scratch, nil
}

func (s *strDecoder) readLZF(what string, off int64, own bool) ([]byte, error) {
	in := s.in
	clen, err := in.readLen(what + ": LZF compressed length")
	if err != nil {
		return nil, err
	}
	ulen, err := in.readLen(what + ": LZF original length")
	if err != nil {
		return nil, err
	}
	switch {
	case clen == 0 || ulen == 0:
		return nil, corruptf(off, nil, "%s: LZF string with compressed length %d, original length %d", what, clen, ulen)
	case clen > maxStringLen || ulen > maxStringLen:
		return nil, corruptf(off, nil, "%s: LZF lengths %d/%d are beyond any RDB string", what, clen, ulen)
	case ulen > clen*lzfMaxRatio:
		return nil, corruptf(off, nil, "%s: LZF original length %d cannot come from %d compressed bytes", what, ulen, clen)
	}
	var c []byte
	if int(clen) <= len(in.buf) {
		c, err = in.view(int(clen))
	} else {
		c, err = in.owned(int(clen))
	}
	if err != nil {
		return nil, err
	}
	var out []byte
	if own {
		out = make([]byte, ulen)
	} else {
		if cap(s.scratch) < int(ulen) {
			s.scratch = make([]byte, ulen)
		}
		out = s.scratch[:ulen]
	}
	if err := lzfDecompress(c, out); err != nil {
		return nil, corruptf(off, err, "%s: invalid LZF string", what)
	}
	return out, nil
}

// skipString steps over one string without decoding it.
func (s *strDecoder) skipString(what string) error {
	in := s.in
	off := in.offset()
	n, special, err := in.readLength()
	if err != nil {
		return err
	}
	if !special {
		return in.skip(n)
	}
	switch n {
	case encInt8:
		return in.skip(1)
	case encInt16:
		return in.skip(2)
	case encInt32:
		return in.skip(4)
	case encLZF:
		clen, err := in.readLen(what + ": LZF compressed length")
		if err != nil {
			return err
		}
		if _, err := in.readLen(what + ": LZF original length"); err != nil {
			return err
		}
		return in.skip(clen)
	}
	return corruptf(off, nil, "%s: unknown string encoding %d", what, n)
}
