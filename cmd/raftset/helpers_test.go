package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
	"raftset/resp"
)

// startNode runs a single-node raftset in this process on free loopback
// ports, in a temporary data dir unless dir is given, and stops it when the
// test ends. It returns the client address.
func startNode(t *testing.T, dir string, extra ...string) (string, *node) {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "data")
	}
	args := append([]string{"--port", fmt.Sprint(testutil.FreePort(t)),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		"--dir", dir, "--loglevel", "warn"}, extra...)
	n := runNode(t, args...)
	addr := n.ln.Addr().String()
	waitWritable(t, addr)
	return addr, n
}

// runNode starts a node in this process with the given command-line
// arguments and stops it when the test ends; it does not wait for a leader.
func runNode(t *testing.T, args ...string) *node {
	t.Helper()
	cfg, err := LoadConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- n.server.Serve(n.ln) }()
	t.Cleanup(func() {
		if err := n.close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-served; err != nil && !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return n
}

// waitWritable waits until the node has elected itself and accepts writes.
// In cluster mode a follower that answers -MOVED to its leader is ready: it
// routes writes, to the client rather than for it.
func waitWritable(t *testing.T, addr string) {
	t.Helper()
	var c *testutil.RESPClient
	moved := false
	testutil.WaitFor(t, 30*time.Second, "the node to accept writes", func() bool {
		if c == nil {
			var err error
			if c, err = testutil.DialRESP(addr, 10*time.Second); err != nil {
				return false // not listening yet
			}
			opened := c
			t.Cleanup(func() { opened.Close() })
		}
		r, err := c.Do("SET", "__raftset_ready", "1")
		if err != nil {
			// A timed-out reply may still arrive: this connection is out of
			// step, so the next try dials afresh.
			c.Close()
			c = nil
			return false
		}
		moved = strings.HasPrefix(r, "-MOVED ")
		return r == "+OK\r\n" || moved
	})
	if moved {
		return
	}
	r, err := c.Do("DEL", "__raftset_ready")
	// -TRYAGAIN says the write was certainly not applied (a sharded node
	// whose cluster map was not yet known here): do as it says.
	testutil.Within(10*time.Second, func() bool {
		if err != nil || !strings.HasPrefix(r, "-TRYAGAIN ") {
			return true
		}
		r, err = c.Do("DEL", "__raftset_ready")
		return false
	})
	// The shard's leadership may move between the SET and the DEL (a
	// sharded node): delete where it went, as a cluster client would.
	for hops := 0; hops < 5 && err == nil && strings.HasPrefix(r, "-MOVED "); hops++ {
		f := strings.Fields(strings.TrimSpace(r))
		to, derr := testutil.DialRESP(f[len(f)-1], 10*time.Second)
		if derr != nil {
			t.Fatalf("DEL __raftset_ready moved to %s: %v", f[len(f)-1], derr)
		}
		r, err = to.Do("DEL", "__raftset_ready")
		to.Close()
	}
	if err != nil || r != ":1\r\n" {
		t.Fatalf("DEL __raftset_ready = %q, %v", r, err)
	}
}

func dial(t *testing.T, addr string) *testutil.RESPClient {
	t.Helper()
	c, err := testutil.DialRESP(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// do sends a command and fails the test on a transport error.
func do(t *testing.T, c *testutil.RESPClient, args ...string) string {
	t.Helper()
	r, err := c.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return r
}
