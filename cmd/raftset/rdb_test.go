package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vectorDir is shared/testdata/rdb next to the repository, or under
// $RAFTSET_SHARED; a missing directory fails the test.
func vectorDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RAFTSET_SHARED")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared")
	}
	dir = filepath.Join(dir, "testdata", "rdb")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("RDB vectors not found at %s (set RAFTSET_SHARED): %v", dir, err)
	}
	return dir
}

func runRDBArgs(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runRDB(args, &o, &e)
	return code, o.String(), e.String()
}

func TestRDBCheck(t *testing.T) {
	file := filepath.Join(vectorDir(t), "redis-7.2.6", "rdbcompression-yes", "expiry.rdb")
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
	data, err := os.ReadFile(filepath.Join(vectorDir(t), "redis-7.2.6", "rdbcompression-no", "intset.rdb"))
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
			base := filepath.Join(vectorDir(t), "redis-7.2.6", "rdbcompression-yes", name)
			var want struct {
				Databases map[string]map[string]struct {
					Type                      string            `json:"type"`
					Members                   []json.RawMessage `json:"members"`
					Value                     json.RawMessage   `json:"value"`
					ExpireAtMs                *int64            `json:"expire_at_ms"`
					ObjectEncodingAfterReload string            `json:"object_encoding_after_reload"`
				} `json:"databases"`
			}
			js, err := os.ReadFile(base + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(js, &want); err != nil {
				t.Fatal(err)
			}
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
					DB         int               `json:"db"`
					Key        string            `json:"key"`
					Type       string            `json:"type"`
					Encoding   string            `json:"encoding"`
					Members    []json.RawMessage `json:"members"`
					Value      json.RawMessage   `json:"value"`
					ExpireAtMs *int64            `json:"expire_at_ms"`
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
				if !sameJSON(t, got.Value, w.Value) || !sameJSONList(t, got.Members, w.Members) {
					t.Errorf("key %q = %s %s, want %s %s", got.Key, got.Value, got.Members, w.Value, w.Members)
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

// sameJSON compares two JSON byte-string encodings by the bytes they stand
// for (a string, or {"hex": ...}).
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	return bytes.Equal(decodeBytes(t, a), decodeBytes(t, b)) && (len(a) == 0) == (len(b) == 0)
}

func sameJSONList(t *testing.T, a, b []json.RawMessage) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameJSON(t, a[i], b[i]) {
			return false
		}
	}
	return true
}

func decodeBytes(t *testing.T, m json.RawMessage) []byte {
	t.Helper()
	if len(m) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(m, &s) == nil {
		return []byte(s)
	}
	var h struct{ Hex string }
	if err := json.Unmarshal(m, &h); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	b, err := hex.DecodeString(h.Hex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
