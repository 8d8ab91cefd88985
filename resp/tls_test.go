package resp

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/certgen"
	"raftset/internal/testutil"
)

// testTLS makes a CA and a server certificate for 127.0.0.1, and returns the
// server's configuration and a client's that trusts the CA.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ca, err := certgen.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	node, err := certgen.NewNode(ca, certgen.NodeSpec{Name: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(node.CertPEM, node.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// startDual serves a fake store on Listeners: a plain port unless tlsOnly,
// and a TLS port. It returns the plain address ("" when tlsOnly), the TLS
// address and the client TLS configuration.
func startDual(t *testing.T, tlsOnly bool, onErr func(net.Addr, error)) (*Server, string, string, *tls.Config) {
	t.Helper()
	srvTLS, cliTLS := testTLS(t)
	var plain net.Listener
	plainAddr := ""
	if !tlsOnly {
		var err error
		if plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		plainAddr = plain.Addr().String()
	}
	secure, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listeners(plain, secure, srvTLS, onErr)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{Logger: newTestLogger(t)}, newFakeStore())
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
	return s, plainAddr, secure.Addr().String(), cliTLS
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *testConn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &testConn{t: t, c: c, r: bufio.NewReader(c)}
}

func TestListenersServeBothPorts(t *testing.T) {
	_, plainAddr, tlsAddr, cliTLS := startDual(t, false, nil)
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	_, plainPort, _ := net.SplitHostPort(plainAddr)
	for _, tc := range []*testConn{dial(t, plainAddr), dialTLS(t, tlsAddr, cliTLS)} {
		if got := tc.do("SADD", "s", "a", "b"); got != integer(2) && got != integer(0) {
			t.Errorf("SADD = %q", got)
		}
		if got := tc.do("SCARD", "s"); got != integer(2) {
			t.Errorf("SCARD = %q", got)
		}
		if got := tc.do("CONFIG", "GET", "*port"); got != bulks("port", plainPort, "tls-port", tlsPort) {
			t.Errorf("CONFIG GET *port = %q", got)
		}
	}
	// A client that speaks plain RESP to the TLS port is not served.
	raw := dial(t, tlsAddr)
	raw.send(enc("PING"))
	if b, err := raw.r.ReadString('\n'); err == nil && b == "+PONG\r\n" {
		t.Error("the TLS port answered plain text")
	}
}

func TestListenersTLSOnly(t *testing.T) {
	var handshakeErrors atomic.Int64
	s, _, tlsAddr, cliTLS := startDual(t, true, func(net.Addr, error) { handshakeErrors.Add(1) })
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	tc := dialTLS(t, tlsAddr, cliTLS)
	if got := tc.do("CONFIG", "GET", "port"); got != bulks("port", "0") {
		t.Errorf("CONFIG GET port = %q, want 0 (TLS only)", got)
	}
	if got := tc.do("CONFIG", "GET", "tls-port"); got != bulks("tls-port", tlsPort) {
		t.Errorf("CONFIG GET tls-port = %q", got)
	}
	if got := s.port(); got != tlsPort {
		t.Errorf("INFO tcp_port = %s, want the TLS port %s as Redis reports it", got, tlsPort)
	}
	// A failed handshake is reported and never becomes a client.
	bad := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if c, err := tls.Dial("tcp", tlsAddr, bad); err == nil {
		c.Close()
		t.Fatal("a client that does not trust the server's CA completed the handshake")
	}
	testutil.WaitFor(t, 10*time.Second, "the failed handshake to be reported", func() bool { return handshakeErrors.Load() == 1 })
	if got := tc.do("INFO", "stats"); !containsField(got, "total_connections_received:1") {
		t.Errorf("the failed handshake was counted as a connection:\n%s", got)
	}
	// A connection that never handshakes is closed on Close, not waited for.
	idle, err := net.Dial("tcp", tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
}

func containsField(info, field string) bool {
	return strings.Contains(info, "\r\n"+field+"\r\n")
}

func TestListenersNeedOne(t *testing.T) {
	if _, err := Listeners(nil, nil, nil, nil); err == nil {
		t.Error("no listener accepted")
	}
}

// TestConfigApplyRollsBack: parameters applied together (a certificate and
// its key) take effect once, after both were set, and a failed apply gives
// both their old values back, as Redis's apply functions do.
func TestConfigApplyRollsBack(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeStore())
	vals := map[string]string{"a": "1", "b": "1"}
	var applied []string
	apply := &ConfigApply{Apply: func() error {
		applied = append(applied, vals["a"]+vals["b"])
		if vals["a"] != vals["b"] {
			return errors.New("Unable to update TLS configuration. Check server logs.")
		}
		return nil
	}}
	for _, name := range []string{"a", "b"} {
		s.RegisterConfigApplied(name, func() string { return vals[name] },
			func(v string) error { vals[name] = v; return nil }, apply)
	}
	c := dial(t, addr)
	if got := c.do("CONFIG", "SET", "a", "2", "b", "2"); got != ok {
		t.Fatalf("CONFIG SET a 2 b 2 = %q", got)
	}
	if len(applied) != 1 || applied[0] != "22" {
		t.Fatalf("applied %q, want once with both new values", applied)
	}
	want := errr("ERR CONFIG SET failed (possibly related to argument 'b') - Unable to update TLS configuration. Check server logs.")
	if got := c.do("CONFIG", "SET", "b", "3"); got != want {
		t.Fatalf("CONFIG SET b 3 = %q, want %q", got, want)
	}
	if got := c.do("CONFIG", "GET", "b"); got != bulks("b", "2") {
		t.Errorf("after a failed apply: %q, want the old value", got)
	}
	if last := applied[len(applied)-1]; last != "22" {
		t.Errorf("the old values were not applied again: %q", applied)
	}
}
