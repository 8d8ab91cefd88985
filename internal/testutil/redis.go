package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// It never returns a port twice in one test binary: the kernel may hand
// out a just-closed port again, and a test that asks for a node's client
// and Raft ports before starting any would then give two listeners one
// port (seen in CI: "bind: address already in use").
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
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
	port := FreePort(t)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
		"--logfile", filepath.Join(dir, "redis.log")}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	r := &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	WaitFor(t, 10*time.Second, "redis-server to answer PING", func() bool {
		c, err := DialRESP(r.Addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		reply, err := c.Do("PING")
		return err == nil && reply == "+PONG\r\n"
	})
	return r
}
