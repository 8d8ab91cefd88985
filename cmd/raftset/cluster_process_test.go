package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// clusterProc is one node of a multi-process cluster on loopback.
type clusterProc struct {
	id, dir string
	addr    string
	extra   []string
	p       *proc
}

func (cp *clusterProc) start(t *testing.T) {
	t.Helper()
	cp.p = startProc(t, cp.dir, cp.extra...)
	cp.p.addr = cp.addr
}

// startCluster starts size raftset processes bootstrapped from one --peers
// list (each also given extra) and waits until each of them accepts writes
// (a follower forwards).
func startCluster(t *testing.T, size int, extra ...string) []*clusterProc {
	return startClusterWith(t, size, nil, extra...)
}

// startClusterWith is startCluster with extra command-line arguments for
// some nodes (by id), after those all nodes get.
func startClusterWith(t *testing.T, size int, perNode map[string][]string, extra ...string) []*clusterProc {
	t.Helper()
	var peers []string
	nodes := make([]*clusterProc, size)
	raftAddrs := make([]string, size)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		raftAddrs[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		peers = append(peers, id+"="+raftAddrs[i])
		nodes[i] = &clusterProc{id: id, dir: filepath.Join(t.TempDir(), id),
			addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	}
	for i, cp := range nodes {
		_, port, _ := net.SplitHostPort(cp.addr)
		cp.extra = []string{"--port", port, "--raft-addr", raftAddrs[i], "--node-id", cp.id,
			"--peers", strings.Join(peers, ","), "--loglevel", "info"}
		cp.extra = append(cp.extra, extra...)
		cp.extra = append(cp.extra, perNode[cp.id]...)
		cp.start(t)
	}
	for _, cp := range nodes {
		waitWritable(t, cp.addr)
	}
	return nodes
}

// leaderOf waits until every running node names the same leader through
// SENTINEL get-master-addr-by-name, and returns it.
func leaderOf(t *testing.T, nodes []*clusterProc, skip *clusterProc) *clusterProc {
	t.Helper()
	var l *clusterProc
	testutil.WaitFor(t, 20*time.Second, "all nodes to agree on a leader", func() bool {
		l = nil
		var addr string
		for _, cp := range nodes {
			if cp == skip {
				continue
			}
			c, err := testutil.DialRESP(cp.addr, 2*time.Second)
			if err != nil {
				return false
			}
			r, err := c.Do("SENTINEL", "get-master-addr-by-name", "raftset")
			c.Close()
			rep := testutil.ParseReply(r)
			if err != nil || len(rep.Elems) != 2 {
				return false
			}
			a := rep.Elems[0].Str + ":" + rep.Elems[1].Str
			if addr != "" && a != addr {
				return false
			}
			addr = a
		}
		for _, cp := range nodes {
			if cp.addr == addr && cp != skip {
				l = cp
			}
		}
		return l != nil
	})
	return l
}

// TestClusterProcessesKill9Leader: three processes bootstrapped with
// --peers; a write through a follower is read through another; kill -9 the
// leader under a write load sent through the followers; a new leader takes
// over; the killed node restarts and catches up; no acknowledged write is
// lost and every node ends with the same DEBUG DIGEST.
func TestClusterProcessesKill9Leader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	fol := followersOf(nodes, l)
	c0, c1 := dial(t, fol[0].addr), dial(t, fol[1].addr)
	if r := do(t, c0, "SADD", "greeting", "hello"); r != ":1\r\n" {
		t.Fatalf("SADD through follower = %q", r)
	}
	if r := do(t, c1, "SISMEMBER", "greeting", "hello"); r != ":1\r\n" {
		t.Fatalf("SISMEMBER through the other follower right after = %q", r)
	}
	if r := do(t, c1, "ROLE"); !strings.HasPrefix(r, "*5\r\n$5\r\nslave\r\n") || !strings.Contains(r, strings.Split(l.addr, ":")[1]) {
		t.Errorf("follower ROLE = %q, want slave of %s", r, l.addr)
	}

	// Load through both followers: they forward, so the writers outlive the
	// leader.
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	killedAt := -1
	for w := range 8 {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			addr := fol[w%2].addr
			var c *testutil.RESPClient
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = testutil.DialRESP(addr, 10*time.Second); err != nil {
						t.Errorf("dial %s: %v", addr, err)
						return
					}
				}
				m := fmt.Sprintf("w%d-%d", w, i)
				r, err := c.Do("SADD", fmt.Sprintf("set:%d", w%4), m)
				if err != nil {
					// Indeterminate; never retried. A fresh connection
					// for the next write.
					c.Close()
					c = nil
					continue
				}
				if r == ":1\r\n" {
					mu.Lock()
					acked = append(acked, m)
					mu.Unlock()
				} else if !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN") {
					t.Errorf("SADD = %q", r)
					return
				}
			}
		}(w)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testutil.WaitFor(t, 30*time.Second, "1000 acknowledged writes before the kill", func() bool { return count() >= 1000 })
	l.p.kill9(t)
	killedAt = count()
	nl := leaderOf(t, nodes, l)
	testutil.WaitFor(t, 30*time.Second, "1000 more acknowledged writes after the kill", func() bool { return count() >= killedAt+1000 })
	close(stop)
	wg.Wait()
	t.Logf("leader %s killed after %d acknowledged writes; new leader %s; %d acknowledged in all", l.id, killedAt, nl.id, len(acked))

	l.start(t)
	waitWritable(t, l.addr)
	// Every node converges on the same state.
	waitConverged(t, nodes)
	// No acknowledged write lost, on any node (linearizable reads).
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		have := map[string]bool{}
		for s := range 4 {
			for _, m := range testutil.ParseReply(do(t, c, "SMEMBERS", fmt.Sprintf("set:%d", s))).Elems {
				have[m.Str] = true
			}
		}
		lost := 0
		for _, m := range acked {
			if !have[m] {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d acknowledged writes lost", cp.id, lost, len(acked))
		}
	}
}

