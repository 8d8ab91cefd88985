package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"raftset/internal/setenc"
	"raftset/internal/strictint"
)

// AUX fields that mark raftset's own files.
const (
	// AuxRaftsetVer marks a file written by raftset as a snapshot of its own
	// state. Its presence makes the Reader load sets with setenc.Exact: every
	// set keeps the encoding and member order it was written with, because a
	// replica restored from a snapshot must equal one that replayed the log,
	// including sets that deletions or a limit change left in a larger
	// encoding than Redis would rebuild on load. Redis ignores the field.
	AuxRaftsetVer = "raftset-ver"
	// RaftsetFormat is the newest snapshot format this build reads; a
	// higher number is a NewerFormatError, anything but 1..RaftsetFormat
	// corruption. Format 2 is a snapshot with hash slot states (the
	// state machine's raftset-slots field): a build that reads only format
	// 1 would ignore the field and serve slots its shard gave away, so it
	// must refuse the file instead. Files without slot states are written
	// as format 1 (WriterOptions.Format), readable by every build.
	RaftsetFormat = 2
)

// DefaultRedisVer is the redis-ver AUX value written unless the caller picks
// one: tools print it, Redis itself ignores it.
const DefaultRedisVer = "7.2.0"

// writeBufSize is how much the Writer gathers before one Write to the
// underlying writer.
const writeBufSize = 1 << 20

// directWriteMin is the size from which a string bypasses the buffer.
const directWriteMin = 64 << 10

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Version is the RDB version: 0 or 11 (Redis 7.2 and later load it; it
	// is the default), or 10 for an export Redis 7.0 can load, in which
	// listpack sets are written as type-2 records (Redis 7.0 has no
	// listpack set) and which carries no raftset-ver field, since loading it
	// cannot give back the exact encodings.
	Version int
	// Compress LZF-compresses strings longer than 20 bytes when that saves
	// at least 4 bytes, as Redis does with rdbcompression yes (its default).
	Compress bool
	// Ctime is the ctime AUX field; the zero value means time.Now(). Fix it
	// to make output reproducible.
	Ctime time.Time
	// UsedMem is the used-mem AUX field.
	UsedMem int64
	// RedisVer is the redis-ver AUX field; "" means DefaultRedisVer.
	RedisVer string
	// Aux are the caller's own fields (for example the Raft index, term and
	// configuration of a snapshot), written after the standard ones. Their
	// keys must differ from the standard ones and from each other.
	Aux []AuxField
	// BareAux writes only Aux: no redis-ver, redis-bits, ctime, used-mem,
	// aof-base and no raftset-ver, so the file reads back with Redis's load
	// conversions. For fixtures that must match bytes written elsewhere.
	BareAux bool
	// Format is the raftset-ver value, 1..RaftsetFormat; 0 means 1. The
	// caller picks the lowest format that carries its AUX fields.
	Format int
}

// Writer writes an RDB file: NewWriter, then for each non-empty database
// SelectDB followed by its keys, then Close. Output is buffered (1 MiB) and
// checksummed as it goes; memory use is the buffer plus the largest value.
// The first error is sticky and returned by every later call.
type Writer struct {
	w        io.Writer
	version  int
	compress bool
	buf      []byte
	crc      uint64
	lzf      lzfCompressor
	lzfOut   []byte
	err      error
	closed   bool
}

