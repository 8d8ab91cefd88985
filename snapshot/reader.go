package snapshot

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"

	"raftset/internal/setenc"
	"raftset/internal/setenc/hashtable"
	"raftset/internal/strictint"
)

// Kind is the kind of value a Record holds.
type Kind uint8

// The value kinds raftset holds.
const (
	KindString Kind = iota + 1
	KindSet
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindSet:
		return "set"
	}
	return "unknown"
}

// NoExpiry is the ExpireAtMs of a key without a deadline.
const NoExpiry int64 = -1

// AuxField is an RDB AUX record: a key/value pair of file metadata.
type AuxField struct {
	Key, Value string
}

// Record is one key read from a file.
type Record struct {
	DB         int
	Key        []byte
	ExpireAtMs int64 // absolute Unix milliseconds, or NoExpiry
	Kind       Kind
	Value      []byte      // KindString
	Set        *setenc.Set // KindSet; never empty
	RDBType    byte        // the record's type in the file (TypeString, TypeSetIntset, ...)
}

// Encoding is the OBJECT ENCODING a Redis 7.2 answers for the key after
// loading it: the set's encoding, or for strings "int" (a strict integer of
// at most 20 bytes), "embstr" (at most 44 bytes) or "raw".
func (r *Record) Encoding() string {
	if r.Kind == KindSet {
		return r.Set.Encoding().String()
	}
	return stringEncoding(r.Value)
}

// ReaderOptions configure a Reader. The zero value reads raftset snapshots
// and Redis dumps of strings and sets with Redis's default limits.
type ReaderOptions struct {
	// Limits decide the encoding of sets loaded from foreign files (those
	// without the raftset-ver AUX field). The zero value means
	// setenc.DefaultLimits().
	Limits setenc.Limits
	// SkipUnsupported steps over records of types raftset does not hold
	// (lists, hashes, sorted sets, module values) instead of failing on the
	// first one. Streams, pre-release modules and 7.4 hashes with field
	// expiry cannot be stepped over and still fail.
	SkipUnsupported bool
	// OnSkip, if set, is called for every record SkipUnsupported stepped
	// over. key is valid only during the call.
	OnSkip func(db int, key []byte, rdbType byte)
	// NoDuplicateKeyCheck turns off the search for a key that appears twice
	// in one database, which costs about 25 bytes per key. Set it only when
	// the caller detects duplicates itself, for example while inserting into
	// its own keyspace.
	NoDuplicateKeyCheck bool
	// ForceExact loads sets with setenc.Exact even from a file without the
	// raftset-ver field: every set keeps the encoding and member order of
	// its record, as a byte-for-byte re-encoder or an inspection tool wants.
	ForceExact bool
}

// Reader reads an RDB file record by record. It holds at most one value in
// memory beyond its 64 KiB window, and validates every value completely before
// returning it; but a file is only known to be good once Next has returned
// io.EOF, which it does after the EOF opcode and a matching checksum. A caller
// restoring state must therefore build it aside and keep it only then.
type Reader struct {
	in      *input
	str     strDecoder
	opt     ReaderOptions
	version int
	aux     []AuxField
	exact   bool // load sets with setenc.Exact
	marked  bool // the file carries raftset-ver
	db      int
	keys    map[int]*hashtable.Table
	skipped int
	empty   int
	sum     uint64
	err     error // sticky; io.EOF once the file has been read completely
}

