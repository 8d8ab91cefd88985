package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

func newTestLogger(t testing.TB) hclog.Logger { return testutil.Logger(t, "resp") }

// startServer serves store on a loopback port until the test ends; it
// returns the server and its address.
func startServer(t testing.TB, cfg Config, store Store) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = newTestLogger(t)
	}
	s := NewServer(cfg, store)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve() = %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

// testConn is a raw RESP client.
type testConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
	// nodeSecret is the server's, for nodeAuth's check of its proof.
	nodeSecret string
}

func dial(t testing.TB, addr string) *testConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &testConn{t: t, c: c, r: bufio.NewReader(c)}
}

// enc encodes a command as a RESP array of bulk strings.
func enc(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func (tc *testConn) send(raw string) {
	tc.t.Helper()
	if _, err := tc.c.Write([]byte(raw)); err != nil {
		tc.t.Fatalf("write: %v", err)
	}
}

// do sends one command and returns its raw reply.
func (tc *testConn) do(args ...string) string {
	tc.t.Helper()
	tc.send(enc(args...))
	return tc.reply()
}

// reply reads one complete raw reply.
func (tc *testConn) reply() string {
	tc.t.Helper()
	b, err := respwire.ReadReply(tc.r, nil)
	s := string(b)
	if err != nil {
		tc.t.Fatalf("reading reply: %v (got %q)", err, s)
	}
	return s
}

// replies reads n replies and concatenates them.
func (tc *testConn) replies(n int) string {
	tc.t.Helper()
	var b strings.Builder
	for range n {
		b.WriteString(tc.reply())
	}
	return b.String()
}

// expectEOF checks that the server closed the connection.
func (tc *testConn) expectEOF() {
	tc.t.Helper()
	rest, err := io.ReadAll(tc.r)
	if err != nil || len(rest) > 0 {
		tc.t.Fatalf("expected EOF, got %q, %v", rest, err)
	}
}

// Reply builders for expectations.
func bulk(s string) string   { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
func errr(s string) string   { return "-" + s + "\r\n" }
func integer(n int64) string { return ":" + strconv.FormatInt(n, 10) + "\r\n" }
func array(items ...string) string {
	return fmt.Sprintf("*%d\r\n", len(items)) + strings.Join(items, "")
}
func bulks(items ...string) string {
	var parts []string
	for _, s := range items {
		parts = append(parts, bulk(s))
	}
	return array(parts...)
}

const (
	ok      = "+OK\r\n"
	queuedR = "+QUEUED\r\n"
	null    = "$-1\r\n"
)