// TestClusterProcessesJoin: a node started with --join becomes a voter of
// a running cluster and serves reads and writes; RAFT.REMOVE takes it out.
// Both share a cluster-secret: a client without it cannot send internal
// commands, the nodes still forward to each other.
func TestClusterProcessesJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	a := startProc(t, filepath.Join(t.TempDir(), "a"), "--node-id", "a", "--cluster-secret", "k3y")
	waitWritable(t, a.addr)
	ca := dial(t, a.addr)
	do(t, ca, "SADD", "s", "from-a")
	b := startProc(t, filepath.Join(t.TempDir(), "b"), "--node-id", "b", "--join", a.addr, "--cluster-secret", "k3y")
	testutil.WaitFor(t, 30*time.Second, "b to be promoted to voter", func() bool {
		return strings.Contains(do(t, ca, "RAFT.INFO"), "id=b,suffrage=voter")
	})
	waitWritable(t, b.addr)
	cb := dial(t, b.addr)
	if r := do(t, cb, "SADD", "s", "from-b"); r != ":1\r\n" {
		t.Fatalf("SADD through the joined node = %q", r)
	}
	if r := do(t, cb, "SCARD", "s"); r != ":2\r\n" {
		t.Errorf("SCARD through the joined node = %q", r)
	}
	if r := do(t, cb, "SENTINEL", "get-master-addr-by-name", "x"); !strings.Contains(r, strings.Split(a.addr, ":")[1]) {
		t.Errorf("SENTINEL get-master-addr-by-name = %q, want %s", r, a.addr)
	}
	if r := do(t, cb, "COMMAND", "INFO", "raftset.forward"); r != "*1\r\n*-1\r\n" {
		t.Errorf("COMMAND INFO raftset.forward = %q, want it hidden", r)
	}
	if r := do(t, cb, "raftset.forward", "x"); r != "-ERR unknown command 'raftset.forward', with args beginning with: 'x' \r\n" {
		t.Errorf("raftset.forward from a client = %q, want an unknown command", r)
	}
	// Removal is relayed to the leader.
	if r := do(t, cb, "RAFT.REMOVE", "b"); r != "+OK\r\n" {
		t.Fatalf("RAFT.REMOVE b = %q", r)
	}
	if strings.Contains(do(t, ca, "RAFT.INFO"), "id=b,") {
		t.Errorf("b still a member after RAFT.REMOVE")
	}
	b.kill9(t)
}

// waitConverged waits until every node answers the same DEBUG DIGEST and
// returns it.
func waitConverged(t *testing.T, nodes []*clusterProc) string {
	t.Helper()
	var digest string
	testutil.WaitFor(t, 30*time.Second, "equal DEBUG DIGEST on every node", func() bool {
		digest = ""
		for _, cp := range nodes {
			c, err := testutil.DialRESP(cp.addr, 5*time.Second)
			if err != nil {
				return false
			}
			r, err := c.Do("DEBUG", "DIGEST")
			c.Close()
			if err != nil || (digest != "" && r != digest) {
				return false
			}
			digest = r
		}
		return true
	})
	return digest
}

// followersOf returns the nodes other than l.
func followersOf(nodes []*clusterProc, l *clusterProc) []*clusterProc {
	var out []*clusterProc
	for _, cp := range nodes {
		if cp != l {
			out = append(out, cp)
		}
	}
	return out
}
