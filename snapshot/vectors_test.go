package snapshot

import (
	"bytes"
	"encoding/hex"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"raftset/internal/setenc"
	"raftset/internal/testutil"
)

// TestVectors reads every Redis-written vector and compares it with its JSON
// twin: keys, types, members, values, deadlines, and the OBJECT ENCODING a
// Redis reports after loading the file.
func TestVectors(t *testing.T) {
	for _, path := range testutil.RDBVectors(t) {
		name := filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(path))), filepath.Base(filepath.Dir(path)), filepath.Base(path))
		t.Run(name, func(t *testing.T) {
			v, data := testutil.LoadRDBVector(t, path)
			recs, r, err := readAll(data, ReaderOptions{})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if r.Version() != v.RDBVersion {
				t.Errorf("Version() = %d, want %d", r.Version(), v.RDBVersion)
			}
			if r.Exact() {
				t.Errorf("Exact() = true for a Redis-written file")
			}
			var aux []string
			for _, f := range r.Aux() {
				aux = append(aux, f.Key)
			}
			sort.Strings(aux)
			if !slices.Equal(aux, v.AuxFieldsPresent) {
				t.Errorf("AUX keys = %q, want %q", aux, v.AuxFieldsPresent)
			}
			if len(recs) != v.KeyCount {
				t.Errorf("read %d keys, want %d", len(recs), v.KeyCount)
			}
			seen := 0
			for _, rec := range recs {
				want, ok := v.Databases[strconv.Itoa(rec.DB)][string(rec.Key)]
				if !ok {
					t.Errorf("unexpected key %q in db %d", rec.Key, rec.DB)
					continue
				}
				seen++
				checkVectorKey(t, rec, want)
			}
			if seen != v.KeyCount {
				t.Errorf("matched %d keys of %d", seen, v.KeyCount)
			}
		})
	}
}

func checkVectorKey(t *testing.T, rec *Record, want testutil.RDBKey) {
	t.Helper()
	if got := rec.Kind.String(); got != want.Type {
		t.Errorf("key %q type = %s, want %s", rec.Key, got, want.Type)
		return
	}
	if int(rec.RDBType) != want.RDBType {
		t.Errorf("key %q RDBType = %d, want %d", rec.Key, rec.RDBType, want.RDBType)
	}
	if got := rec.Encoding(); got != want.ObjectEncodingAfterReload {
		t.Errorf("key %q Encoding() = %s, want %s", rec.Key, got, want.ObjectEncodingAfterReload)
	}
	wantExp := NoExpiry
	if want.ExpireAtMs != nil {
		wantExp = *want.ExpireAtMs
	}
	if rec.ExpireAtMs != wantExp {
		t.Errorf("key %q ExpireAtMs = %d, want %d", rec.Key, rec.ExpireAtMs, wantExp)
	}
	switch rec.Kind {
	case KindString:
		if want.Value == nil || !bytes.Equal(rec.Value, *want.Value) {
			t.Errorf("key %q value = %q, want %q", rec.Key, rec.Value, deref(want.Value))
		}
	case KindSet:
		got := sortedMembers(rec.Set)
		wantM := make([][]byte, len(want.Members))
		for i, m := range want.Members {
			wantM[i] = m
		}
		if !slices.EqualFunc(got, wantM, bytes.Equal) {
			t.Errorf("key %q members = %q, want %q", rec.Key, got, wantM)
		}
		if rec.Set.Len() != len(wantM) {
			t.Errorf("key %q Len() = %d, want %d", rec.Key, rec.Set.Len(), len(wantM))
		}
	}
}

func deref(b *testutil.Bytes) []byte {
	if b == nil {
		return nil
	}
	return *b
}

// TestVectorsRewriteIdentical reads each vector keeping every record as
// written (ForceExact) and writes it back with the same AUX fields and
// compression setting: the result must be Redis's file byte for byte. This
// pins our string writer, integer encodings, RESIZEDB, expiry, and LZF
// compressor (every LZF string in the vectors) to Redis's own output.
func TestVectorsRewriteIdentical(t *testing.T) {
	for _, path := range testutil.RDBVectors(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(path)))+"/"+filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			v, data := testutil.LoadRDBVector(t, path)
			recs, r, err := readAll(data, ReaderOptions{ForceExact: true})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if r.Version() != VersionRedis72 {
				t.Skipf("version %d: we write only %d", r.Version(), VersionRedis72)
			}
			got := writeEntries(t, WriterOptions{Compress: v.RDBCompression == "yes", BareAux: true, Aux: r.Aux()}, entriesOf(recs))
			if !bytes.Equal(got, data) {
				i := 0
				for i < len(got) && i < len(data) && got[i] == data[i] {
					i++
				}
				t.Errorf("rewrite differs from Redis's file at offset %d of %d/%d bytes:\n got %s\nwant %s",
					i, len(got), len(data), hexAround(got, i), hexAround(data, i))
			}
		})
	}
}

func hexAround(b []byte, i int) string {
	lo, hi := max(0, i-16), min(len(b), i+16)
	return hex.EncodeToString(b[lo:i]) + "|" + hex.EncodeToString(b[i:hi])
}

// TestAppendixA3 writes a complete 112-byte RDB v11 file worked out by hand
// from Redis's src/rdb.c: two AUX fields, a listpack set with a deadline, an
// intset and a string.
func TestAppendixA3(t *testing.T) {
	wantHex := "524544495330303131" +
		"fa0972656469732d766572" + "05372e322e36" +
		"fa0a72656469732d62697473" + "c040" +
		"fe00" + "fb0301" +
		"fc00b4c5dab8010000" +
		"14056d79736574" + "0f0f000000030081610281620201 01ff" +
		"0b04696e7473" + "0e02000000030000000100020003 00" +
		"00016b0176" +
		"ff" + "6b90e81e5a17ed85"
	wantHex = stripSpaces(wantHex)
	wantBytes, err := hex.DecodeString(wantHex)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantBytes) != 112 {
		t.Fatalf("fixture is %d bytes, want 112", len(wantBytes))
	}
	entries := []entry{
		{key: "myset", expire: 1893456000000, set: newSet([]string{"a", "b", "1"})},
		{key: "ints", expire: NoExpiry, set: newSet([]string{"1", "2", "3"})},
		{key: "k", expire: NoExpiry, value: []byte("v")},
	}
	if enc := entries[0].set.Encoding(); enc != setenc.Listpack {
		t.Fatalf("myset encoding = %v, want listpack", enc)
	}
	for _, compress := range []bool{false, true} {
		got := writeEntries(t, WriterOptions{BareAux: true, Compress: compress,
			Aux: []AuxField{{"redis-ver", "7.2.6"}, {"redis-bits", "64"}}}, entries)
		if !bytes.Equal(got, wantBytes) {
			t.Errorf("A.3 file (compress=%v) =\n%x\nwant\n%x", compress, got, wantBytes)
		}
	}
	if got := crc64Update(0, wantBytes[:104]); got != 0x85ed175a1ee8906b {
		t.Errorf("crc64 of A.3 bytes 0..103 = %#x, want 0x85ed175a1ee8906b", got)
	}
	recs, _, err := readAll(wantBytes, ReaderOptions{})
	if err != nil {
		t.Fatalf("read A.3: %v", err)
	}
	if err := diffRecords(recs, entries); err != nil {
		t.Error(err)
	}
}

func stripSpaces(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			out = append(out, s[i])
		}
	}
	return string(out)
}
