package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"raftset/internal/setenc"
	"raftset/internal/setenc/intset"
	"raftset/internal/setenc/listpack"
	"raftset/internal/testutil"
)

// rdb assembles a file: magic, version, body, EOF and (from version 5) the
// checksum, or a zero checksum when noCRC.
func rdb(version int, noCRC bool, body ...[]byte) []byte {
	b := fmt.Appendf(nil, "REDIS%04d", version)
	for _, p := range body {
		b = append(b, p...)
	}
	b = append(b, OpEOF)
	if version >= firstCRCVersion {
		var sum uint64
		if !noCRC {
			sum = crc64Update(0, b)
		}
		b = binary.LittleEndian.AppendUint64(b, sum)
	}
	return b
}

// str is an RDB raw string.
func str(s string) []byte { return append(appendLength(nil, uint64(len(s))), s...) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func lenb(n uint64) []byte { return appendLength(nil, n) }

func lpBlob(members ...string) []byte {
	ms := make([][]byte, len(members))
	for i, m := range members {
		ms[i] = []byte(m)
	}
	return listpack.FromMembers(ms)
}

// TestCraftedFiles covers each rule of the reader on hand-made files.
func TestCraftedFiles(t *testing.T) {
	okStr := cat([]byte{TypeString}, str("k"), str("v"))
	tests := []struct {
		name    string
		file    []byte
		opt     ReaderOptions
		wantErr error // nil: must read
		keys    int
		check   func(t *testing.T, recs []*Record, r *Reader)
	}{
		{name: "minimal", file: rdb(11, false, okStr), keys: 1},
		{name: "no keys", file: rdb(11, false), keys: 0},
		{name: "version 12", file: rdb(12, false, okStr), keys: 1},
		{name: "version 13", file: rdb(13, false, okStr), wantErr: ErrCorrupt},
		{name: "version 0", file: rdb(0, false, okStr), wantErr: ErrCorrupt},
		{name: "bad magic", file: append([]byte("RODIS"), rdb(11, false, okStr)[5:]...), wantErr: ErrCorrupt},
		{name: "version 4 has no checksum", file: rdb(4, false, okStr), keys: 1},
		{name: "version 4 with trailing data", file: append(rdb(4, false, okStr), 0), wantErr: ErrCorrupt},
		{name: "checksum disabled", file: rdb(11, true, okStr), keys: 1},
		{name: "raftset file without checksum", file: rdb(11, true, []byte{OpAux}, str(AuxRaftsetVer), str("1"), okStr), wantErr: ErrCorrupt},
		{name: "raftset marker in version 10", file: rdb(10, false, []byte{OpAux}, str(AuxRaftsetVer), str("1"), okStr), wantErr: ErrCorrupt},
		{name: "newer raftset format", file: rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("9"), okStr), wantErr: ErrNewerFormat},
		{name: "unknown raftset format", file: rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("1x"), okStr), wantErr: ErrCorrupt},
		{name: "raftset format 0", file: rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("0"), okStr), wantErr: ErrCorrupt},
		{name: "checksum mismatch", file: func() []byte { b := rdb(11, false, okStr); b[len(b)-1] ^= 1; return b }(), wantErr: ErrChecksum},
		{name: "empty input", file: nil, wantErr: io.ErrUnexpectedEOF},
		{name: "no EOF", file: rdb(11, false, okStr)[:9+len(okStr)], wantErr: io.ErrUnexpectedEOF},
		{name: "missing checksum", file: func() []byte { b := rdb(11, false, okStr); return b[:len(b)-3] }(), wantErr: ErrCorrupt},
		{
			name: "skipped opcodes", keys: 1,
			file: rdb(12, false,
				[]byte{OpAux}, str("lua"), str("x"),
				[]byte{OpModuleAux}, lenb(12345), lenb(moduleOpcodeUint), lenb(2),
				lenb(moduleOpcodeSint), lenb(7), lenb(moduleOpcodeFlt), []byte{1, 2, 3, 4},
				lenb(moduleOpcodeDbl), make([]byte, 8), lenb(moduleOpcodeStr), str("blob"), lenb(moduleOpcodeEOF),
				[]byte{OpFunction2}, str("#!lua name=x\n"),
				[]byte{OpSelectDB}, lenb(0), []byte{OpResizeDB}, lenb(1), lenb(0),
				[]byte{OpSlotInfo}, lenb(1), lenb(2), lenb(3),
				[]byte{OpIdle}, lenb(100), []byte{OpFreq, 5}, okStr),
		},
		{name: "bad module when_opcode", file: rdb(11, false, []byte{OpModuleAux}, lenb(1), lenb(1), lenb(0), lenb(0)), wantErr: ErrCorrupt},
		{name: "pre-GA function", file: rdb(11, false, []byte{OpFunctionPreGA}, str("x")), wantErr: ErrCorrupt},
		{name: "invalid type 8", file: rdb(11, false, []byte{8}, str("k"), str("v")), wantErr: ErrCorrupt},
		{name: "invalid type 100", file: rdb(11, false, []byte{100}, str("k"), str("v")), wantErr: ErrCorrupt},
		{
			name: "old second expiry", keys: 1,
			file: rdb(11, false, []byte{OpExpireTime}, binary.LittleEndian.AppendUint32(nil, 2000000000), okStr),
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if recs[0].ExpireAtMs != 2000000000000 {
					t.Errorf("ExpireAtMs = %d, want 2000000000000", recs[0].ExpireAtMs)
				}
			},
		},
		{
			name: "expiry applies to the next key only", keys: 2,
			file: rdb(11, false, []byte{OpExpireTimeMs}, binary.LittleEndian.AppendUint64(nil, 5), okStr,
				[]byte{TypeString}, str("k2"), str("v")),
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if recs[0].ExpireAtMs != 5 || recs[1].ExpireAtMs != NoExpiry {
					t.Errorf("ExpireAtMs = %d, %d, want 5, %d", recs[0].ExpireAtMs, recs[1].ExpireAtMs, NoExpiry)
				}
			},
		},
		{name: "negative expiry", file: rdb(11, false, []byte{OpExpireTimeMs}, binary.LittleEndian.AppendUint64(nil, 1<<63), okStr), wantErr: ErrCorrupt},
		{name: "duplicate key", file: rdb(11, false, okStr, okStr), wantErr: ErrCorrupt},
		{name: "duplicate key unchecked", file: rdb(11, false, okStr, okStr), opt: ReaderOptions{NoDuplicateKeyCheck: true}, keys: 2},
		{name: "same key in two dbs", file: rdb(11, false, okStr, []byte{OpSelectDB}, lenb(1), okStr), keys: 2,
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if recs[0].DB != 0 || recs[1].DB != 1 {
					t.Errorf("DBs = %d, %d, want 0, 1", recs[0].DB, recs[1].DB)
				}
			}},
		{name: "huge SELECTDB", file: rdb(11, false, []byte{OpSelectDB}, lenb(1<<40), okStr), wantErr: ErrCorrupt},
		{name: "int-encoded key and value", file: rdb(11, false, []byte{TypeString, 0xC1, 0x39, 0x30, 0xC2, 0, 0, 0, 0x80}), keys: 1,
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if string(recs[0].Key) != "12345" || string(recs[0].Value) != "-2147483648" {
					t.Errorf("record = %q = %q, want 12345 = -2147483648", recs[0].Key, recs[0].Value)
				}
			}},
		{name: "unknown string encoding", file: rdb(11, false, []byte{TypeString, 0xC4}, str("v")), wantErr: ErrCorrupt},
		{name: "unknown length encoding", file: rdb(11, false, []byte{TypeString, 0x85}, str("v")), wantErr: ErrCorrupt},
		{name: "LZF original length zero", file: rdb(11, false, []byte{TypeString}, str("k"), []byte{0xC3}, lenb(2), lenb(0), []byte{0, 'a'}), wantErr: ErrCorrupt},
		{name: "LZF original length huge", file: rdb(11, false, []byte{TypeString}, str("k"), []byte{0xC3}, lenb(2), lenb(1<<40), []byte{0, 'a'}), wantErr: ErrCorrupt},
		{name: "LZF original length short", file: rdb(11, false, []byte{TypeString}, str("k"), []byte{0xC3}, lenb(2), lenb(2), []byte{0, 'a'}), wantErr: ErrCorrupt},
		{name: "string length 2^60", file: rdb(11, false, []byte{TypeString}, str("k"), lenb(1<<60), []byte("v")), wantErr: ErrCorrupt},
		{name: "string length past the end", file: rdb(11, false, []byte{TypeString}, str("k"), lenb(100<<20), []byte("v")), wantErr: io.ErrUnexpectedEOF},
		{name: "empty intset", file: rdb(11, false, []byte{TypeSetIntset}, str("s"), str(string(intset.New()))), wantErr: intset.ErrCorrupt},
		{name: "unsorted intset", file: rdb(11, false, []byte{TypeSetIntset}, str("s"), str("\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x01\x00")), wantErr: ErrCorrupt},
		{name: "empty listpack skipped", file: rdb(11, false, []byte{TypeSetListpack}, str("s"), str(string(listpack.New())), okStr), keys: 1,
			check: func(t *testing.T, _ []*Record, r *Reader) {
				if r.EmptySkipped() != 1 {
					t.Errorf("EmptySkipped() = %d, want 1", r.EmptySkipped())
				}
			}},
		{name: "empty type-2 set skipped", file: rdb(11, false, []byte{TypeSetHashtable}, str("s"), lenb(0)), keys: 0},
		{name: "listpack duplicate", file: rdb(11, false, []byte{TypeSetListpack}, str("s"), str(string(lpBlob("a", "1", "a")))), wantErr: listpack.ErrCorrupt},
		{name: "listpack int/string duplicate", file: rdb(11, false, []byte{TypeSetListpack}, str("s"),
			str("\x0d\x00\x00\x00\x02\x00\x01\x01\x81\x31\x02\xff")), wantErr: ErrCorrupt},
		{name: "listpack bad total", file: rdb(11, false, []byte{TypeSetListpack}, str("s"), str("\x08\x00\x00\x00\x00\x00\xff")), wantErr: ErrCorrupt},
		{name: "type-2 duplicate member", file: rdb(11, false, []byte{TypeSetHashtable}, str("s"), lenb(3), str("a"), str("b"), str("a")), wantErr: setenc.ErrDuplicate},
		{name: "type-2 duplicate int member", file: rdb(11, false, []byte{TypeSetHashtable}, str("s"), lenb(2), str("7"), []byte{0xC0, 7}), wantErr: setenc.ErrDuplicate},
		{name: "type-2 count past the end", file: rdb(11, false, []byte{TypeSetHashtable}, str("s"), lenb(1<<62), str("a")), wantErr: ErrCorrupt},
		{
			name: "type-2 rebuilt as Redis does", keys: 3,
			file: rdb(11, false,
				[]byte{TypeSetHashtable}, str("ints"), lenb(2), str("2"), str("1"),
				[]byte{TypeSetHashtable}, str("mixed"), lenb(2), str("1"), str("x"),
				[]byte{TypeSetHashtable}, str("long"), lenb(1), str(string(make([]byte, 65)))),
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				for i, want := range []string{"intset", "listpack", "hashtable"} {
					if got := recs[i].Encoding(); got != want {
						t.Errorf("key %q Encoding() = %s, want %s", recs[i].Key, got, want)
					}
				}
			},
		},
		{
			name: "type-2 kept exact in a raftset file", keys: 1,
			file: rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("1"),
				[]byte{TypeSetHashtable}, str("ints"), lenb(3), str("2"), str("1"), str("3")),
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if got := recs[0].Encoding(); got != "hashtable" {
					t.Errorf("Encoding() = %s, want hashtable", got)
				}
				if got := fmt.Sprintf("%s", recs[0].Set.Members()); got != "[2 1 3]" {
					t.Errorf("Members() = %s, want [2 1 3] (file order)", got)
				}
			},
		},
		{
			name: "listpack over the limit becomes hashtable", keys: 1,
			opt:  ReaderOptions{Limits: setenc.Limits{MaxIntsetEntries: 512, MaxListpackEntries: 2, MaxListpackValue: 64}},
			file: rdb(11, false, []byte{TypeSetListpack}, str("s"), str(string(lpBlob("a", "b", "c")))),
			check: func(t *testing.T, recs []*Record, _ *Reader) {
				if got := recs[0].Encoding(); got != "hashtable" {
					t.Errorf("Encoding() = %s, want hashtable", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, r, err := readAll(tc.file, tc.opt)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("read error = %v, want %v", err, tc.wantErr)
				}
				if !isCorrupt(err) {
					t.Errorf("read error = %v, which is not ErrCorrupt", err)
				}
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Errorf("read error %v is not a *CorruptError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("read error = %v", err)
			}
			if len(recs) != tc.keys {
				t.Errorf("read %d keys, want %d", len(recs), tc.keys)
			}
			if tc.check != nil {
				tc.check(t, recs, r)
			}
		})
	}
}