// NewReader reads and checks the magic and version.
func NewReader(r io.Reader, opt ReaderOptions) (*Reader, error) {
	if opt.Limits == (setenc.Limits{}) {
		opt.Limits = setenc.DefaultLimits()
	}
	in := newInput(r)
	rd := &Reader{in: in, str: strDecoder{in: in}, opt: opt, keys: map[int]*hashtable.Table{}, exact: opt.ForceExact}
	p, err := in.view(9)
	if err != nil {
		return nil, err
	}
	if string(p[:5]) != "REDIS" {
		return nil, corruptf(0, nil, "magic %q is not REDIS", p[:5])
	}
	v := 0
	for i, c := range p[5:9] {
		if c < '0' || c > '9' {
			return nil, corruptf(int64(5+i), nil, "version %q is not 4 decimal digits", p[5:9])
		}
		v = v*10 + int(c-'0')
	}
	if v < minReadVersion || v > maxReadVersion {
		return nil, corruptf(5, nil, "RDB version %d is not one we read (%d to %d)", v, minReadVersion, maxReadVersion)
	}
	rd.version = v
	return rd, nil
}

// Version returns the file's RDB version.
func (r *Reader) Version() int { return r.version }

// Aux returns the AUX fields read so far, in file order. Redis writes them
// before any key, so the list is complete once Next has returned a record or
// io.EOF. The caller must not modify it.
func (r *Reader) Aux() []AuxField { return r.aux }

// Exact reports whether the file carries the raftset-ver AUX field, that is,
// was written by raftset as a snapshot: its sets are then loaded with
// setenc.Exact (encoding and member order as written) rather than with the
// conversions a loading Redis applies.
func (r *Reader) Exact() bool { return r.exact }

// Skipped returns how many records SkipUnsupported stepped over.
func (r *Reader) Skipped() int { return r.skipped }

// EmptySkipped returns how many sets with no members were dropped; Redis
// drops them too (an empty intset, though, is corruption).
func (r *Reader) EmptySkipped() int { return r.empty }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int64 { return r.in.offset() }

// Checksum returns the file's CRC64 trailer once Next has returned io.EOF:
// 0 for a file written with checksums disabled or older than version 5.
func (r *Reader) Checksum() uint64 { return r.sum }

// Next returns the next key. It returns io.EOF only after the EOF opcode and
// a verified checksum; any other error is final.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

// maxDB bounds SELECTDB. Redis exits on an index >= its databases setting
// (16 by default); we leave that policy to the caller but keep the index an
// int32.
const maxDB = 1<<31 - 1

func (r *Reader) next() (*Record, error) {
	in := r.in
	expire := NoExpiry // prefix opcodes apply to the next key only
	for {
		off := in.offset()
		op, err := in.readByte()
		if err != nil {
			return nil, err
		}
		switch op {
		case OpEOF:
			return nil, r.finish()
		case OpSelectDB:
			db, err := in.readLen("SELECTDB index")
			if err != nil {
				return nil, err
			}
			if db > maxDB {
				return nil, corruptf(off, nil, "SELECTDB index %d", db)
			}
			r.db = int(db)
		case OpResizeDB:
			if err := r.skipLens(2, "RESIZEDB"); err != nil {
				return nil, err
			}
		case OpSlotInfo:
			if err := r.skipLens(3, "SLOT_INFO"); err != nil {
				return nil, err
			}
		case OpIdle:
			if err := r.skipLens(1, "IDLE"); err != nil {
				return nil, err
			}
		case OpFreq:
			if _, err := in.readByte(); err != nil {
				return nil, err
			}
		case OpExpireTimeMs:
			p, err := in.view(8)
			if err != nil {
				return nil, err
			}
			// Little-endian since RDB 9; older files were written in host
			// order, which on every platform Redis ships for is the same.
			ms := int64(binary.LittleEndian.Uint64(p))
			if ms < 0 {
				return nil, corruptf(off, nil, "negative expire time %d ms", ms)
			}
			expire = ms
		case OpExpireTime:
			p, err := in.view(4)
			if err != nil {
				return nil, err
			}
			s := int32(binary.LittleEndian.Uint32(p))
			if s < 0 {
				return nil, corruptf(off, nil, "negative expire time %d s", s)
			}
			expire = int64(s) * 1000
		case OpAux:
			if err := r.readAux(off); err != nil {
				return nil, err
			}
		case OpModuleAux:
			if err := r.skipModuleAux(off); err != nil {
				return nil, err
			}
		case OpFunction2:
			if err := r.str.skipString("function library"); err != nil {
				return nil, err
			}
		case OpFunctionPreGA:
			return nil, corruptf(off, nil, "pre-release function record (refused by Redis 7 too)")
		default:
			if op > maxType || op == 8 {
				return nil, corruptf(off, nil, "invalid object type %d", op)
			}
			rec, err := r.readObject(off, op, expire)
			if err != nil {
				return nil, err
			}
			if rec != nil {
				return rec, nil
			}
			expire = NoExpiry
		}
	}
}

