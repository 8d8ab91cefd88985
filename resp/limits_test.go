package resp

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestIsLoopback(t *testing.T) {
	tcp := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{tcp("127.0.0.1:1234"), true},
		{tcp("127.0.0.2:1234"), true},
		{tcp("127.255.255.254:1"), true},
		{tcp("[::1]:6379"), true},
		{tcp("[::ffff:127.0.0.1]:6379"), true},
		{tcp("10.0.0.1:6379"), false},
		{tcp("192.168.1.10:6379"), false},
		{tcp("172.17.0.1:6379"), false}, // a container's gateway is not loopback
		{tcp("[::ffff:10.0.0.1]:6379"), false},
		{tcp("[fe80::1]:6379"), false},
		{tcp("0.0.0.0:6379"), false},
		{&net.UnixAddr{Name: "/tmp/raftset.sock", Net: "unix"}, true},
		{fakeAddr("127.0.0.1:99"), true},
		{fakeAddr("[::1%lo]:99"), true},
		{fakeAddr("8.8.8.8:53"), false},
		{fakeAddr("garbage"), false},
		{nil, false},
	} {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// fakeAddr is an address of a network the server does not know.
type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }

// remoteListener makes every accepted connection appear to come from addr,
// so that protected mode can be tested end to end on loopback.
type remoteListener struct {
	net.Listener
	addr net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{Conn: c, addr: l.addr}, nil
}

type remoteConn struct {
	net.Conn
	addr net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.addr }

// startRemoteServer is startServer whose clients all appear to come from
// 10.1.2.3.
func startRemoteServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = newTestLogger(t)
	}
	s := NewServer(cfg, newFakeStore())
	errc := make(chan error, 1)
	go func() {
		errc <- s.Serve(remoteListener{Listener: ln, addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 40000}})
	}()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve() = %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

// Redis 7.0 (Debian's redis-server 7.0.15) sends exactly these bytes.
const wantDenied = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"

func TestProtectedModeRefusesRemoteClients(t *testing.T) {
	s, addr := startRemoteServer(t, Config{})
	c := dial(t, addr)
	if got := c.reply(); got != wantDenied {
		t.Fatalf("remote client got %q", got)
	}
	c.expectEOF()
	if got := s.stats.rejected.Load(); got != 1 {
		t.Errorf("rejected_connections = %d, want 1", got)
	}

	// A password lifts protected mode: the client is asked to AUTH.
	s.setPass("pw")
	c = dial(t, addr)
	if got := c.do("PING"); got != "-NOAUTH Authentication required.\r\n" {
		t.Errorf("with a password, PING = %q", got)
	}
	if got := c.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Errorf("AUTH = %q", got)
	}

	// protected-mode no serves anyone.
	s.setPass("")
	if got := c.do("CONFIG", "SET", "protected-mode", "no"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET protected-mode no = %q", got)
	}
	c = dial(t, addr)
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Errorf("with protected-mode no, PING = %q", got)
	}
	if got := c.do("CONFIG", "GET", "protected-mode"); got != "*2\r\n$14\r\nprotected-mode\r\n$2\r\nno\r\n" {
		t.Errorf("CONFIG GET protected-mode = %q", got)
	}
	if got := c.do("CONFIG", "SET", "protected-mode", "maybe"); got != "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n" {
		t.Errorf("CONFIG SET protected-mode maybe = %q", got)
	}
}

// Loopback clients are served with protected mode on and no password.
func TestProtectedModeServesLoopback(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING = %q", got)
	}
}

// With a node secret, a remote connection may prove it is a node; anything
// else it sends first is refused as Redis refuses it at accept.
func TestProtectedModeLetsNodesAuthenticate(t *testing.T) {
	_, addr := startRemoteServer(t, Config{NodeSecret: "s3cret"})
	c := dial(t, addr)
	if got := c.do("PING"); got != wantDenied {
		t.Errorf("PING = %q", got)
	}
	c.expectEOF()

	c = dial(t, addr)
	c.nodeSecret = "s3cret"
	if got := c.nodeAuth("wrong"); got != errr("WRONGPASS invalid node secret") {
		t.Errorf("RAFTSET.AUTH wrong = %q", got)
	}
	if got := c.do("PING"); got != wantDenied {
		t.Errorf("PING after a wrong secret = %q", got)
	}
	c.expectEOF()

	c = dial(t, addr)
	c.nodeSecret = "s3cret"
	if got := c.nodeAuth("s3cret"); got != "+OK\r\n" {
		t.Errorf("RAFTSET.AUTH = %q", got)
	}
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING after RAFTSET.AUTH = %q", got)
	}
}