// TestUnsupportedTypes: records of types we do not hold stop the read with
// an error naming key and type, or are stepped over on request.
func TestUnsupportedTypes(t *testing.T) {
	lp := str(string(lpBlob("f", "v")))
	records := []struct {
		t    byte
		body []byte
	}{
		{TypeList, cat(lenb(2), str("a"), str("b"))},
		{TypeZset, cat(lenb(3), str("a"), []byte{3}, []byte("1.5"), str("b"), []byte{253}, str("c"), []byte{254})},
		{TypeHash, cat(lenb(1), str("f"), str("v"))},
		{TypeZset2, cat(lenb(1), str("a"), make([]byte, 8))},
		{TypeModule2, cat(lenb(99), lenb(moduleOpcodeUint), lenb(5), lenb(moduleOpcodeStr), str("x"), lenb(moduleOpcodeEOF))},
		{TypeHashZipmap, str("zipmap")},
		{TypeListZiplist, str("ziplist")},
		{TypeZsetZiplist, str("ziplist")},
		{TypeHashZiplist, str("ziplist")},
		{TypeListQuicklist, cat(lenb(2), str("zl1"), str("zl2"))},
		{TypeHashListpack, lp},
		{TypeZsetListpack, lp},
		{TypeListQuicklist2, cat(lenb(2), lenb(1), str("plain"), lenb(2), lp)},
	}
	okStr := cat([]byte{TypeString}, str("k"), str("v"))
	for _, rec := range records {
		t.Run(TypeName(rec.t), func(t *testing.T) {
			file := rdb(11, false, []byte{OpExpireTimeMs}, make([]byte, 8), []byte{rec.t}, str("other"), rec.body, okStr)
			_, _, err := readAll(file, ReaderOptions{})
			var ue *UnsupportedTypeError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnsupportedType) {
				t.Fatalf("read error = %v, want *UnsupportedTypeError", err)
			}
			if string(ue.Key) != "other" || ue.Type != rec.t || ue.Unskippable {
				t.Errorf("error = %+v, want key other, type %d, skippable", ue, rec.t)
			}
			var skipped []string
			recs, r, err := readAll(file, ReaderOptions{SkipUnsupported: true, OnSkip: func(db int, key []byte, typ byte) {
				skipped = append(skipped, fmt.Sprintf("%d/%s/%d", db, key, typ))
			}})
			if err != nil {
				t.Fatalf("read with SkipUnsupported: %v", err)
			}
			if len(recs) != 1 || recs[0].ExpireAtMs != NoExpiry || r.Skipped() != 1 {
				t.Errorf("read %d keys (expiry %v), skipped %d, want 1 key without expiry, 1 skipped", len(recs), recs, r.Skipped())
			}
			if want := fmt.Sprintf("0/other/%d", rec.t); len(skipped) != 1 || skipped[0] != want {
				t.Errorf("OnSkip calls = %q, want [%s]", skipped, want)
			}
		})
	}
	for _, typ := range []byte{TypeModulePreGA, TypeStreamListpacks, TypeStreamListpacks2, TypeStreamListpacks3, TypeHashMetadata, TypeHashListpackEx} {
		file := rdb(12, false, []byte{typ}, str("stream"), str("whatever"))
		_, _, err := readAll(file, ReaderOptions{SkipUnsupported: true})
		var ue *UnsupportedTypeError
		if !errors.As(err, &ue) || !ue.Unskippable || ue.Type != typ {
			t.Errorf("type %d with SkipUnsupported: error = %v, want an unskippable *UnsupportedTypeError", typ, err)
		}
	}
}

