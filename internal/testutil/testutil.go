// Package testutil holds helpers shared by raftset's tests: where the RDB
// test vectors live and how their JSON reads, a RESP client, a logger that
// shows a failing test's logs, and polling for conditions that are eventual
// by nature. Only tests import it.
package testutil

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Logger returns an hclog logger at Debug level that buffers what it is
// given and prints it through t.Log only if the test fails, so passing
// tests stay quiet even with -v. Writes after the test ended are dropped
// (a node still shutting down must not log into a finished test).
func Logger(t testing.TB, name string) hclog.Logger {
	w := &logBuffer{}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if t.Failed() && w.buf.Len() > 0 {
			t.Log(name + " logs:\n" + w.buf.String())
		}
		w.done = true
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: w})
}

// maxLogBuffer caps what one test's logs may hold: a test that loops
// logging should not exhaust memory on top of failing.
const maxLogBuffer = 8 << 20

type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done && w.buf.Len() < maxLogBuffer {
		w.buf.Write(p)
	}
	return len(p), nil
}

// WaitFor polls cond until it holds or timeout passes. Use it only for
// conditions that are eventual by nature (an election, a follower catching
// up), never in place of a reply or a future that says when work is done.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Within polls cond until it holds (true) or timeout passes (false): WaitFor
// for a test that tries something again when it did not happen.
func Within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
