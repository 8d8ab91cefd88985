package listpack

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"raftset/internal/testutil"
)

// rdbListpack extracts the raw listpack blob of key from an RDB file
// written with rdbcompression no: <type 20> <key string> <blob string>.
// Only the 6-bit, 14-bit and 32-bit RDB length forms can occur here.
func rdbListpack(t *testing.T, file []byte, key string) []byte {
	t.Helper()
	rec := append([]byte{20, byte(len(key))}, key...)
	i := bytes.Index(file, rec)
	if i < 0 {
		t.Fatalf("record for %q not found", key)
	}
	i += len(rec)
	var n int
	switch c := file[i]; c >> 6 {
	case 0:
		n, i = int(c&0x3F), i+1
	case 1:
		n, i = int(c&0x3F)<<8|int(file[i+1]), i+2
	case 2:
		if c != 0x80 {
			t.Fatalf("%q: unexpected RDB length byte %#x", key, c)
		}
		n, i = int(file[i+1])<<24|int(file[i+2])<<16|int(file[i+3])<<8|int(file[i+4]), i+5
	default:
		t.Fatalf("%q: blob is RDB-encoded (%#x), want raw", key, c)
	}
	return file[i : i+n]
}

// TestRedisRDBListpacks rebuilds every listpack set of Redis 7.2.6's test
// vectors with Append, in the order the SADD commands sent the members
// (the lists below), and requires Redis's exact bytes to appear in the .rdb
// file. Then it extracts the blobs and checks them
// against the JSON's member lists.
func TestRedisRDBListpacks(t *testing.T) {
	var m128 []string
	for i := range 128 {
		m128 = append(m128, fmt.Sprintf("m%03d", i))
	}
	for _, tc := range []struct {
		file, key string
		sadd      []string
	}{
		{"listpack_mixed", "set:lp:mixed", []string{"apple", "banana", "42", "-7", "3.14", "", "cherry pie", "18446744073709551616", "100000"}},
		{"listpack_mixed", "set:lp:strs", []string{"x", "y", "z"}},
		// An intset {10,20,30} converted to a listpack (integers appended
		// ascending), then "thirty-one" appended.
		{"listpack_mixed", "set:lp:int-then-str", []string{"10", "20", "30", "thirty-one"}},
		{"listpack_128", "set:lp:128", m128},
		{"listpack_64byte", "set:lp:64b", []string{"short", string(rep("A", 32)) + string(rep("b", 32)), "12"}},
	} {
		v, file := testutil.LoadRDBVector(t, filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-no", tc.file+".rdb"))
		var ms [][]byte
		for _, s := range tc.sadd {
			ms = append(ms, []byte(s))
		}
		b := build(ms...)
		if !bytes.Contains(file, b) {
			t.Errorf("%s %s: Append-built listpack % X not found in the .rdb", tc.file, tc.key, trunc(b))
		}
		if f := FromMembers(ms); !bytes.Equal(f, b) {
			t.Errorf("%s %s: FromMembers = % X, want % X", tc.file, tc.key, trunc(f), trunc(b))
		}
		lp := rdbListpack(t, file, tc.key)
		if !bytes.Equal(lp, b) {
			t.Errorf("%s %s: blob in .rdb = % X, want % X", tc.file, tc.key, trunc(lp), trunc(b))
		}
		if err := ValidateSet(lp); err != nil {
			t.Errorf("%s %s: ValidateSet = %v, want nil", tc.file, tc.key, err)
		}
		checkIterable(t, lp)

		k, ok := v.Databases["0"][tc.key]
		if !ok || k.RDBType != 20 {
			t.Fatalf("%s: key %q missing or not rdb_type 20 in JSON", tc.file, tc.key)
		}
		want := k.MemberStrings()
		var got []string
		for _, m := range members(t, lp) {
			got = append(got, string(m))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: members = %q, want %q", tc.file, tc.key, got, want)
		}
		for _, s := range tc.sadd {
			if Find(lp, []byte(s)) < 0 {
				t.Errorf("Find(%q) = -1 in %s, want an offset", s, tc.key)
			}
		}
	}
}
