package main

import (
	"syscall"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestClusterProcessesWaitPausedFollower: WAIT through the real binary
// counts the followers that applied the connection's write; a follower
// stopped with SIGSTOP is not counted, and once continued it catches up and
// is.
func TestClusterProcessesWaitPausedFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	fol := followersOf(nodes, l)
	c := dial(t, l.addr)
	if r := do(t, c, "SADD", "s", "a"); r != ":1\r\n" {
		t.Fatalf("SADD = %q", r)
	}
	// Both followers publish their client address once they see the
	// leader; until then WAIT cannot ask them.
	testutil.WaitFor(t, 20*time.Second, "WAIT 2 to count both followers", func() bool {
		return do(t, c, "WAIT", "2", "1000") == ":2\r\n"
	})

	paused := fol[0].p
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	cont := func() {
		if !continued {
			continued = true
			_ = paused.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(cont) // the test may fail before it continues the process
	if r := do(t, c, "SADD", "s", "b"); r != ":1\r\n" {
		t.Fatalf("SADD with a follower paused = %q", r)
	}
	start := time.Now()
	if r := do(t, c, "WAIT", "1", "0"); r != ":1\r\n" {
		t.Errorf("WAIT 1 0 with a follower paused = %q", r)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("WAIT 1 0 took %s with a follower paused", el)
	}
	if r := do(t, c, "WAIT", "2", "500"); r != ":1\r\n" {
		t.Errorf("WAIT 2 500 with a follower paused = %q", r)
	}
	cont()
	if r := do(t, c, "WAIT", "2", "0"); r != ":2\r\n" {
		t.Errorf("WAIT 2 0 after SIGCONT = %q", r)
	}
}
