package testutil

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RDBDir returns the repository's testdata/rdb: dump files written by
// Redis 7.2.6 and 7.4.1, each with a JSON file of what it holds (see its
// README.md). The tests run in their package's directory, so the folder is
// found by walking up to go.mod.
func RDBDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: no go.mod above the test's directory")
		}
		dir = parent
	}
	rdb := filepath.Join(dir, "testdata", "rdb")
	if fi, err := os.Stat(rdb); err != nil || !fi.IsDir() {
		t.Fatalf("testutil: RDB test vectors not found at %s: %v", rdb, err)
	}
	return rdb
}

// RDBVectors returns every Redis-written .rdb test vector.
func RDBVectors(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RDBDir(t), "*", "*", "*.rdb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testutil: no RDB vectors found: %v", err)
	}
	return files
}

// RDBVector is a vector's JSON: what Redis held when it wrote the file
// (testdata/rdb/README.md describes every field).
type RDBVector struct {
	Vector           string                       `json:"vector"`
	RDBVersion       int                          `json:"rdb_version"`
	RDBCompression   string                       `json:"rdbcompression"`
	AuxFieldsPresent []string                     `json:"aux_fields_present"`
	KeyCount         int                          `json:"key_count"`
	DebugDigest      string                       `json:"debug_digest"`
	Databases        map[string]map[string]RDBKey `json:"databases"`
}

// RDBKey is one key of a vector.
type RDBKey struct {
	Type                      string   `json:"type"` // "set" or "string"
	Members                   []Bytes  `json:"members"`
	Card                      int      `json:"card"`
	Value                     *Bytes   `json:"value"`
	ExpireAtMs                *int64   `json:"expire_at_ms"`
	ObjectEncoding            string   `json:"object_encoding"`
	ObjectEncodingAfterReload string   `json:"object_encoding_after_reload"`
	RDBType                   int      `json:"rdb_type"`
	RDBTypeName               string   `json:"rdb_type_name"`
	RDBStringEncoding         string   `json:"rdb_string_encoding"`
	RDBBlobEncoding           string   `json:"rdb_blob_encoding"`
	RDBElementEncodings       []string `json:"rdb_element_encodings"`
	DebugDigestValue          string   `json:"debug_digest_value"`
}

// MemberStrings returns the members (sorted by bytes, as the JSON lists
// them) as strings.
func (k RDBKey) MemberStrings() []string {
	out := make([]string, len(k.Members))
	for i, m := range k.Members {
		out[i] = string(m)
	}
	return out
}

// Bytes is a byte string as the vectors' JSON writes it: a JSON string when
// the bytes are valid UTF-8, else {"hex": "..."}.
type Bytes []byte

// UnmarshalJSON reads either form.
func (b *Bytes) UnmarshalJSON(p []byte) error {
	var s string
	if err := json.Unmarshal(p, &s); err == nil {
		*b = []byte(s)
		return nil
	}
	var h struct {
		Hex *string `json:"hex"`
	}
	if err := json.Unmarshal(p, &h); err != nil || h.Hex == nil {
		return fmt.Errorf("byte string %s: neither a string nor {\"hex\": ...}", p)
	}
	v, err := hex.DecodeString(*h.Hex)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// LoadRDBVector reads a vector: the .rdb file at path and its JSON beside it.
func LoadRDBVector(t testing.TB, path string) (*RDBVector, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(strings.TrimSuffix(path, ".rdb") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var v RDBVector
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatalf("%s.json: %v", strings.TrimSuffix(path, ".rdb"), err)
	}
	return &v, data
}