// NewWriter writes the header and AUX fields.
func NewWriter(w io.Writer, opt WriterOptions) (*Writer, error) {
	v := opt.Version
	if v == 0 {
		v = VersionRedis72
	}
	if v != VersionRedis72 && v != VersionRedis70 {
		return nil, fmt.Errorf("snapshot: cannot write RDB version %d (only %d or %d)", v, VersionRedis70, VersionRedis72)
	}
	aux := opt.Aux
	if !opt.BareAux {
		ver := opt.RedisVer
		if ver == "" {
			ver = DefaultRedisVer
		}
		ctime := opt.Ctime
		if ctime.IsZero() {
			ctime = time.Now()
		}
		// The order of src/rdb.c rdbSaveInfoAuxFields (no replication info).
		std := []AuxField{
			{"redis-ver", ver},
			{"redis-bits", "64"},
			{"ctime", strconv.FormatInt(ctime.Unix(), 10)},
			{"used-mem", strconv.FormatInt(opt.UsedMem, 10)},
			{"aof-base", "0"},
		}
		if v >= VersionRedis72 {
			f := max(opt.Format, 1)
			if f > RaftsetFormat {
				return nil, fmt.Errorf("snapshot: format %d is newer than this build writes (%d)", f, RaftsetFormat)
			}
			std = append(std, AuxField{AuxRaftsetVer, strconv.Itoa(f)})
		}
		aux = append(std, opt.Aux...)
	}
	seen := make(map[string]bool, len(aux))
	for _, f := range aux {
		if seen[f.Key] {
			return nil, fmt.Errorf("snapshot: AUX field %q given twice (or clashes with a standard field)", f.Key)
		}
		seen[f.Key] = true
	}
	wr := &Writer{w: w, version: v, compress: opt.Compress, buf: make([]byte, 0, 64<<10)}
	wr.buf = fmt.Appendf(wr.buf, "REDIS%04d", v)
	for _, f := range aux {
		wr.buf = append(wr.buf, OpAux)
		wr.writeString([]byte(f.Key))
		wr.writeString([]byte(f.Value))
	}
	if err := wr.maybeFlush(); err != nil {
		return nil, err
	}
	return wr, nil
}

var errClosed = errors.New("snapshot: write after Close")

func (w *Writer) check() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	return nil
}

// SelectDB starts database db, which will hold keys keys, expires of them
// with a deadline (the RESIZEDB hint a loader pre-sizes with). Redis writes
// only non-empty databases, in increasing order.
func (w *Writer) SelectDB(db, keys, expires int) error {
	if err := w.check(); err != nil {
		return err
	}
	if db < 0 || keys < 0 || expires < 0 {
		return fmt.Errorf("snapshot: SelectDB(%d, %d, %d): negative argument", db, keys, expires)
	}
	w.buf = append(w.buf, OpSelectDB)
	w.buf = appendLength(w.buf, uint64(db))
	w.buf = append(w.buf, OpResizeDB)
	w.buf = appendLength(w.buf, uint64(keys))
	w.buf = appendLength(w.buf, uint64(expires))
	return w.maybeFlush()
}

// WriteString writes a string key. expireAtMs is an absolute Unix time in
// milliseconds, or NoExpiry (any negative value).
func (w *Writer) WriteString(key, value []byte, expireAtMs int64) error {
	if err := w.check(); err != nil {
		return err
	}
	w.beginKey(TypeString, key, expireAtMs)
	w.writeString(value)
	return w.maybeFlush()
}

// WriteSet writes a set key in its own encoding: an intset as type 11, a
// listpack as type 20 (type 2 in a version-10 export), a hashtable as type 2
// with its members in storage order, which the Reader restores exactly.
func (w *Writer) WriteSet(key []byte, s *setenc.Set, expireAtMs int64) error {
	if err := w.check(); err != nil {
		return err
	}
	if s == nil || s.Len() == 0 {
		// Redis never stores an empty set, and drops one on load.
		return fmt.Errorf("snapshot: WriteSet(%q): empty set", key)
	}
	t := w.setType(s)
	w.beginKey(t, key, expireAtMs)
	w.writeSetValue(t, s)
	return w.maybeFlush()
}

// setType is the record type WriteSet writes s as.
func (w *Writer) setType(s *setenc.Set) byte {
	switch enc := s.Encoding(); {
	case enc == setenc.Intset:
		return TypeSetIntset
	case enc == setenc.Listpack && w.version >= VersionRedis72:
		return TypeSetListpack
	}
	return TypeSetHashtable
}

