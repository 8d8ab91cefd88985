package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestReadyzShuttingDownProcess: with shutdown-drain, a node told to stop
// (SIGTERM, or SHUTDOWN) answers /readyz 503 "shutting down" while it still
// serves clients and /livez, which is the window a load balancer needs to
// move clients away; a second SIGTERM or SHUTDOWN stops it at once, exit 0.
func TestReadyzShuttingDownProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs raftset processes")
	}
	for _, tc := range []struct {
		name string
		stop func(t *testing.T, p *proc)
	}{
		{"SIGTERM", func(t *testing.T, p *proc) {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		{"SHUTDOWN", func(t *testing.T, p *proc) {
			c := dial(t, p.addr)
			// No reply: the connection closes once the stop is under way.
			if r, err := c.Do("SHUTDOWN"); err == nil {
				t.Fatalf("SHUTDOWN answered %q", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
			// A drain far longer than the test: only the second stop ends it.
			p := startProc(t, filepath.Join(t.TempDir(), "data"), "--metrics-addr", maddr, "--shutdown-drain", "10m")
			waitWritable(t, p.addr)
			testutil.WaitFor(t, 20*time.Second, "/readyz to answer 200", func() bool {
				code, _ := httpGet(t, "http://"+maddr+"/readyz", "")
				return code == 200
			})
			tc.stop(t, p)
			testutil.WaitFor(t, 20*time.Second, "/readyz to answer 503 shutting down", func() bool {
				code, body := httpGet(t, "http://"+maddr+"/readyz", "")
				return code == 503 && body == "shutting down\n"
			})
			// Still a working node: the port is open and writes commit.
			c := dial(t, p.addr)
			if r := do(t, c, "SADD", "drain", "x"); r != ":1\r\n" {
				t.Errorf("SADD while draining = %q, want :1", r)
			}
			if code, body := httpGet(t, "http://"+maddr+"/livez", ""); code != 200 || body != "ok\n" {
				t.Errorf("/livez while draining = %d %q", code, body)
			}
			select {
			case <-p.done:
				t.Fatal("the node stopped before the drain ended")
			default:
			}
			tc.stop(t, p)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				t.Fatal("a second stop did not end the drain")
			}
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit status %d after a drained stop, want 0", code)
			}
			if log := logged(p); !strings.Contains(log, "draining") || !strings.Contains(log, "drain cut short") {
				t.Errorf("the log does not show the drain:\n%s", log)
			}
		})
	}
}

// TestReadyzCatchingUpProcess: a follower restarted behind a leader that
// committed many entries meanwhile answers /readyz 503 "catching up:
// applied X of Y", with Y at least the leader's commit index before the
// restart, until it has applied Y; then 200. One entry per AppendEntries
// (raft-max-append-entries 1) makes the catch-up long enough to be seen.
func TestReadyzCatchingUpProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	maddrs := map[string]string{}
	perNode := map[string][]string{}
	for _, id := range []string{"n1", "n2", "n3"} {
		maddrs[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		perNode[id] = []string{"--metrics-addr", maddrs[id]}
	}
	nodes := startClusterWith(t, 3, perNode, "--raft-max-append-entries", "1")
	l := leaderOf(t, nodes, nil)
	f := followersOf(nodes, l)[0]
	f.p.stop(t)

	// One write at a time: each its own log entry.
	c := dial(t, l.addr)
	const entries = 600
	for i := range entries {
		// With one of three nodes down, a loaded machine may still see an
		// election: a write whose outcome is unknown, or refused without a
		// leader, is sent again (a follower forwards it to the new leader),
		// and answers :0 if the first was applied after all.
		var r string
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("SADD %d to commit", i), func() bool {
			r = do(t, c, "SADD", "s", strconv.Itoa(i))
			return !strings.HasPrefix(r, "-CLUSTERDOWN") && !strings.HasPrefix(r, "-TRYAGAIN")
		})
		if r != ":1\r\n" && r != ":0\r\n" {
			t.Fatalf("SADD %d = %q", i, r)
		}
	}
	commitBefore, _ := strconv.ParseUint(infoField(t, c, "raft_commit_index"), 10, 64)

	f.start(t)
	url := "http://" + maddrs[f.id] + "/readyz"
	var seen []string
	var target uint64
	testutil.WaitFor(t, 120*time.Second, f.id+"'s /readyz to answer 200", func() bool {
		code, body := httpGet(t, url, "")
		if len(seen) == 0 || seen[len(seen)-1] != body {
			seen = append(seen, body)
		}
		if code == 503 && strings.HasPrefix(body, "catching up: applied ") {
			_, of, _ := strings.Cut(strings.TrimSpace(body), " of ")
			target, _ = strconv.ParseUint(of, 10, 64)
		}
		return code == 200 && body == "ok\n"
	})
	if target == 0 {
		t.Fatalf("/readyz never said catching up on the way to ready; it answered %q", seen)
	}
	if target < commitBefore {
		t.Errorf("catching up to %d, below the leader's commit index %d before the restart", target, commitBefore)
	}
	applied, _ := strconv.ParseUint(infoField(t, dial(t, f.addr), "raft_applied_index"), 10, 64)
	if applied < target {
		t.Errorf("ready with applied index %d, before the target %d it reported", applied, target)
	}
	t.Logf("/readyz answered %d distinct bodies, catching up to %d (leader's commit before the restart %d)", len(seen), target, commitBefore)
}
