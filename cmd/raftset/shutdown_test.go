package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestShutdownCommand runs raftset as a process: SHUTDOWN closes the
// client's connection without a reply and the process exits 0, as on
// SIGTERM; a restart on the same directory has every write. NOSAVE leaves
// the data in the Raft log only (the restart replays it); SAVE takes a
// snapshot first (the restart restores it). Both are behind requirepass.
func TestShutdownCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	auth := []string{"--requirepass", "pw"}

	p := startProc(t, dir, auth...)
	c := dialWhenListening(t, p.addr)
	if r := do(t, c, "SHUTDOWN"); r != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("SHUTDOWN before AUTH = %q", r)
	}
	if r := do(t, c, "AUTH", "pw"); r != "+OK\r\n" {
		t.Fatalf("AUTH = %q", r)
	}
	waitAuthedWritable(t, c)
	if r := do(t, c, "SADD", "s", "a", "b", "c"); r != ":3\r\n" {
		t.Fatalf("SADD = %q", r)
	}
	shutdownAndWait(t, p, c, "SHUTDOWN", "NOSAVE")
	if log := logged(p); strings.Contains(log, "snapshot complete") || !strings.Contains(log, "command=SHUTDOWN") {
		t.Fatalf("SHUTDOWN NOSAVE: log does not show a shutdown by command without a snapshot:\n%s", log)
	}

	p = startProc(t, dir, auth...)
	c = dialWhenListening(t, p.addr)
	do(t, c, "AUTH", "pw")
	waitAuthedWritable(t, c)
	if strings.Contains(logged(p), "restored snapshot") {
		t.Fatalf("restart after NOSAVE restored a snapshot")
	}
	if r := do(t, c, "SCARD", "s"); r != ":3\r\n" {
		t.Fatalf("SCARD after SHUTDOWN NOSAVE and restart = %q, want 3 (replayed from the log)", r)
	}
	if r := do(t, c, "SADD", "s", "d"); r != ":1\r\n" {
		t.Fatalf("SADD = %q", r)
	}
	shutdownAndWait(t, p, c, "shutdown", "save", "now")
	if !strings.Contains(logged(p), "snapshot complete") {
		t.Fatalf("SHUTDOWN SAVE took no snapshot:\n%s", logged(p))
	}

	p = startProc(t, dir, auth...)
	c = dialWhenListening(t, p.addr)
	do(t, c, "AUTH", "pw")
	waitAuthedWritable(t, c)
	if !strings.Contains(logged(p), "restored snapshot") {
		t.Fatalf("restart after SHUTDOWN SAVE restored no snapshot:\n%s", logged(p))
	}
	if r := do(t, c, "SMEMBERS", "s"); r != "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n" {
		t.Fatalf("SMEMBERS after SHUTDOWN SAVE and restart = %q", r)
	}
	p.stop(t)
}

// logged returns what the process logged so far, read under the lock its
// stderr writer holds.
func logged(p *proc) string {
	w := p.cmd.Stderr.(*syncWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// dialWhenListening connects to a process that may not listen yet.
func dialWhenListening(t *testing.T, addr string) *testutil.RESPClient {
	t.Helper()
	var c *testutil.RESPClient
	testutil.WaitFor(t, 20*time.Second, "raftset to listen on "+addr, func() bool {
		var err error
		c, err = testutil.DialRESP(addr, 10*time.Second)
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitAuthedWritable waits, on an authenticated connection, until the node
// has elected itself and accepts writes.
func waitAuthedWritable(t *testing.T, c *testutil.RESPClient) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, "the node to accept writes", func() bool {
		r, err := c.Do("SET", "__raftset_ready", "1")
		return err == nil && r == "+OK\r\n"
	})
	if r := do(t, c, "DEL", "__raftset_ready"); r != ":1\r\n" {
		t.Fatalf("DEL __raftset_ready = %q", r)
	}
}

// shutdownAndWait sends SHUTDOWN: the connection must close without a reply
// and the process exit 0 within a bound.
func shutdownAndWait(t *testing.T, p *proc, c *testutil.RESPClient, args ...string) {
	t.Helper()
	r, err := c.Do(args...)
	if r != "" || !errors.Is(err, io.EOF) {
		t.Fatalf("%q = %q, %v; want the connection closed without a reply", args, r, err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("raftset still running 30s after %q", args)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("raftset exited %d after %q:\n%s", code, args, logged(p))
	}
}