func (r *Reader) skipLens(n int, what string) error {
	for range n {
		if _, err := r.in.readLen(what); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) readAux(off int64) error {
	k, err := r.str.read("AUX key", true)
	if err != nil {
		return err
	}
	v, err := r.str.read("AUX value", true)
	if err != nil {
		return err
	}
	if string(k) == AuxRaftsetVer {
		if n, err := strconv.Atoi(string(v)); err == nil && n > RaftsetFormat && string(v) == strconv.Itoa(n) {
			return corruptf(off, &NewerFormatError{Format: n, Max: RaftsetFormat}, "AUX %s = %q", AuxRaftsetVer, v)
		}
		if n, err := strconv.Atoi(string(v)); err != nil || n < 1 || string(v) != strconv.Itoa(n) {
			return corruptf(off, nil, "AUX %s = %q: not a raftset format this build reads (1 to %d)", AuxRaftsetVer, v, RaftsetFormat)
		}
		if r.version < VersionRedis72 {
			// We mark only version-11 files; a marked file of another
			// version has a damaged header.
			return corruptf(off, nil, "AUX %s in a version-%d file", AuxRaftsetVer, r.version)
		}
		r.exact, r.marked = true, true
	}
	r.aux = append(r.aux, AuxField{Key: string(k), Value: string(v)})
	return nil
}

// readObject reads the record of type t whose type byte is at off. It
// returns nil, nil for a record it skipped.
func (r *Reader) readObject(off int64, t byte, expire int64) (*Record, error) {
	key, err := r.str.read("key", true)
	if err != nil {
		return nil, err
	}
	rec := &Record{DB: r.db, Key: key, ExpireAtMs: expire, RDBType: t}
	ok, err := r.readValue(rec, off, t)
	if err != nil || !ok {
		return nil, err
	}
	if rec.Kind == 0 {
		// Skipped: an unsupported type stepped over.
		return nil, r.checkDuplicate(off, key)
	}
	if err := r.checkDuplicate(off, key); err != nil {
		return nil, err
	}
	return rec, nil
}

// readValue reads the value of a record of type t (whose type byte is at
// off) into rec. It returns false for an empty set, which loaders drop; a
// record SkipUnsupported stepped over comes back with rec.Kind 0.
func (r *Reader) readValue(rec *Record, off int64, t byte) (bool, error) {
	key := rec.Key
	mode := setenc.AsRedis
	if r.exact {
		mode = setenc.Exact
	}
	lim := r.opt.Limits
	voff := r.in.offset()
	switch t {
	case TypeString:
		v, err := r.str.read("string value", true)
		if err != nil {
			return false, err
		}
		rec.Kind, rec.Value = KindString, v
	case TypeSetIntset, TypeSetListpack:
		blob, err := r.str.read("set blob", true)
		if err != nil {
			return false, err
		}
		var s *setenc.Set
		if t == TypeSetIntset {
			s, err = setenc.FromIntset(blob, lim, mode)
		} else {
			s, err = setenc.FromListpack(blob, lim, mode)
		}
		if errors.Is(err, setenc.ErrEmpty) {
			r.empty++
			return false, nil
		}
		if err != nil {
			return false, corruptf(voff, err, "key %q: invalid %s", key, TypeName(t))
		}
		rec.Kind, rec.Set = KindSet, s
	case TypeSetHashtable:
		n, err := r.in.readLen("set size")
		if err != nil {
			return false, err
		}
		l := setenc.NewLoader(loaderHint(n), lim, mode)
		for i := uint64(0); i < n; i++ {
			moff := r.in.offset()
			m, err := r.str.read("set member", false)
			if err != nil {
				return false, err
			}
			if err := l.Add(m); err != nil {
				return false, corruptf(moff, err, "key %q: member %d", key, i)
			}
		}
		s, err := l.Set()
		if errors.Is(err, setenc.ErrEmpty) {
			r.empty++
			return false, nil
		}
		if err != nil {
			return false, corruptf(voff, err, "key %q", key)
		}
		rec.Kind, rec.Set = KindSet, s
	default:
		if r.marked {
			// Our snapshots hold strings and sets only: another type in
			// one is damage, not a foreign record.
			return false, corruptf(off, nil, "key %q: a %s record in a raftset snapshot", key, TypeName(t))
		}
		unskippable := !skippable(t)
		if !r.opt.SkipUnsupported || unskippable {
			return false, &UnsupportedTypeError{Offset: off, DB: r.db, Key: key, Type: t, Unskippable: unskippable}
		}
		if err := r.skipValue(t, voff); err != nil {
			return false, err
		}
		r.skipped++
		if r.opt.OnSkip != nil {
			r.opt.OnSkip(r.db, key, t)
		}
		return true, nil
	}
	return true, nil
}

// checkDuplicate fails on a key seen before in the same database: a loading
// Redis panics on one ("Duplicated key found in RDB file").
func (r *Reader) checkDuplicate(off int64, key []byte) error {
	if r.opt.NoDuplicateKeyCheck {
		return nil
	}
	t := r.keys[r.db]
	if t == nil {
		t = hashtable.New(0)
		r.keys[r.db] = t
	}
	if !t.Add(key) {
		return corruptf(off, nil, "duplicate key %q in db %d", key, r.db)
	}
	return nil
}

// loaderHint is the member count passed to setenc.NewLoader, which decides
// the starting encoding by it as Redis does but sizes its allocation only up
// to a bound (the count is the file's claim, not what it holds).
func loaderHint(n uint64) int { return int(min(n, 1<<40)) }

// finish verifies the trailer after OpEOF and returns io.EOF on success.
func (r *Reader) finish() error {
	sum := r.in.checksum() // everything through the EOF opcode
	if r.version < firstCRCVersion {
		// Such a file ends here. Without a checksum to catch a damaged
		// version number, data after the end is our only hint of one.
		if err := r.in.fill(1); err == nil {
			return corruptf(r.in.offset(), nil, "data after the end of a version-%d file (which has no checksum)", r.version)
		} else if !errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		return io.EOF
	}
	off := r.in.offset()
	p, err := r.in.view(8)
	if err != nil {
		return err
	}
	stored := binary.LittleEndian.Uint64(p)
	r.sum = stored
	switch {
	case stored == 0 && r.exact:
		// Redis treats 0 as "checksum disabled"; our writer always
		// computes one, so a raftset snapshot without it is damaged.
		return corruptf(off, nil, "raftset snapshot without a checksum")
	case stored != 0 && stored != sum:
		return corruptf(off, ErrChecksum, "stored checksum %016x, computed %016x", stored, sum)
	}
	return io.EOF
}

// skippable reports whether a type we do not hold has a layout we can step
// over without understanding it.
func skippable(t byte) bool {
	switch t {
	case TypeList, TypeZset, TypeHash, TypeZset2, TypeModule2, TypeHashZipmap, TypeListZiplist,
		TypeZsetZiplist, TypeHashZiplist, TypeListQuicklist, TypeHashListpack, TypeZsetListpack,
		TypeListQuicklist2:
		return true
	}
	return false
}

// skipValue steps over the value of a record of type t, by the layouts of
// Redis's rdbLoadObject (src/rdb.c). Every element costs at least one byte
// of input, so a lying count runs into the end of the file rather than into
// memory.
func (r *Reader) skipValue(t byte, off int64) error {
	s := &r.str
	what := TypeName(t)
	switch t {
	case TypeHashZipmap, TypeListZiplist, TypeZsetZiplist, TypeHashZiplist, TypeHashListpack, TypeZsetListpack:
		return s.skipString(what)
	case TypeModule2:
		if _, err := r.in.readLen("module id"); err != nil {
			return err
		}
		return r.skipModuleStream(off)
	}
	n, err := r.in.readLen(what + " length")
	if err != nil {
		return err
	}
	for i := uint64(0); i < n; i++ {
		switch t {
		case TypeList, TypeListQuicklist:
			err = s.skipString(what)
		case TypeHash:
			if err = s.skipString(what); err == nil {
				err = s.skipString(what)
			}
		case TypeZset:
			if err = s.skipString(what); err == nil {
				err = r.skipOldScore()
			}
		case TypeZset2:
			if err = s.skipString(what); err == nil {
				err = r.in.skip(8)
			}
		case TypeListQuicklist2:
			coff := r.in.offset()
			var c uint64
			if c, err = r.in.readLen("quicklist container"); err == nil {
				if c != 1 && c != 2 {
					return corruptf(coff, nil, "quicklist container %d is neither 1 (plain) nor 2 (packed)", c)
				}
				err = s.skipString(what)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// skipOldScore steps over a zset-v1 score: a length byte and that many ASCII
// bytes, where 253, 254 and 255 stand for NaN, +inf and -inf with no bytes.
func (r *Reader) skipOldScore() error {
	c, err := r.in.readByte()
	if err != nil || c >= 253 {
		return err
	}
	return r.in.skip(uint64(c))
}

// skipModuleAux steps over a MODULE_AUX record the way redis-check-rdb does:
// module id, when_opcode (must be UINT), when, then the opcode stream.
func (r *Reader) skipModuleAux(off int64) error {
	if _, err := r.in.readLen("module id"); err != nil {
		return err
	}
	wo, err := r.in.readLen("module when_opcode")
	if err != nil {
		return err
	}
	if wo != moduleOpcodeUint {
		return corruptf(off, nil, "MODULE_AUX when_opcode %d is not %d", wo, moduleOpcodeUint)
	}
	if _, err := r.in.readLen("module when"); err != nil {
		return err
	}
	return r.skipModuleStream(off)
}

// skipModuleStream steps over a module's self-describing value
// (src/rdb.c rdbLoadCheckModuleValue).
func (r *Reader) skipModuleStream(off int64) error {
	for {
		ooff := r.in.offset()
		op, err := r.in.readLen("module opcode")
		if err != nil {
			return err
		}
		switch op {
		case moduleOpcodeEOF:
			return nil
		case moduleOpcodeSint, moduleOpcodeUint:
			_, err = r.in.readLen("module integer")
		case moduleOpcodeFlt:
			err = r.in.skip(4)
		case moduleOpcodeDbl:
			err = r.in.skip(8)
		case moduleOpcodeStr:
			err = r.str.skipString("module string")
		default:
			return corruptf(ooff, nil, "unknown module opcode %d in module value at offset %d", op, off)
		}
		if err != nil {
			return err
		}
	}
}

// stringEncoding is what Redis's tryObjectEncoding makes of a loaded string
// value (src/object.c; OBJ_ENCODING_EMBSTR_SIZE_LIMIT is 44).
func stringEncoding(v []byte) string {
	if _, ok := strictint.Parse(v); ok {
		return "int"
	}
	if len(v) <= 44 {
		return "embstr"
	}
	return "raw"
}
