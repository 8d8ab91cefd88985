package resp

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

var fuzzServer struct {
	once sync.Once
	addr string
	err  error
}

// fuzzAddr starts, once per process, a server the fuzz inputs are sent to.
// The parameters an input could use to lock the next inputs out are made
// read-only.
func fuzzAddr() (string, error) {
	fuzzServer.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fuzzServer.err = err
			return
		}
		s := NewServer(Config{Logger: hclog.NewNullLogger()}, newFakeStore())
		for _, name := range []string{"requirepass", "maxclients", "timeout"} {
			s.RegisterConfig(name, func() string { return "" }, nil)
		}
		go func() { _ = s.Serve(ln) }()
		fuzzServer.addr = ln.Addr().String()
	})
	return fuzzServer.addr, fuzzServer.err
}

// FuzzRESP feeds arbitrary bytes (1) to the framing checker in front of
// redcon's reader, in chunks, and (2) to a live server connection. Neither
// may panic or hang; the checker must refuse whatever redcon would reject
// (except inline quoting, which redcon reports itself) and hand on a prefix
// of the input; the server must close the connection once the input ends
// and keep serving others.
func FuzzRESP(f *testing.F) {
	for _, seed := range []string{
		enc("PING"), enc("SADD", "k", "a", "b") + enc("SMEMBERS", "k"),
		"PING\r\nECHO \"a b\"\r\n", "*1\r\n$2147483648\r\n", "*999999999\r\n",
		enc("MULTI") + enc("SET", "a", "1") + enc("EXEC"), enc("WATCH", "a") + enc("MULTI") + enc("INCR", "a") + enc("EXEC"),
		enc("AUTH", "x") + enc("HELLO", "3") + enc("CLIENT", "LIST"), enc("CONFIG", "GET", "*"),
		"*2\r\n$4\r\nECHO\r\n$3\r\nabcXY", "ping 'a\r\n", enc("INFO") + enc("COMMAND"),
	} {
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		// (1) framer + redcon reader.
		sizes := []int{int(mode&0x3f) + 1, int(mode>>2) + 1}
		lim := frameLimits{maxBulk: 1 << 20, unauth: mode&0x80 != 0}
		_, fr, err := parseAll(data, sizes, lim)
		if err != nil && !strings.Contains(err.Error(), "unbalanced quotes") {
			t.Fatalf("redcon refused what the framer passed: %v (framer %q)", err, fr.perr)
		}
		if !bytes.HasPrefix(data, fr.passed) {
			t.Fatalf("framer passed %q, not a prefix of the input", fr.passed)
		}

		// (2) live server.
		addr, err := fuzzAddr()
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("server did not close the connection: hang")
				}
				break
			}
		}
		p, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		_ = p.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := p.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 7)
		if _, err := readAll(p, got); err != nil || string(got) != "+PONG\r\n" {
			t.Fatalf("PING after input = %q, %v", got, err)
		}
	})
}

func readAll(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
