package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"raftset/internal/testutil"
)

// TestDigestOfStoppedNode: raftset digest --dir rebuilds a stopped node's
// state at an index from its snapshot and log, as DEBUG DIGEST answered it
// at that index; it refuses a running node, an index the node no longer
// holds the history of, and one past its log.
func TestDigestOfStoppedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	for _, store := range []string{"wal", "bolt"} {
		t.Run(store, func(t *testing.T) { testDigestOfStoppedNode(t, store) })
	}
}

func testDigestOfStoppedNode(t *testing.T, store string) {
	dir := filepath.Join(t.TempDir(), "data")
	// trailing-logs 1: SAVE drops the log it covers, so the state before
	// the snapshot is gone for good.
	p := startProc(t, dir, "--raft-log-store", store,
		"--trailing-logs", "1", "--snapshot-threshold", "100000000", "--snapshot-log-size", "0")
	waitWritable(t, p.addr)
	c := dial(t, p.addr)
	digest := func() string { return testutil.ParseReply(do(t, c, "DEBUG", "DIGEST")).Str }
	applied := func() string { return infoField(t, c, "raft_applied_index") }
	for i := range 20 {
		do(t, c, "SADD", fmt.Sprintf("s%d", i%3), fmt.Sprint(i), fmt.Sprintf("m%d", i))
	}
	snapDigest := digest()
	if r := do(t, c, "SAVE"); r != "+OK\r\n" {
		t.Fatalf("SAVE = %q", r)
	}
	// Raft's index, which counts its own entries (a barrier) besides writes.
	snapIndex := infoField(t, c, "raft_last_snapshot_index")
	do(t, c, "SET", "k", "v")
	midDigest, midIndex := digest(), applied()
	for i := range 10 {
		do(t, c, "SREM", "s1", fmt.Sprint(i))
	}
	lastDigest, lastIndex := digest(), applied()

	var out, errOut bytes.Buffer
	if code := run([]string{"digest", "--dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "stop the node first") {
		t.Errorf("digest of a running node exited %d: %q", code, errOut.String())
	}
	p.stop(t)
	before := dirContents(t, dir)

	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		want  string // stdout's prefix, or stderr's substring when code != 0
		wantS string // stdout's substring
	}{
		// The log may end in Raft's own entries (a barrier) past the last
		// write: the same state.
		{"the last entry", nil, 0, lastDigest + " index ", "(snapshot " + snapIndex + " + "},
		{"the last write's index", []string{"--index", lastIndex}, 0, lastDigest + " index " + lastIndex + " ", "(snapshot " + snapIndex + " + "},
		{"the snapshot's index", []string{"--index", snapIndex}, 0, snapDigest + " index " + snapIndex + " ", "(snapshot " + snapIndex + " + 0 log entries"},
		{"between snapshot and end", []string{"--index", midIndex}, 0, midDigest + " index " + midIndex + " ", "(snapshot " + snapIndex + " + "},
		{"before the snapshot, log dropped", []string{"--index", "2"}, 1, "no longer holds index 2's history", ""},
		{"past the log", []string{"--index", "1000000"}, 1, "index 1000000 is past the node's log", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"digest", "--dir", dir}, tc.args...), &out, &errOut)
			switch {
			case code != tc.code:
				t.Errorf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errOut.String())
			case code == 0 && (!strings.HasPrefix(out.String(), tc.want) || !strings.Contains(out.String(), tc.wantS)):
				t.Errorf("stdout %q, want %q... with %q", out.String(), tc.want, tc.wantS)
			case code != 0 && !strings.Contains(errOut.String(), tc.want):
				t.Errorf("stderr %q, want %q", errOut.String(), tc.want)
			}
		})
	}
	if after := dirContents(t, dir); !maps.Equal(before, after) {
		t.Errorf("raftset digest changed the node's directory:\nbefore %v\nafter  %v", before, after)
	}
	if code := run([]string{"digest", "--dir", t.TempDir()}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "raft.db") {
		t.Errorf("digest of an empty directory exited %d: %q", code, errOut.String())
	}
	if code := run([]string{"digest"}, &out, &errOut); code != 2 {
		t.Errorf("digest without --dir or FILE exited %d, want 2", code)
	}
}

// dirContents maps every file under dir to a hash of its bytes.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(path, dir)] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDigestOfFile: raftset digest FILE of dumps Redis 7.2 wrote is the
// DEBUG DIGEST of a raftset that imported them, and says the file has no
// log index.
func TestDigestOfFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs raftset processes")
	}
	for _, name := range []string{"intset", "mixed_1000", "strings"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-yes", name+".rdb")
			var out, errOut bytes.Buffer
			if code := run([]string{"digest", file}, &out, &errOut); code != 0 {
				t.Fatalf("raftset digest %s exited %d: %s", name, code, errOut.String())
			}
			want := testutil.ParseReply(digestOf(t, importProc(t, file))).Str + " (" + file + ": "
			if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "no raftset-index") {
				t.Errorf("raftset digest = %q, want %q... and no raftset-index", out.String(), want)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"digest", filepath.Join(t.TempDir(), "missing.rdb")}, &out, &errOut); code != 1 {
		t.Errorf("digest of a missing file exited %d, want 1", code)
	}
}
