package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireTool returns the path of a program the test needs. When it is
// missing the test fails in CI (which installs it) and is skipped elsewhere,
// with a message saying how to get it.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found in CI: .ci/run installs %s", name, pkg)
	}
	t.Skipf("%s not installed (apt-get install -y %s)", name, pkg)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// It never returns a port twice in one test binary (two listeners asked
// for before either binds would share one), and it draws from below the
// kernel's ephemeral range: a port the kernel handed out for ":0" was
// closed again before the caller bound it, and meanwhile another listener
// on ":0" or an outgoing connection's local port could take it (seen in
// CI: "NewHost n3: listen on 127.0.0.1:40143: bind: address already in
// use"). Below that range only other callers of FreePort compete, and
// test binaries that run in parallel draw at random.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := unassignedPorts()
	for range 10_000 {
		port := lo + rand.IntN(hi-lo)
		if portsGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use
		}
		l.Close()
		portsGiven[port] = true
		return port
	}
	t.Fatalf("no free port in %d–%d", lo, hi-1)
	return 0
}

// unassignedPorts is the range of ports [lo, hi) FreePort draws from: up
// to the start of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768 where it cannot be read), from 10000.
func unassignedPorts() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12_000 {
				hi = v
			}
		}
	}
	return 10_000, hi
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Redis is a redis-server started for one test.
type Redis struct {
	Addr string
	Dir  string
	cmd  *exec.Cmd
}

// StartRedis starts Debian's redis-server on a free loopback port in a
// temporary directory, with persistence off unless extra says otherwise, and
// stops it (by pid) when the test ends.
func StartRedis(t testing.TB, extra ...string) *Redis {
	t.Helper()
	bin := RequireTool(t, "redis-server", "redis-server")
	dir := t.TempDir()
	var failures []string
	// A port another process took between FreePort and redis-server's bind
	// makes redis-server exit: try again on another one.
	for range 3 {
		r, failure := startRedis(t, bin, dir, extra)
		if r != nil {
			return r
		}
		failures = append(failures, failure)
	}
	t.Fatalf("redis-server did not start:\n%s", strings.Join(failures, "\n"))
	return nil
}

// startRedis starts one redis-server on a free port and waits until it
// answers INFO with its own pid; when it exits or does not answer within
// 30 s (a loaded machine), it returns why, with the end of its log.
func startRedis(t testing.TB, bin, dir string, extra []string) (*Redis, string) {
	t.Helper()
	port := FreePort(t)
	logfile := filepath.Join(dir, fmt.Sprintf("redis-%d.log", port))
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", logfile}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	r := &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, cmd: cmd}
	// Ours, not another process's that holds the port: its pid.
	pidLine := fmt.Sprintf("\r\nprocess_id:%d\r\n", cmd.Process.Pid)
	pong := func() bool {
		c, err := DialRESP(r.Addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		reply, err := c.Do("INFO", "server")
		return err == nil && strings.Contains(reply, pidLine)
	}
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for why == "" {
		if pong() {
			t.Cleanup(stop)
			return r, ""
		}
		select {
		case <-exited:
			why = fmt.Sprintf("port %d: redis-server exited (%v)", port, cmd.ProcessState)
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				stop()
				why = fmt.Sprintf("port %d: no answer within 30s", port)
			}
		}
	}
	log, _ := os.ReadFile(logfile)
	if len(log) > 2000 {
		log = log[len(log)-2000:]
	}
	return nil, why + "; its log ends:\n" + string(log)
}