// TestNoAllocationOnClaims: length fields that claim more than the file
// holds fail without allocating the claimed size.
func TestNoAllocationOnClaims(t *testing.T) {
	files := map[string][]byte{
		"string 1 GiB":     rdb(11, false, []byte{TypeString}, str("k"), lenb(1<<30), make([]byte, 1000)),
		"string 2^60":      rdb(11, false, []byte{TypeString}, str("k"), lenb(1<<60)),
		"LZF 1 GiB":        rdb(11, false, []byte{TypeString}, str("k"), []byte{0xC3}, lenb(1<<30), lenb(1<<30), make([]byte, 1000)),
		"LZF ratio":        rdb(11, false, []byte{TypeString}, str("k"), []byte{0xC3}, lenb(100), lenb(1<<30), make([]byte, 100)),
		"blob 1 GiB":       rdb(11, false, []byte{TypeSetListpack}, str("k"), lenb(1<<30), make([]byte, 1000)),
		"type-2 count":     rdb(11, false, []byte{TypeSetHashtable}, str("k"), lenb(1<<40), str("a")),
		"type-2 count raw": rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("1"), []byte{TypeSetHashtable}, str("k"), lenb(1<<40), str("a")),
		"list count":       rdb(11, false, []byte{TypeList}, str("k"), lenb(1<<40), str("a")),
	}
	for name, file := range files {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := readAll(file, ReaderOptions{SkipUnsupported: true})
		runtime.ReadMemStats(&after)
		if !isCorrupt(err) {
			t.Errorf("%s: error = %v, want ErrCorrupt", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
			t.Errorf("%s: allocated %d bytes reading a %d-byte file", name, got, len(file))
		}
	}
}

