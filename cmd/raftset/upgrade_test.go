package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// previousRelease is the commit of the last release: the rolling-upgrade
// test upgrades a cluster of it to this build.
const previousRelease = "829b70d"

// buildRelease builds cmd/raftset at commit into a temporary directory from
// git archive (no worktree to clean up), or skips the test when git or the
// repository is unavailable and CI is unset.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	skipOrFail := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		skipOrFail("git not found: %v", err)
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		skipOrFail("not in a git checkout: %v", err)
	}
	src := t.TempDir()
	// From a subdirectory git archive would pack only that subdirectory.
	archive := exec.Command(git, "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", commit)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		skipOrFail("git archive %s: %v: %s", commit, err, stderr.String())
	}
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("untar %s: %v: %s", commit, err, out)
	}
	bin := filepath.Join(t.TempDir(), "raftset-"+commit)
	build := exec.Command("go", "build", "-o", bin, "./cmd/raftset")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build raftset at %s: %v: %s", commit, err, out)
	}
	return bin
}

// startBinary runs a raftset binary (bin, or this test binary when bin is
// empty) with args; the cleanup kills it if it still runs.
func startBinary(t *testing.T, bin, addr string, args []string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if bin == "" {
		cmd = exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
	}
	p := &proc{cmd: cmd, addr: addr, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &syncWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s on %s logged:\n%s", filepath.Base(cmd.Path), addr, p.stderr)
		}
	})
	return p
}

// A cluster of the previous release is upgraded to this build one node at a
// time, on the same data directories, while clients write: the cluster
// keeps serving in every mixed state, and no acknowledged write is lost.
// Loopback and no secret: the previous release does not authenticate the
// Raft port, so a mixed cluster with a cluster-secret would not form (see
// docs/operations.md, Upgrade).
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	old := buildRelease(t, previousRelease)
	if out, err := exec.Command(old, "version").Output(); err != nil || !strings.HasPrefix(string(out), "raftset ") {
		t.Fatalf("%s version = %q, %v", old, out, err)
	}

	const size = 3
	type node struct {
		id, addr string
		args     []string
		p        *proc
	}
	nodes := make([]*node, size)
	var peers []string
	raftAddrs := make([]string, size)
	for i := range nodes {
		raftAddrs[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		nodes[i] = &node{id: fmt.Sprintf("n%d", i+1), addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
		peers = append(peers, nodes[i].id+"="+raftAddrs[i])
	}
	base := t.TempDir()
	for i, n := range nodes {
		_, port, _ := net.SplitHostPort(n.addr)
		// A low snapshot threshold makes the new binary restore snapshots
		// the old one wrote, and ship its own to old followers.
		n.args = []string{"--port", port, "--raft-addr", raftAddrs[i], "--node-id", n.id,
			"--peers", strings.Join(peers, ","), "--dir", filepath.Join(base, n.id), "--loglevel", "info",
			"--snapshot-threshold", "100", "--trailing-logs", "50", "--snapshot-interval", "1"}
		n.p = startBinary(t, old, n.addr, n.args)
	}
	for _, n := range nodes {
		waitWritable(t, n.addr)
	}

	// Writers add unique members through every node in turn, moving on
	// when a node does not answer; acked are the members a node said it
	// added.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var acked []string
	var ackCount atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			target := w
			var c *testutil.RESPClient
			for i := 0; ctx.Err() == nil; i++ {
				if c == nil {
					var err error
					if c, err = testutil.DialRESP(nodes[target%size].addr, 2*time.Second); err != nil {
						c, target = nil, target+1
						time.Sleep(20 * time.Millisecond)
						continue
					}
				}
				m := fmt.Sprintf("w%d-%d", w, i)
				r, err := c.Do("SADD", "upgrade", m)
				switch {
				case err != nil:
					c.Close()
					c, target = nil, target+1
				case r == ":1\r\n":
					mu.Lock()
					acked = append(acked, m)
					mu.Unlock()
					ackCount.Add(1)
				default:
					time.Sleep(10 * time.Millisecond) // -TRYAGAIN during an election
				}
			}
			if c != nil {
				c.Close()
			}
		}(w)
	}
	progress := func(what string, more int64) {
		t.Helper()
		from := ackCount.Load()
		testutil.WaitFor(t, 60*time.Second, what, func() bool { return ackCount.Load() >= from+more })
	}
	progress("writes to the old cluster", 500)

	for _, n := range nodes {
		// The new binary must start from a snapshot the old one wrote.
		testutil.WaitFor(t, 30*time.Second, n.id+" to hold a snapshot of the old release", func() bool {
			ents, _ := os.ReadDir(filepath.Join(base, n.id, "snapshots"))
			return len(ents) > 0
		})
		n.p.stop(t) // SIGTERM: the old release exits 0
		n.p = startBinary(t, "", n.addr, n.args)
		waitWritable(t, n.addr)
		progress("writes after upgrading "+n.id, 500)
	}
	stop()
	wg.Wait()

	c := dial(t, nodes[0].addr)
	if r := do(t, c, "INFO", "server"); !strings.Contains(r, "raftset_version:"+version) {
		t.Errorf("INFO server after the upgrade does not name this release:\n%s", r)
	}
	digest := ""
	for _, n := range nodes {
		c := dial(t, n.addr)
		// A node may answer -TRYAGAIN while the last restart's election
		// settles; a client retries.
		var raw string
		testutil.WaitFor(t, 20*time.Second, n.id+" to serve a read", func() bool {
			raw = do(t, c, "SMEMBERS", "upgrade")
			return strings.HasPrefix(raw, "*")
		})
		members := testutil.ParseReply(raw).Strings()
		have := make(map[string]bool, len(members))
		for _, m := range members {
			have[m] = true
		}
		lost := 0
		for _, m := range acked {
			if !have[m] {
				lost++
				if lost <= 5 {
					t.Errorf("%s: acknowledged member %s is missing", n.id, m)
				}
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d acknowledged members lost", n.id, lost, len(acked))
		}
		d := do(t, c, "DEBUG", "DIGEST")
		if digest != "" && d != digest {
			t.Errorf("%s: DEBUG DIGEST %q differs from %q", n.id, d, digest)
		}
		digest = d
	}
	t.Logf("%d acknowledged writes across the upgrade", len(acked))
}
