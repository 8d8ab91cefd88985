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

// previousRelease is the newest release before HEAD, which the
// rolling-upgrade test upgrades from: its tag when the clone has tags (git
// describe from HEAD's parent, so that a tagged HEAD upgrades from the
// release before it), else the commit of the newest row of RELEASES.md that
// is not HEAD (a CI checkout may carry no tags).
func previousRelease(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD^").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	head := ""
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		head = strings.TrimSpace(string(out))
	}
	rel, err := releasesFromFile(filepath.Join("..", "..", "RELEASES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rel {
		if r.commit != head {
			return r.commit
		}
	}
	t.Fatal("RELEASES.md records no release before HEAD")
	return ""
}

type release struct{ tag, commit string }

// releasesFromFile reads the tag → commit table of RELEASES.md, newest
// first: the rows of its first table whose first cell is a vX.Y.Z tag.
func releasesFromFile(path string) ([]release, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the release history: %w", err)
	}
	var out []release
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		tag, commit := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if strings.HasPrefix(tag, "v") && len(commit) == 40 {
			out = append(out, release{tag, commit})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no release rows (| vX.Y.Z | 40-hex commit | ...)", path)
	}
	return out, nil
}

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
	// The commit stamped as the Makefile does: git archive carries no VCS
	// data, so the binary would say commit=unknown.
	stamp := commit
	if rev, err := exec.Command(git, "rev-parse", commit+"^{commit}").Output(); err == nil {
		stamp = strings.TrimSpace(string(rev)) // a tag names its commit
	}
	build := exec.Command("go", "build", "-ldflags", "-X main.commit="+stamp, "-o", bin, "./cmd/raftset")
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
// The nodes share a cluster-secret: since v0.4.0 every release
// authenticates the Raft port and the internal commands with the same
// handshake, so a mixed cluster must form with it (docs/operations.md,
// Upgrade).
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	prev := previousRelease(t)
	built := time.Now()
	old := buildRelease(t, prev)
	t.Logf("built %s in %s", prev, time.Since(built).Round(time.Second))
	if out, err := exec.Command(old, "version").Output(); err != nil || !strings.HasPrefix(string(out), "raftset ") {
		t.Fatalf("%s version = %q, %v", old, out, err)
	} else {
		t.Logf("upgrading from %s (%s)", prev, strings.TrimSpace(string(out)))
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
			"--snapshot-threshold", "100", "--trailing-logs", "50", "--snapshot-interval", "1",
			"--cluster-secret", "upgrade-secret"}
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

// TestReleaseHistory: RELEASES.md, which a clone without tags relies on,
// names the commit every tag of the clone points at, and its newest row is
// the release the upgrade test starts from when tags are missing.
func TestReleaseHistory(t *testing.T) {
	rel, err := releasesFromFile(filepath.Join("..", "..", "RELEASES.md"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, r := range rel {
		recorded[r.tag] = r.commit
	}
	if _, ok := recorded["v0.4.0"]; !ok {
		t.Errorf("RELEASES.md lacks v0.4.0: %v", rel)
	}
	out, err := exec.Command("git", "tag", "--list", "v[0-9]*").Output()
	if err != nil {
		t.Logf("no git tags to compare with: %v", err)
		return
	}
	for _, tag := range strings.Fields(string(out)) {
		c, err := exec.Command("git", "rev-parse", tag+"^{commit}").Output()
		if err != nil {
			t.Fatalf("git rev-parse %s: %v", tag, err)
		}
		if got, want := recorded[tag], strings.TrimSpace(string(c)); got != want {
			t.Errorf("RELEASES.md records %s at %q, the tag points at %s", tag, got, want)
		}
	}
}