// damageFiles are small files with every record type we hold.
func damageFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	files["golden"] = golden
	for _, v := range []string{"redis-7.2.6/rdbcompression-yes/hashtable_65byte.rdb", "redis-7.4.1/rdbcompression-yes/intset.rdb",
		"redis-7.2.6/rdbcompression-no/listpack_mixed.rdb"} {
		b, err := os.ReadFile(filepath.Join(testutil.RDBDir(t), v))
		if err != nil {
			t.Fatal(err)
		}
		files[v] = b
	}
	return files
}

// TestEveryBitFlipAndTruncation: no damaged file reads successfully or
// panics; every error is ErrCorrupt (a checksum mismatch included), with one
// exception: a flip can turn a record, or the bytes a damaged length makes
// us misparse, into a well-formed record of a type we do not hold, which the
// reader reports as such (ErrUnsupportedType) because it stops there, before
// the checksum. Once the raftset-ver field has been read, any such record is
// corruption instead.
func TestEveryBitFlipAndTruncation(t *testing.T) {
	for name, good := range damageFiles(t) {
		t.Run(name, func(t *testing.T) {
			if _, _, err := readAll(good, ReaderOptions{}); err != nil {
				t.Fatalf("undamaged file: %v", err)
			}
			bad := bytes.Clone(good)
			for i := range good {
				for bit := range 8 {
					bad[i] = good[i] ^ 1<<bit
					_, _, err := readAll(bad, ReaderOptions{})
					if !isCorrupt(err) && !errors.Is(err, ErrUnsupportedType) {
						t.Errorf("flip bit %d of byte %d (%#x): error = %v, want ErrCorrupt", bit, i, good[i], err)
					}
				}
				bad[i] = good[i]
			}
			for n := range len(good) {
				_, _, err := readAll(good[:n], ReaderOptions{})
				if !isCorrupt(err) {
					t.Errorf("truncated to %d bytes: error = %v, want ErrCorrupt", n, err)
				}
			}
		})
	}
}

