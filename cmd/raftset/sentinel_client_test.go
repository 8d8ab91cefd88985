package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// pythonWithRedis finds a python3 that imports Debian's python3-redis
// (installed for /usr/bin/python3, which another python3 on PATH may hide).
// Without one the test is skipped, except under CI, where it fails.
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import redis.sentinel").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("python3-redis is not installed (apt-get install -y python3-redis)")
	}
	t.Skip("python3-redis is not installed (apt-get install -y python3-redis)")
	return ""
}

// TestPythonSentinelClient drives redis-py's Sentinel client
// (discover_master, discover_slaves, master_for, slave_for) against a
// three-process cluster, with every node as a sentinel, through a leadership
// transfer and a leader kill: the client finds the leader each time, writes
// through it, and reads from a replica, never from the killed node.
func TestPythonSentinelClient(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	py := pythonWithRedis(t)
	nodes := startCluster(t, 3, "--sentinel-master-name", "raftset")
	l := leaderOf(t, nodes, nil)

	args := []string{"testdata/sentinel_client.py", "raftset"}
	for _, cp := range nodes {
		args = append(args, cp.addr)
	}
	cmd := exec.Command(py, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	ask := func(req string) string {
		t.Helper()
		if _, err := io.WriteString(stdin, req+"\n"); err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		if !lines.Scan() {
			t.Fatalf("%s: the python client exited: %v", req, lines.Err())
		}
		return lines.Text()
	}
	expect := func(req, want string) {
		t.Helper()
		if got := ask(req); got != want {
			t.Fatalf("%s = %q, want %q", req, got, want)
		}
	}
	eventually := func(req, want string) {
		t.Helper()
		var got string
		testutil.WaitFor(t, 20*time.Second, req+" = "+want, func() bool {
			got = ask(req)
			return got == want
		})
	}
	replicas := func(nodes []*clusterProc) string {
		var a []string
		for _, cp := range nodes {
			a = append(a, cp.addr)
		}
		slices.Sort(a)
		return strings.Join(a, ",")
	}
	t.Logf("redis-py %s", ask("version"))

	expect("discover", l.addr)
	// A member's client address is known once its entry is applied.
	eventually("slaves", replicas(followersOf(nodes, l)))
	expect("write s a", "1")
	expect("read s", "a")
	expect("role", "master")

	// Leadership transfer: the client follows the new leader.
	c := dial(t, l.addr)
	testutil.WaitFor(t, 10*time.Second, "RAFT.TRANSFER", func() bool { return do(t, c, "RAFT.TRANSFER") == "+OK\r\n" })
	var nl *clusterProc
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		nl = leaderOf(t, nodes, nil)
		return nl != l
	})
	eventually("discover", nl.addr)
	expect("write s b", "1")
	expect("role", "master")
	expect("slaves", replicas(followersOf(nodes, nl)))
	expect("read s", "a,b")

	// Leader kill: the killed node is no master and, flagged s_down, no
	// replica either.
	nl.p.kill9(t)
	nl2 := leaderOf(t, nodes, nl)
	eventually("discover", nl2.addr)
	eventually("write s c", "1")
	expect("role", "master")
	var live []*clusterProc
	for _, cp := range followersOf(nodes, nl2) {
		if cp != nl {
			live = append(live, cp)
		}
	}
	eventually("slaves", replicas(live))
	expect("read s", "a,b,c")
}
