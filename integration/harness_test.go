//go:build jepsen

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// Cluster is the fault-injection surface the nemesis and checks use. Nodes
// are named "n1".."nN".
type Cluster interface {
	Start() error
	Stop() error
	Kill9(node string) error
	Restart(node string) error
	Pause(node string) error
	Resume(node string) error
	// Leader polls (bounded) until exactly one running node says it is the
	// Raft leader; "" if none within the deadline.
	Leader(within time.Duration) string
	Addr(node string) string
	Nodes() []string
	// Running: started, not killed (it may be paused).
	Running(node string) bool
	Paused(node string) bool
	// Partition replaces the network faults in force with p; HealNetwork
	// lifts them all. Backends without per-node networks return an error.
	Partition(p partition) error
	HealNetwork() error
	// Log returns what the node has logged so far (every start of it).
	Log(node string) (string, error)
	Close()
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// TestMain builds bin/raftset once per test binary run into a temp dir and
// removes it at the end.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func raftsetBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "raftset-jepsen-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "raftset")
		cmd := exec.Command("go", "build", "-o", binPath, "raftset/cmd/raftset")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startMarker begins the line the harness writes to a node's log before
// each start of it.
const startMarker = "=== harness: start #"

// jepsenClusterSecret is every node's cluster-secret: the Raft port then
// admits only peers that prove it (and a node on a namespace address, not
// loopback, refuses to serve an unauthenticated Raft port at all), so every
// row also runs the peer handshake. The harness's clients reach the nodes
// from outside loopback (namespaces, containers) without a password, so
// protected mode, which would refuse them, is off; the Raft port still
// demands the secret.
const jepsenClusterSecret = "jepsen cluster secret"

type procNode struct {
	id, addr, raftAddr, dir, logPath string
	// peerAddr is the client address the other nodes call (the TLS port's
	// with tls-cluster), addr the one the harness's clients use.
	peerAddr string
	args     []string // without --peers / --join
	join     string   // client address to join through; "" = static --peers
	cmd      *exec.Cmd
	done     chan struct{}
	paused   bool
	starts   int
}

// procCluster runs each node as a process of the real binary, either all
// on 127.0.0.1 (no network faults) or each in its own network namespace.
type procCluster struct {
	t     *testing.T
	bin   string
	mu    sync.Mutex
	nodes map[string]*procNode
	order []string
	peers string   // the static --peers value
	net   *netLab  // nil: loopback
	extra []string // scenario server flags (snapshot knobs)
}

// clusterOpts: how many nodes, whether each gets a network namespace, and
// extra server flags for every node.
type clusterOpts struct {
	Nodes int
	Netns bool
	Args  []string
	// TLSCluster runs every node with tls-cluster yes: a CA and node
	// certificates made by `raftset cert init`, mutual TLS on the Raft port
	// and between nodes on the TLS port, which each node publishes. The
	// harness's clients keep the plain port.
	TLSCluster bool
}

// newProcCluster prepares (does not start) a size-node loopback cluster
// whose logs go to logDir/<node>.log and data to a test temp dir.
// Everything it starts is stopped in t.Cleanup.
func newProcCluster(t *testing.T, size int, logDir string) *procCluster {
	return newProcClusterWith(t, clusterOpts{Nodes: size}, logDir)
}

// newProcClusterWith is newProcCluster with options; with Netns each node
// listens on its namespace's address (ports 6379 and 16379).
func newProcClusterWith(t *testing.T, o clusterOpts, logDir string) *procCluster {
	t.Helper()
	c := &procCluster{t: t, bin: raftsetBinary(t), nodes: map[string]*procNode{}, extra: o.Args}
	for i := 1; i <= o.Nodes; i++ {
		c.order = append(c.order, fmt.Sprintf("n%d", i))
	}
	if o.Netns {
		c.net = newNetLab(t, c.order)
	}
	data := t.TempDir()
	// Registered after the lab's and the data dir's cleanups, so it runs
	// before them: processes stop first, then their files and namespaces go.
	t.Cleanup(c.Close)
	var peers []string
	for _, id := range c.order {
		n := &procNode{id: id}
		if c.net != nil {
			ip := c.net.nodeIP[id]
			n.addr, n.raftAddr = net.JoinHostPort(ip, nsClientPort), net.JoinHostPort(ip, nsRaftPort)
		} else {
			n.addr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
			n.raftAddr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		}
		n.dir = filepath.Join(data, n.id)
		n.logPath = filepath.Join(logDir, n.id+".log")
		peers = append(peers, n.id+"="+n.raftAddr)
		c.nodes[n.id] = n
	}
	c.peers = strings.Join(peers, ",")
	certs := filepath.Join(data, "certs")
	if o.TLSCluster {
		c.makeCerts(certs)
	}
	for _, id := range c.order {
		n := c.nodes[id]
		host, port, _ := net.SplitHostPort(n.addr)
		n.peerAddr = n.addr
		var tlsArgs []string
		if o.TLSCluster {
			tlsPort := nsTLSPort
			if c.net == nil {
				tlsPort = strconv.Itoa(testutil.FreePort(t))
			}
			n.peerAddr = net.JoinHostPort(host, tlsPort)
			tlsArgs = []string{"--tls-port", tlsPort, "--tls-cluster", "yes",
				"--tls-cert-file", filepath.Join(certs, id+".crt"), "--tls-key-file", filepath.Join(certs, id+".key"),
				"--tls-ca-cert-file", filepath.Join(certs, "ca.crt")}
		}
		n.args = append(append([]string{"--node-id", n.id, "--bind", host, "--port", port,
			"--raft-addr", n.raftAddr, "--advertise-addr", n.peerAddr, "--raft-advertise-addr", n.raftAddr,
			"--dir", n.dir, "--loglevel", "info", "--cluster-secret", jepsenClusterSecret, "--protected-mode", "no"}, tlsArgs...), c.extra...)
	}
	return c
}

// nsTLSPort is a namespaced node's TLS port (tls-cluster rows).
const nsTLSPort = "6380"

// makeCerts writes a CA and a certificate for every node, valid for the
// node's address, with the binary's own `raftset cert init`.
func (c *procCluster) makeCerts(dir string) {
	c.t.Helper()
	ips := []string{"127.0.0.1"}
	if c.net != nil {
		for _, id := range c.order {
			ips = append(ips, c.net.nodeIP[id])
		}
	}
	args := append([]string{"cert", "init", "--dir", dir, "--ip", strings.Join(ips, ",")}, c.order...)
	if out, err := exec.Command(c.bin, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("raftset %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *procCluster) Nodes() []string { return append([]string(nil), c.order...) }

func (c *procCluster) Addr(node string) string { return c.nodes[node].addr }

func (c *procCluster) start(n *procNode) error {
	if c.reap(n) {
		return fmt.Errorf("%s already running", n.id)
	}
	lf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(lf, "%s%d of %s at %s\n", startMarker, n.starts, n.id, time.Now().UTC().Format(time.RFC3339Nano))
	args := append(slices.Clone(n.args), "--peers", c.peers)
	if n.join != "" {
		args = append(slices.Clone(n.args), "--join", n.join)
	}
	cmd := exec.Command(c.bin, args...)
	if c.net != nil {
		cmd = c.net.command(n.id, c.bin, args)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := cmd.Start(); err != nil {
		lf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		lf.Close()
		close(done)
	}()
	n.cmd, n.done, n.paused = cmd, done, false
	return nil
}

// reap forgets a process that exited on its own (a crash) and reports
// whether the node's process is still there.
func (c *procCluster) reap(n *procNode) bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		n.cmd, n.paused = nil, false
		return false
	default:
		return true
	}
}

// signalAndWait sends sig to the node's process (by pid) and waits up to d
// for it to exit.
func (c *procCluster) signalAndWait(n *procNode, sig syscall.Signal, d time.Duration) bool {
	if n.cmd == nil {
		return true
	}
	n.cmd.Process.Signal(sig)
	select {
	case <-n.done:
		n.cmd, n.paused = nil, false
		return true
	case <-time.After(d):
		return false
	}
}

func (c *procCluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.order {
		if err := c.start(c.nodes[id]); err != nil {
			return err
		}
	}
	return nil
}

func (c *procCluster) stopNode(n *procNode) error {
	if n.cmd == nil {
		return nil
	}
	if n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
	}
	if c.signalAndWait(n, syscall.SIGTERM, 10*time.Second) {
		return nil
	}
	if c.signalAndWait(n, syscall.SIGKILL, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit", n.id, n.cmd.Process.Pid)
}

func (c *procCluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, id := range c.order {
		errs = append(errs, c.stopNode(c.nodes[id]))
	}
	return errors.Join(errs...)
}

func (c *procCluster) Kill9(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	if n.cmd == nil {
		return fmt.Errorf("%s not running", node)
	}
	if !c.signalAndWait(n, syscall.SIGKILL, 10*time.Second) {
		return fmt.Errorf("%s did not die on SIGKILL", node)
	}
	return nil
}

func (c *procCluster) Restart(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	if err := c.stopNode(n); err != nil {
		return err
	}
	return c.start(n)
}

func (c *procCluster) Pause(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	if n.cmd == nil {
		return fmt.Errorf("%s not running", node)
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.paused = true
	return nil
}

func (c *procCluster) Resume(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	if n.cmd == nil {
		return fmt.Errorf("%s not running", node)
	}
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.paused = false
	return nil
}

func (c *procCluster) Running(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reap(c.nodes[node])
}

func (c *procCluster) Paused(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[node].paused
}

func (c *procCluster) Leader(within time.Duration) string { return leaderByRole(c, within) }

// leaderByRole asks every running, unpaused node for ROLE and returns the
// one node that says master, polling every 100 ms for at most within.
func leaderByRole(c Cluster, within time.Duration) string {
	deadline := time.Now().Add(within)
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		var masters []string
		for _, id := range c.Nodes() {
			if !c.Running(id) || c.Paused(id) {
				continue
			}
			cn, err := dialConn(c.Addr(id), 500*time.Millisecond)
			if err != nil {
				continue
			}
			r, err := cn.Do("ROLE")
			cn.Close()
			if err == nil && len(r.Elems) > 0 && r.Elems[0].Str == "master" {
				masters = append(masters, id)
			}
		}
		if len(masters) == 1 {
			return masters[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}

func (c *procCluster) Partition(p partition) error {
	if c.net == nil {
		return errors.New("partitions need the netns backend (each node in its own network namespace)")
	}
	return c.net.apply(p)
}

func (c *procCluster) HealNetwork() error {
	if c.net == nil {
		return nil
	}
	return c.net.heal()
}

func (c *procCluster) Log(node string) (string, error) {
	b, err := os.ReadFile(c.nodes[node].logPath)
	return string(b), err
}

// Close resumes and stops every process it started (by pid).
func (c *procCluster) Close() {
	if err := c.Stop(); err != nil {
		c.t.Errorf("stopping cluster: %v", err)
	}
}

// healAll lifts network faults, resumes paused nodes and restarts killed
// ones.
func healAll(c Cluster) error {
	errs := []error{c.HealNetwork()}
	for _, id := range c.Nodes() {
		switch {
		case !c.Running(id):
			errs = append(errs, c.Restart(id))
		case c.Paused(id):
			errs = append(errs, c.Resume(id))
		}
	}
	return errors.Join(errs...)
}

// waitReady polls (bounded) until every node answers a linearizable read,
// which needs a leader reachable from it.
// startWithLeader starts cl, waits until it serves, and returns its leader;
// any failure ends the test.
func startWithLeader(t *testing.T, cl Cluster) string {
	t.Helper()
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(cl, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader(10 * time.Second)
	if leader == "" {
		t.Fatal("no leader")
	}
	return leader
}

func waitReady(c Cluster, within time.Duration) error {
	deadline := time.Now().Add(within)
	pending := c.Nodes()
	for i := 0; i < 1000 && len(pending) > 0; i++ {
		var still []string
		for _, id := range pending {
			r, err := doFollow(c.Addr(id), time.Second, "SISMEMBER", "jepsen:ready", "x")
			if err != nil || r.Kind != ':' {
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nodes %v not ready within %v", pending, within)
}

// converge polls DEBUG DIGEST on every node until all agree, for at most
// within. It returns the digest and the time it took.
func converge(c Cluster, within time.Duration) (string, time.Duration, error) {
	start := time.Now()
	var last []string
	for i := 0; i < 1000 && time.Since(start) < within; i++ {
		last = last[:0]
		for _, id := range c.Nodes() {
			cn, err := dialConn(c.Addr(id), 2*time.Second)
			if err != nil {
				last = append(last, id+":"+err.Error())
				continue
			}
			r, err := cn.Do("DEBUG", "DIGEST")
			cn.Close()
			if err != nil {
				last = append(last, id+":"+err.Error())
			} else {
				last = append(last, r.Str)
			}
		}
		same := true
		for _, d := range last {
			if d != last[0] || strings.Contains(d, ":") {
				same = false
			}
		}
		if same {
			return last[0], time.Since(start), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", time.Since(start), fmt.Errorf("digests did not converge within %v: %v", within, last)
}

// scanLogs reports node log lines that show a crash.
func scanLogs(c Cluster) []string {
	var bad []string
	for _, id := range c.Nodes() {
		b, err := c.Log(id)
		if err != nil {
			bad = append(bad, id+": "+err.Error())
			continue
		}
		for _, line := range strings.Split(b, "\n") {
			if strings.Contains(line, "panic") || strings.Contains(line, "fatal error:") || strings.Contains(line, "DATA RACE") {
				bad = append(bad, id+": "+line)
			}
		}
	}
	return bad
}