// errReader fails after n bytes.
type errReader struct {
	data []byte
	n    int
}

var errDisk = errors.New("disk on fire")

func (r *errReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errDisk
	}
	k := copy(p, r.data[:min(len(r.data), r.n)])
	r.data, r.n = r.data[k:], r.n-k
	return k, nil
}

// TestReadErrorIsNotCorruption: a failing source is reported as itself.
func TestReadErrorIsNotCorruption(t *testing.T) {
	good := rdb(11, false, cat([]byte{TypeString}, str("k"), str("v")))
	r, err := NewReader(&errReader{data: good, n: 12}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if !errors.Is(err, errDisk) || isCorrupt(err) {
		t.Errorf("Next() error = %v, want errDisk and not ErrCorrupt", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Errorf("second Next() error = %v, want the same sticky %v", err2, err)
	}
}

// TestForeignTypeInRaftsetFile: our snapshots hold no other types.
func TestForeignTypeInRaftsetFile(t *testing.T) {
	file := rdb(11, false, []byte{OpAux}, str(AuxRaftsetVer), str("1"), []byte{TypeList}, str("l"), lenb(1), str("a"))
	_, _, err := readAll(file, ReaderOptions{SkipUnsupported: true})
	if !isCorrupt(err) || errors.Is(err, ErrUnsupportedType) {
		t.Errorf("list in a raftset file: error = %v, want ErrCorrupt", err)
	}
}