// writeSetValue writes the value of a set record of type t.
func (w *Writer) writeSetValue(t byte, s *setenc.Set) {
	switch t {
	case TypeSetIntset, TypeSetListpack:
		w.writeString(s.Blob())
	default:
		w.buf = appendLength(w.buf, uint64(s.Len()))
		s.Iterate(func(m []byte) bool {
			w.writeString(m)
			if len(w.buf) >= writeBufSize {
				w.flush()
			}
			return w.err == nil
		})
	}
}

// Close writes the EOF opcode and the checksum and flushes. It does not
// close the underlying writer.
func (w *Writer) Close() error {
	if err := w.check(); err != nil {
		return err
	}
	w.closed = true
	w.buf = append(w.buf, OpEOF)
	if err := w.flush(); err != nil {
		return err
	}
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], w.crc)
	return w.emit(t[:], false)
}

func (w *Writer) beginKey(t byte, key []byte, expireAtMs int64) {
	if expireAtMs >= 0 {
		w.buf = append(w.buf, OpExpireTimeMs)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(expireAtMs))
	}
	w.buf = append(w.buf, t)
	w.writeString(key)
}

// writeString writes s the way src/rdb.c rdbSaveRawString does, so that our
// bytes are Redis's bytes: a strict integer of at most 11 characters that
// fits int32 as INT8/16/32; else, with compression, an LZF form when s is
// longer than 20 bytes and compresses to at most len-4 bytes; else raw.
func (w *Writer) writeString(s []byte) {
	if len(s) <= 11 {
		if v, ok := strictint.Parse(s); ok {
			switch {
			case v >= -1<<7 && v < 1<<7:
				w.buf = append(w.buf, 0xC0|encInt8, byte(v))
				return
			case v >= -1<<15 && v < 1<<15:
				w.buf = append(w.buf, 0xC0|encInt16)
				w.buf = binary.LittleEndian.AppendUint16(w.buf, uint16(v))
				return
			case v >= -1<<31 && v < 1<<31:
				w.buf = append(w.buf, 0xC0|encInt32)
				w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(v))
				return
			}
		}
	}
	if w.compress && len(s) > 20 {
		budget := len(s) - 4
		if cap(w.lzfOut) < budget {
			w.lzfOut = make([]byte, budget, max(budget, 2*cap(w.lzfOut)))
		}
		if n := w.lzf.compress(s, w.lzfOut[:budget]); n > 0 {
			w.buf = append(w.buf, 0xC0|encLZF)
			w.buf = appendLength(w.buf, uint64(n))
			w.buf = appendLength(w.buf, uint64(len(s)))
			w.appendBytes(w.lzfOut[:n])
			return
		}
	}
	w.buf = appendLength(w.buf, uint64(len(s)))
	w.appendBytes(s)
}

// appendBytes adds p to the output, sending a large p straight to the
// underlying writer rather than through the buffer.
func (w *Writer) appendBytes(p []byte) {
	if len(p) < directWriteMin {
		w.buf = append(w.buf, p...)
		return
	}
	if w.flush() == nil {
		w.emit(p, true)
	}
}

func (w *Writer) maybeFlush() error {
	if len(w.buf) >= writeBufSize {
		return w.flush()
	}
	return w.err
}

func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	err := w.emit(w.buf, true)
	w.buf = w.buf[:0]
	return err
}

// emit writes p to the underlying writer, adding it to the checksum if sum.
func (w *Writer) emit(p []byte, sum bool) error {
	if w.err != nil {
		return w.err
	}
	if sum {
		w.crc = crc64Update(w.crc, p)
	}
	if _, err := w.w.Write(p); err != nil {
		w.err = fmt.Errorf("snapshot: write: %w", err)
	}
	return w.err
}

// appendLength appends an RDB length in the smallest form
// (src/rdb.c rdbSaveLen): 6 bits, 14 bits big-endian, 32 or 64 bits
// big-endian after a marker byte.
func appendLength(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	case n <= 1<<32-1:
		b = append(b, 0x80)
		return binary.BigEndian.AppendUint32(b, uint32(n))
	}
	b = append(b, 0x81)
	return binary.BigEndian.AppendUint64(b, n)
}