func TestLimitConfig(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	c := dial(t, addr)
	get := func(name string) string {
		t.Helper()
		r := c.do("CONFIG", "GET", name)
		parts := strings.Split(r, "\r\n")
		if len(parts) < 5 {
			t.Fatalf("CONFIG GET %s = %q", name, r)
		}
		return parts[4]
	}
	// Redis 7.0's defaults and error texts (Debian's redis-server 7.0.15).
	for name, want := range map[string]string{
		"client-output-buffer-limit": "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
		"client-query-buffer-limit":  "1073741824",
		"tcp-keepalive":              "300",
		"protected-mode":             "yes",
		"maxclients":                 "10000",
		"timeout":                    "0",
		"proto-max-bulk-len":         "536870912",
	} {
		if got := get(name); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", name, got, want)
		}
	}
	fail := func(name, msg string) string {
		return "-ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + msg + "\r\n"
	}
	for _, tc := range []struct{ name, value, want string }{
		{"client-output-buffer-limit", "foo", fail("client-output-buffer-limit", "Wrong number of arguments in buffer limit configuration.")},
		{"client-output-buffer-limit", "normal 1 2", fail("client-output-buffer-limit", "Wrong number of arguments in buffer limit configuration.")},
		{"client-output-buffer-limit", "master 1 2 3", fail("client-output-buffer-limit", "Invalid client class specified in buffer limit configuration.")},
		{"client-output-buffer-limit", "normal x 2 3", fail("client-output-buffer-limit", "Error in hard, soft or soft_seconds setting in buffer limit configuration.")},
		{"client-output-buffer-limit", "pubsub 1 2 -3", fail("client-output-buffer-limit", "Error in hard, soft or soft_seconds setting in buffer limit configuration.")},
		{"client-query-buffer-limit", "1000", fail("client-query-buffer-limit", "argument must be between 1048576 and 9223372036854775807 inclusive")},
		{"tcp-keepalive", "-1", fail("tcp-keepalive", "argument must be between 0 and 2147483647 inclusive")},
		{"client-output-buffer-limit", "replica 1mb 2mb 3 pubsub 1 2 3", "+OK\r\n"},
		{"client-query-buffer-limit", "2mb", "+OK\r\n"},
		{"tcp-keepalive", "0", "+OK\r\n"},
	} {
		if got := c.do("CONFIG", "SET", tc.name, tc.value); got != tc.want {
			t.Errorf("CONFIG SET %s %q = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	for name, want := range map[string]string{
		"client-output-buffer-limit": "normal 0 0 0 slave 1048576 2097152 3 pubsub 1 2 3",
		"client-query-buffer-limit":  "2097152",
		"tcp-keepalive":              "0",
	} {
		if got := get(name); got != want {
			t.Errorf("after CONFIG SET, CONFIG GET %s = %q, want %q", name, got, want)
		}
	}
	// tcp-keepalive 0 reaches new connections (no probes), which still work.
	if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING with tcp-keepalive 0 = %q", got)
	}
}

// logLines collects log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		l.lines = append(l.lines, string(line))
	}
	return len(p), nil
}

func (l *logLines) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// Failed AUTH attempts are counted in INFO and logged at warning level with
// the client's address, one line a second at most.
func TestFailedAuthLoggedAndCounted(t *testing.T) {
	var logs logLines
	logger := hclog.New(&hclog.LoggerOptions{Name: "resp", Output: &logs, Level: hclog.Warn})
	_, addr := startServer(t, Config{RequirePass: "pw", Logger: logger}, newFakeStore())
	c := dial(t, addr)
	const tries = 50
	for range tries {
		if got := c.do("AUTH", "guess"); got != "-WRONGPASS invalid username-password pair or user is disabled.\r\n" {
			t.Fatalf("AUTH guess = %q", got)
		}
	}
	if got := c.do("AUTH", "nobody", "pw"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH nobody pw = %q", got)
	}
	if got := c.do("HELLO", "2", "AUTH", "default", "nope"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("HELLO AUTH = %q", got)
	}
	if got := c.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("AUTH pw = %q", got)
	}
	info := c.do("INFO", "stats")
	if !strings.Contains(info, "\r\nacl_access_denied_auth:52\r\n") {
		t.Errorf("INFO stats has no acl_access_denied_auth:52: %q", info)
	}
	lines := logs.matching("AUTH failed")
	// 52 failures in well under a few seconds: a line or a few, not 52.
	if len(lines) == 0 || len(lines) > 5 {
		t.Fatalf("%d log lines for 52 failures: %q", len(lines), lines)
	}
	if !strings.Contains(lines[0], "[WARN]") || !strings.Contains(lines[0], "addr=127.0.0.1:") {
		t.Errorf("log line %q: want warning level and the client address", lines[0])
	}
}
