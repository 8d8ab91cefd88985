package intset

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"raftset/internal/strictint"
	"raftset/internal/testutil"
)

// loadVector reads a dump file written by a real Redis 7.2.6 with
// rdbcompression off, so intset blobs appear in it verbatim, and its JSON.
func loadVector(t *testing.T, name string) ([]byte, *testutil.RDBVector) {
	t.Helper()
	vec, rdb := testutil.LoadRDBVector(t, filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-no", name+".rdb"))
	return rdb, vec
}

// rdbLen is the RDB length encoding (6-bit, 14-bit or 32-bit big-endian).
func rdbLen(n int) []byte {
	switch {
	case n < 1<<6:
		return []byte{byte(n)}
	case n < 1<<14:
		return []byte{0x40 | byte(n>>8), byte(n)}
	default:
		return binary.BigEndian.AppendUint32([]byte{0x80}, uint32(n))
	}
}

// intsetRecord is how Redis writes an intset key: type 11, the key, then
// the blob as a plain RDB string. Matching the whole record, not just the
// blob, pins which key each blob belongs to.
func intsetRecord(key string, blob []byte) []byte {
	r := []byte{11}
	r = append(r, rdbLen(len(key))...)
	r = append(r, key...)
	r = append(r, rdbLen(len(blob))...)
	return append(r, blob...)
}

// sortedMembers parses the JSON members (sorted by bytes there) into
// ascending integers.
func sortedMembers(t *testing.T, key string, members []string) []int64 {
	t.Helper()
	vals := make([]int64, 0, len(members))
	for _, s := range members {
		v, ok := strictint.ParseString(s)
		if !ok {
			t.Fatalf("%s: member %q is not a strict integer", key, s)
		}
		vals = append(vals, v)
	}
	slices.Sort(vals)
	return vals
}

// TestRedisIntsetRDB proves our bytes are Redis's: for each intset key in
// intset.rdb, the blob we build by replaying the SADDs (order from
// testdata/rdb/README.md) appears verbatim in the file Redis wrote.
func TestRedisIntsetRDB(t *testing.T) {
	rdb, vec := loadVector(t, "intset")
	sadd := map[string][]int64{
		"set:i16":     {1, 2, 3, -5, 100, 32767, -32768},
		"set:i32":     {1, 70000, -70000, 2147483647, -2147483648},
		"set:i64":     {1, 5000000000, -9223372036854775808, 9223372036854775807},
		"set:i16:one": {7},
	}
	wantWidth := map[string]int{"set:i16": 2, "set:i32": 4, "set:i64": 8, "set:i16:one": 2}
	keys := vec.Databases["0"]
	if got, want := len(keys), len(sadd); got != want {
		t.Fatalf("intset.json has %d keys, want %d", got, want)
	}
	for key, order := range sadd {
		k, ok := keys[key]
		if !ok {
			t.Fatalf("intset.json lacks %s", key)
		}
		if k.RDBType != 11 || k.RDBBlobEncoding != "raw" {
			t.Fatalf("%s: rdb_type %d, blob %q, want 11, raw", key, k.RDBType, k.RDBBlobEncoding)
		}
		b := New()
		for _, v := range order {
			var added bool
			if b, added = Add(b, v); !added {
				t.Fatalf("%s: Add(%d) = %v, want %v", key, v, added, true)
			}
		}
		if got, want := values(b), sortedMembers(t, key, k.MemberStrings()); !slices.Equal(got, want) {
			t.Errorf("%s: values = %v, want %v", key, got, want)
		}
		if got := FromSorted(sortedMembers(t, key, k.MemberStrings())); !bytes.Equal(got, b) {
			t.Errorf("%s: FromSorted = % x, want % x", key, got, b)
		}
		if got, want := Width(b), wantWidth[key]; got != want {
			t.Errorf("%s: Width = %d, want %d", key, got, want)
		}
		rec := intsetRecord(key, b)
		i := bytes.Index(rdb, rec)
		if i < 0 {
			t.Errorf("%s: record with blob % x not found in intset.rdb", key, b)
			continue
		}
		// Decoding: the blob as it sits in the file must validate.
		end := i + len(rec)
		if err := Validate(rdb[end-len(b):end], true); err != nil {
			t.Errorf("%s: Validate(blob from file) = %v, want nil", key, err)
		}
	}
}

// TestRedisIntsetsInOtherVectors extends the byte comparison to every
// intset in expiry.rdb and mixed_1000.rdb (218 sets of up to 100 members,
// widths 2/4/8). Those sets were only ever SADDed to, so Redis's width is
// the minimal one and FromSorted must reproduce the blob.
func TestRedisIntsetsInOtherVectors(t *testing.T) {
	for _, name := range []string{"expiry", "mixed_1000"} {
		t.Run(name, func(t *testing.T) {
			rdb, vec := loadVector(t, name)
			seen := map[int]int{}
			for _, keys := range vec.Databases {
				for key, k := range keys {
					if k.RDBType != 11 {
						continue
					}
					if k.RDBBlobEncoding != "raw" {
						t.Fatalf("%s: blob encoding %q, want raw", key, k.RDBBlobEncoding)
					}
					b := FromSorted(sortedMembers(t, key, k.MemberStrings()))
					seen[Width(b)]++
					if !bytes.Contains(rdb, intsetRecord(key, b)) {
						t.Errorf("%s: record with blob % x not found in %s.rdb", key, b, name)
					}
				}
			}
			if len(seen) == 0 {
				t.Fatalf("%s.json has no intset keys", name)
			}
			t.Logf("%s: intsets by width: %v", name, seen)
		})
	}
}
