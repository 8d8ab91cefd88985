// Package testutil holds helpers shared by raftset's tests: where the shared
// test vectors live, a logger that writes to t.Log, and polling for
// conditions that are eventual by nature. Only tests import it.
package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SharedDir returns the shared/ folder that sits beside the repository (as it
// does for developers and in CI), or $RAFTSET_SHARED. A missing folder fails
// the test: tests that need Redis's own files must not pass without them.
func SharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("RAFTSET_SHARED"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testutil: cannot locate the source tree")
	}
	// file is <repo>/internal/testutil/testutil.go; shared/ is <repo>/../shared.
	d := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	if _, err := os.Stat(filepath.Join(d, "testdata", "rdb")); err != nil {
		t.Fatalf("testutil: shared test data not found at %s (set RAFTSET_SHARED): %v", d, err)
	}
	return d
}

// RDBVectors returns every Redis-written .rdb test vector.
func RDBVectors(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(SharedDir(t), "testdata", "rdb", "*", "*", "*.rdb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testutil: no RDB vectors found: %v", err)
	}
	return files
}

// Logger returns an hclog logger that writes through t.Log, so output shows
// only for failing tests (or with -v).
func Logger(t testing.TB, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclog.Debug,
		Output: tWriter{t},
	})
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// WaitFor polls cond until it holds or timeout passes. Use it only for
// conditions that are eventual by nature (an election, a follower catching
// up), never in place of a reply or a future that says when work is done.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
