package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"raftset/internal/testutil"
)

func runRDBArgs(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runRDB(args, &o, &e)
	return code, o.String(), e.String()
}

func TestRDBCheck(t *testing.T) {
	file := filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-yes", "expiry.rdb")
	code, out, errOut := runRDBArgs("check", file)
	if code != 0 {
		t.Fatalf("rdb check exit = %d, want 0; stderr: %s", code, errOut)
	}
	for _, want := range []string{"RDB version: 11", "AUX redis-ver = 7.2.6", "db 0: 5 keys, 4 with expiry",
		"set hashtable        1", "set intset           1", "set listpack         1", "string embstr        2",
		"keys with expiry: 4", "checksum: OK", "OK: 5 keys"} {
		if !strings.Contains(out, want) {
			t.Errorf("rdb check output lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := runRDBArgs("check", "--db", "1", file); code != 0 || !strings.Contains(out, "OK: 0 keys") {
		t.Errorf("rdb check --db 1 = %d,\n%s\nwant 0 keys", code, out)
	}
}

func TestRDBCheckCorrupt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-no", "intset.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, bad := range map[string][]byte{
		"flipped":   func() []byte { b := bytes.Clone(data); b[len(b)/2] ^= 0x10; return b }(),
		"truncated": data[:len(data)-5],
		"trailing":  append(bytes.Clone(data), 0),
	} {
		path := filepath.Join(dir, name+".rdb")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runRDBArgs("check", path)
		if code != 1 || !strings.Contains(errOut, "FAIL") {
			t.Errorf("rdb check of a %s file: exit %d, stderr %q; want exit 1 and FAIL", name, code, errOut)
		}
		if name != "trailing" {
			if code, _, _ := runRDBArgs("dump", path); code != 1 {
				t.Errorf("rdb dump of a %s file: exit %d, want 1", name, code)
			}
		}
	}
	if code, _, _ := runRDBArgs("check", filepath.Join(dir, "missing.rdb")); code != 1 {
		t.Errorf("rdb check of a missing file: exit %d, want 1", code)
	}
}

func TestRDBUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frob"}, {"check"}, {"dump", "a", "b"}, {"check", "--db", "x", "f"}} {
		if code, _, errOut := runRDBArgs(args...); code != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("runRDB(%q) = %d, %q; want 2 and usage", args, code, errOut)
		}
	}
}

// TestRDBDump compares the JSON lines with the vectors' own JSON.
func TestRDBDump(t *testing.T) {
	for _, name := range []string{"strings", "expiry", "listpack_mixed", "hashtable_65byte", "intset"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-yes", name)
			want, _ := testutil.LoadRDBVector(t, base+".rdb")
			code, out, errOut := runRDBArgs("dump", base+".rdb")
			if code != 0 {
				t.Fatalf("rdb dump exit = %d: %s", code, errOut)
			}
			lines := 0
			sc := bufio.NewScanner(strings.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines++
				var got struct {
					DB         int              `json:"db"`
					Key        string           `json:"key"`
					Type       string           `json:"type"`
					Encoding   string           `json:"encoding"`
					Members    []testutil.Bytes `json:"members"`
					Value      *testutil.Bytes  `json:"value"`
					ExpireAtMs *int64           `json:"expire_at_ms"`
				}
				if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				w, ok := want.Databases["0"][got.Key]
				if got.DB != 0 || !ok {
					t.Errorf("unexpected key %q in db %d", got.Key, got.DB)
					continue
				}
				if got.Type != w.Type || got.Encoding != w.ObjectEncodingAfterReload {
					t.Errorf("key %q = %s/%s, want %s/%s", got.Key, got.Type, got.Encoding, w.Type, w.ObjectEncodingAfterReload)
				}
				if !sameBytes(got.Value, w.Value) || !slices.EqualFunc(got.Members, w.Members, sameMember) {
					t.Errorf("key %q = %q %q, want %q %q", got.Key, deref(got.Value), got.Members, deref(w.Value), w.Members)
				}
				if (got.ExpireAtMs == nil) != (w.ExpireAtMs == nil) || (got.ExpireAtMs != nil && *got.ExpireAtMs != *w.ExpireAtMs) {
					t.Errorf("key %q expire_at_ms = %v, want %v", got.Key, got.ExpireAtMs, w.ExpireAtMs)
				}
			}
			if lines != len(want.Databases["0"]) {
				t.Errorf("dump printed %d keys, want %d", lines, len(want.Databases["0"]))
			}
		})
	}
}

// sameBytes compares two optional byte strings: both absent, or equal.
func sameBytes(a, b *testutil.Bytes) bool {
	return (a == nil) == (b == nil) && (a == nil || bytes.Equal(*a, *b))
}

func sameMember(a, b testutil.Bytes) bool { return bytes.Equal(a, b) }

func deref(b *testutil.Bytes) []byte {
	if b == nil {
		return nil
	}
	return *b
}
