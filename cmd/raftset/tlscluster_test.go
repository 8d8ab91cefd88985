package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

func TestTLSClusterNeedsTheFiles(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	base := []string{"--port", "0", "--dir", filepath.Join(dir, "data"), "--raft-addr", "127.0.0.1:0", "--tls-cluster", "yes"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "tls-cluster yes: nodes authenticate each other with the TLS certificate files; set tls-cert-file, tls-key-file, tls-ca-cert-file"},
		{[]string{"--tls-port", "0", "--port", "1", "--tls-cert-file", p.path("node.crt"), "--tls-key-file", p.path("node.key")},
			"tls-cluster yes: nodes authenticate each other with the TLS certificate files; set tls-ca-cert-file"},
		{[]string{"--tls-port", "0", "--port", "1", "--tls-cert-file", p.path("node.crt"), "--tls-key-file", p.path("node.key"), "--tls-ca-cert-file", p.path("ca.crt")},
			"tls-cluster yes needs a tls-port: nodes call each other's client port over TLS"},
	} {
		cfg, err := LoadConfig(append(base, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := start(cfg, io.Discard); err == nil || err.Error() != tc.want {
			if n != nil {
				_ = n.close()
			}
			t.Errorf("start with %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// tlsClusterNode is one process of a cluster running with tls-cluster yes:
// clients of the test use its plain port; nodes reach each other on the
// TLS port and the Raft port, both mutual TLS.
type tlsClusterNode struct {
	id, dir                string
	addr, tlsAddr, raftAdr string
	args                   []string
	p                      *proc
}

func (n *tlsClusterNode) start(t *testing.T) {
	t.Helper()
	n.p = startProc(t, n.dir, n.args...)
	n.p.addr = n.addr
}

// newTLSClusterNode prepares a node whose certificate pki signed.
func newTLSClusterNode(t *testing.T, pki *testPKI, id string) *tlsClusterNode {
	t.Helper()
	pki.issue(t, id, id, false)
	n := &tlsClusterNode{id: id, dir: filepath.Join(t.TempDir(), id),
		addr:    fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		tlsAddr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		raftAdr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	_, port, _ := strings.Cut(n.addr, ":")
	_, tlsPort, _ := strings.Cut(n.tlsAddr, ":")
	n.args = []string{"--port", port, "--tls-port", tlsPort, "--raft-addr", n.raftAdr, "--node-id", id,
		"--tls-cluster", "yes", "--tls-cert-file", pki.path(id + ".crt"), "--tls-key-file", pki.path(id + ".key"),
		"--tls-ca-cert-file", pki.path("ca.crt"), "--cluster-secret", "k3y", "--loglevel", "info"}
	return n
}

// roleOf is "master" or "slave" as the node's ROLE says.
func roleOf(t *testing.T, addr string) string {
	c, err := testutil.DialRESP(addr, 2*time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	r, err := c.Do("ROLE")
	if err != nil {
		return ""
	}
	rep := testutil.ParseReply(r)
	if len(rep.Elems) == 0 {
		return ""
	}
	return rep.Elems[0].Str
}

func infoField(t *testing.T, c *testutil.RESPClient, field string) string {
	t.Helper()
	r := do(t, c, "INFO", "raft")
	for _, line := range strings.Split(r, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO raft has no %s: %q", field, r)
	return ""
}

// TestTLSClusterProcesses: three processes with tls-cluster yes forward
// writes and reads to the leader over its TLS port, answer WAIT, and fail
// over after kill -9 of the leader; nodes whose certificate another CA
// signed can neither join (--join) nor vote (their Raft connections are
// refused), and never enter the configuration.
func TestTLSClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	dir := t.TempDir()
	pki := newTestPKI(t, dir, "cluster")
	nodes := make([]*tlsClusterNode, 3)
	var peers []string
	for i := range nodes {
		nodes[i] = newTLSClusterNode(t, pki, fmt.Sprintf("n%d", i+1))
		peers = append(peers, nodes[i].id+"="+nodes[i].raftAdr)
	}
	for _, n := range nodes {
		n.args = append(n.args, "--peers", strings.Join(peers, ","))
		n.start(t)
	}
	// Writable through every node: followers forward over TLS.
	for _, n := range nodes {
		waitWritable(t, n.addr)
	}
	var leader *tlsClusterNode
	testutil.WaitFor(t, 20*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if roleOf(t, n.addr) == "master" {
				leader = n
				return true
			}
		}
		return false
	})
	var fol []*tlsClusterNode
	for _, n := range nodes {
		if n != leader {
			fol = append(fol, n)
		}
	}
	c0, c1, cl := dial(t, fol[0].addr), dial(t, fol[1].addr), dial(t, leader.addr)
	// The published client address is the TLS port: that is where peers
	// (and Sentinel-aware clients) go.
	if got := infoField(t, c0, "raft_leader_client_addr"); got != leader.tlsAddr {
		t.Errorf("raft_leader_client_addr = %q, want the leader's TLS address %s", got, leader.tlsAddr)
	}
	if r := do(t, c0, "SADD", "s", "via-follower"); r != ":1\r\n" {
		t.Fatalf("SADD through a follower = %q", r)
	}
	if r := do(t, c1, "SISMEMBER", "s", "via-follower"); r != ":1\r\n" {
		t.Fatalf("SISMEMBER through the other follower = %q", r)
	}
	if r := do(t, cl, "WAIT", "2", "5000"); r != ":2\r\n" {
		t.Errorf("WAIT 2 on the leader = %q", r)
	}

	// Strangers: certificates from another CA. One bootstraps a
	// configuration naming the cluster's members and itself, so it stands
	// for election and asks them for votes; the other asks to join.
	other := newTestPKI(t, dir, "other")
	voter := newTLSClusterNode(t, other, "x1")
	voter.args = append(voter.args, "--peers", strings.Join(append(peers, "x1="+voter.raftAdr), ","))
	joiner := newTLSClusterNode(t, other, "x2")
	joiner.args = append(joiner.args, "--join", leader.tlsAddr)
	term := infoField(t, cl, "raft_term")
	refused := func(n *tlsClusterNode) int {
		v, err := strconv.Atoi(infoField(t, dial(t, n.addr), "raft_refused_connections"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := map[*tlsClusterNode]int{}
	for _, n := range nodes {
		before[n] = refused(n)
	}
	voter.start(t)
	joiner.start(t)
	testutil.WaitFor(t, 20*time.Second, "the stranger's vote requests to be refused by every member", func() bool {
		for _, n := range nodes {
			if refused(n) <= before[n] {
				return false
			}
		}
		return true
	})
	testutil.WaitFor(t, 20*time.Second, "the joiner to report its join failing", func() bool {
		return strings.Contains(logged(joiner.p), "cannot join the cluster yet")
	})
	if !strings.Contains(logged(joiner.p), "tls:") {
		t.Errorf("the joiner's failure does not name TLS:\n%s", logged(joiner.p))
	}
	info := do(t, cl, "RAFT.INFO")
	for _, id := range []string{"x1", "x2"} {
		if strings.Contains(info, "id="+id+",") {
			t.Errorf("stranger %s is in the configuration: %q", id, info)
		}
	}
	if got := infoField(t, cl, "raft_term"); got != term || roleOf(t, leader.addr) != "master" {
		t.Errorf("the strangers disturbed the cluster: term %s → %s, leader role %q", term, got, roleOf(t, leader.addr))
	}
	voter.p.kill9(t)
	joiner.p.kill9(t)

	// Failover: kill -9 the leader; the others elect a new one, over TLS.
	leader.p.kill9(t)
	var next *tlsClusterNode
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		for _, n := range fol {
			if roleOf(t, n.addr) == "master" {
				next = n
				return true
			}
		}
		return false
	})
	var other1 *tlsClusterNode
	for _, n := range fol {
		if n != next {
			other1 = n
		}
	}
	co := dial(t, other1.addr)
	testutil.WaitFor(t, 20*time.Second, "writes through the follower after failover", func() bool {
		r, err := co.Do("SADD", "s", "after-failover")
		return err == nil && r == ":1\r\n"
	})
	if r := do(t, dial(t, next.addr), "SMEMBERS", "s"); r != "*2\r\n$12\r\nvia-follower\r\n$14\r\nafter-failover\r\n" &&
		r != "*2\r\n$14\r\nafter-failover\r\n$12\r\nvia-follower\r\n" {
		t.Errorf("SMEMBERS on the new leader = %q", r)
	}
}

// With tls-cluster yes the CA also checks peers: CONFIG SET may replace it
// (rotation) but not clear it, which would leave Go to verify peers against
// the system's roots.
func TestTLSClusterKeepsItsCA(t *testing.T) {
	p := newTestPKI(t, t.TempDir(), "a")
	_, n := startTLSNode(t, p, false, "--tls-cluster", "yes")
	c := dial(t, n.server.Addr().String())
	want := "-ERR CONFIG SET failed (possibly related to argument 'tls-ca-cert-file') - Unable to update TLS configuration. Check server logs.\r\n"
	if r := do(t, c, "CONFIG", "SET", "tls-ca-cert-file", ""); r != want {
		t.Errorf("CONFIG SET tls-ca-cert-file \"\" = %q, want %q", r, want)
	}
	if r := do(t, c, "CONFIG", "GET", "tls-ca-cert-file"); !strings.Contains(r, p.path("ca.crt")) {
		t.Errorf("CONFIG GET tls-ca-cert-file after the refusal = %q", r)
	}
	if r := do(t, c, "CONFIG", "SET", "tls-ca-cert-file", p.path("ca.crt")); r != "+OK\r\n" {
		t.Errorf("CONFIG SET tls-ca-cert-file (same file, re-read) = %q", r)
	}
	if r := do(t, c, "CONFIG", "GET", "tls-cluster"); r != "*2\r\n$11\r\ntls-cluster\r\n$3\r\nyes\r\n" {
		t.Errorf("CONFIG GET tls-cluster = %q", r)
	}
}
