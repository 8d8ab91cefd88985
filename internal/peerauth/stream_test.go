package peerauth

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"raftset/internal/certgen"
	"raftset/internal/testutil"
	"raftset/internal/tlsconf"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func open(t *testing.T, cfg Config) *StreamLayer {
	t.Helper()
	s, err := Open(listen(t), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// acceptOne returns the next accepted connection, or nil if none arrives
// before the dialler's side has finished (done closed) and a grace period.
func acceptOne(s *StreamLayer) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

// echoThrough checks that bytes written on a reach b.
func echoThrough(t *testing.T, a, b net.Conn) {
	t.Helper()
	msg := []byte("append entries")
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestSecretHandshakeAdmitsPeersWithTheSecret(t *testing.T) {
	server := open(t, Config{Secret: []byte("s3cret")})
	client := open(t, Config{Secret: []byte("s3cret")})
	accepted := acceptOne(server)
	c, err := client.DialContext(t.Context(), server.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := <-accepted
	if sc == nil {
		t.Fatal("server accepted nothing")
	}
	defer sc.Close()
	echoThrough(t, c, sc)
	echoThrough(t, sc, c)
}

// refusedBy waits until server has refused want connections; Accept must
// have returned nothing meanwhile.
func refusedBy(t *testing.T, server *StreamLayer, accepted <-chan net.Conn, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for server.Refused() < want {
		if time.Now().After(deadline) {
			t.Fatalf("refused %d connections, want %d", server.Refused(), want)
		}
		select {
		case c := <-accepted:
			t.Fatalf("an unauthenticated connection was accepted: %v", c)
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case c := <-accepted:
		t.Fatalf("an unauthenticated connection was accepted: %v", c)
	default:
	}
}

func TestWrongSecretIsRefusedBothWays(t *testing.T) {
	server := open(t, Config{Secret: []byte("right")})
	client := open(t, Config{Secret: []byte("wrong")})
	accepted := acceptOne(server)
	_, err := client.DialContext(t.Context(), server.Addr().String(), 5*time.Second)
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("dial with the wrong secret: %v, want ErrDenied (the server's proof fails)", err)
	}
	refusedBy(t, server, accepted, 1)
}

func TestStrangersBytesNeverReachAccept(t *testing.T) {
	server := open(t, Config{Secret: []byte("s")})
	accepted := acceptOne(server)
	// What hashicorp/raft's transport sends first: an RPC type byte and a
	// msgpack-encoded AppendEntries request. Here, any bytes that are not the
	// handshake.
	for i, payload := range [][]byte{
		append([]byte{0}, bytes.Repeat([]byte{0x8a}, 200)...),
		[]byte("RSPA\x02\x01" + string(bytes.Repeat([]byte{1}, 32))), // a future version
		[]byte("RSPA\x01\x07" + string(bytes.Repeat([]byte{1}, 32))), // another purpose
		{},
	} {
		c, err := net.Dial("tcp", server.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(payload)
		if len(payload) == 0 {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		refusedBy(t, server, accepted, uint64(i+1))
		_ = c.Close()
	}
}

// recorder keeps what the client side writes.
type recorder struct {
	net.Conn
	sent bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) { r.sent.Write(b); return r.Conn.Write(b) }

func TestRecordedHandshakeCannotBeReplayed(t *testing.T) {
	secret := []byte("s")
	server := open(t, Config{Secret: secret})
	accepted := acceptOne(server)
	raw, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Conn: raw}
	if err := clientHandshake(rec, secret, PurposeRaft); err != nil {
		t.Fatal(err)
	}
	if c := <-accepted; c == nil {
		t.Fatal("the genuine handshake was not accepted")
	} else {
		c.Close()
	}
	raw.Close()

	// The eavesdropper replays the client's bytes (hello and proof) verbatim.
	accepted = acceptOne(server)
	c, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(rec.sent.Bytes()); err != nil {
		t.Fatal(err)
	}
	refusedBy(t, server, accepted, 1)
}

func TestOpenNeedsCredentials(t *testing.T) {
	ln := listen(t)
	defer ln.Close()
	if _, err := Open(ln, nil, Config{}); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("Open without credentials: %v", err)
	}
	if _, err := Open(ln, nil, Config{ServerTLS: &tls.Config{}, ClientTLS: &tls.Config{}}); err == nil {
		t.Fatal("Open accepted a peer TLS server config that does not verify clients")
	}
}

// writeCerts makes a CA and a node certificate under dir and returns the
// store of the node's files.
func writeCerts(t *testing.T, dir string, ca certgen.Pair, name string) *tlsconf.Store {
	t.Helper()
	return testutil.NodeCertStore(t, dir, ca, name)
}

func tlsLayer(t *testing.T, st *tlsconf.Store, pinned []string) *StreamLayer {
	t.Helper()
	srv, err := st.PeerServer(pinned)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := st.PeerClient(pinned)
	if err != nil {
		t.Fatal(err)
	}
	return open(t, Config{ServerTLS: srv, ClientTLS: cli})
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.NewCA("raftset test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certgen.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	n1 := tlsLayer(t, writeCerts(t, dir, ca, "n1"), nil)
	n2 := tlsLayer(t, writeCerts(t, dir, ca, "n2"), nil)
	stranger := tlsLayer(t, writeCerts(t, dir, other, "n3"), nil)

	t.Run("same CA", func(t *testing.T) {
		accepted := acceptOne(n1)
		c, err := n2.DialContext(t.Context(), n1.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc := <-accepted
		if sc == nil {
			t.Fatal("nothing accepted")
		}
		defer sc.Close()
		echoThrough(t, c, sc)
	})
	t.Run("another CA dials in", func(t *testing.T) {
		accepted := acceptOne(n1)
		before := n1.Refused()
		if c, err := stranger.DialContext(t.Context(), n1.Addr().String(), 5*time.Second); err == nil {
			// TLS 1.3: the client may finish before the server checks its
			// certificate; the server must still refuse it.
			c.Close()
		}
		refusedBy(t, n1, accepted, before+1)
	})
	t.Run("dialling a node of another CA", func(t *testing.T) {
		if _, err := n1.DialContext(t.Context(), stranger.Addr().String(), 5*time.Second); err == nil {
			t.Fatal("a node trusted a server whose certificate another CA signed")
		}
	})
	t.Run("plain TCP to a TLS port", func(t *testing.T) {
		accepted := acceptOne(n1)
		before := n1.Refused()
		c, err := net.Dial("tcp", n1.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(bytes.Repeat([]byte{0}, 300))
		refusedBy(t, n1, accepted, before+1)
	})
	t.Run("pinned names", func(t *testing.T) {
		pinned := tlsLayer(t, writeCerts(t, dir, ca, "n4"), []string{"n1"})
		accepted := acceptOne(pinned)
		before := pinned.Refused()
		if c, err := n2.DialContext(t.Context(), pinned.Addr().String(), 5*time.Second); err == nil {
			c.Close()
		}
		refusedBy(t, pinned, accepted, before+1)
	})
}

func FuzzServerHandshake(f *testing.F) {
	f.Add([]byte("RSPA\x01\x01" + string(bytes.Repeat([]byte{7}, 32+32))))
	f.Add([]byte{})
	f.Add([]byte("RSPA"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rw := &fuzzConn{in: bytes.NewReader(in)}
		if err := serverHandshake(rw, []byte("secret"), PurposeRaft); err == nil {
			t.Fatalf("a handshake without the secret was accepted: %q", in)
		}
	})
}

func FuzzClientHandshake(f *testing.F) {
	f.Add([]byte("RSPA" + string(bytes.Repeat([]byte{7}, 32+32))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		rw := &fuzzConn{in: bytes.NewReader(in)}
		if err := clientHandshake(rw, []byte("secret"), PurposeRaft); err == nil {
			t.Fatalf("a server answer without the secret was accepted: %q", in)
		}
	})
}

type fuzzConn struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *fuzzConn) Read(b []byte) (int, error)  { return c.in.Read(b) }
func (c *fuzzConn) Write(b []byte) (int, error) { return c.out.Write(b) }
