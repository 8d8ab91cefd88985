package peerauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"raftset/internal/connq"
)

// Config says how peers prove themselves. With ServerTLS and ClientTLS set,
// mutual TLS is the proof (both configs must require and verify the other
// side's certificate: see internal/tlsconf); otherwise Secret is, and it must
// not be empty. A stream layer with neither is refused: Open reports it.
type Config struct {
	Secret    []byte
	ServerTLS *tls.Config
	ClientTLS *tls.Config
	// Purpose is the stream's purpose byte in the secret handshake.
	Purpose byte
	// HandshakeTimeout bounds one handshake (default 5 s).
	HandshakeTimeout time.Duration
	// MaxPending bounds handshakes in progress at once (default 64): a
	// stranger opening connections and sending nothing ties up at most these.
	MaxPending int
	Logger     hclog.Logger
}

// StreamLayer is a raft.StreamLayer whose Accept returns only connections
// from authenticated peers and whose Dial authenticates to the peer.
type StreamLayer struct {
	cfg       Config
	ln        net.Listener
	advertise net.Addr
	queue     *connq.Queue // authenticated connections, for Accept
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	refused   atomic.Uint64
	mu        sync.Mutex
	inflight  map[net.Conn]struct{} // connections still in their handshake
	lastLog   atomic.Int64          // unix nanos of the last refusal logged
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// ErrNoCredentials is Open's error when neither TLS nor a secret is set.
var ErrNoCredentials = errors.New("peer authentication needs a cluster secret or TLS certificates")

// Open wraps ln. advertise is the address other nodes dial (nil: ln's).
func Open(ln net.Listener, advertise net.Addr, cfg Config) (*StreamLayer, error) {
	useTLS := cfg.ServerTLS != nil || cfg.ClientTLS != nil
	if useTLS && (cfg.ServerTLS == nil || cfg.ClientTLS == nil) {
		return nil, errors.New("peer TLS needs both a server and a client configuration")
	}
	if !useTLS && len(cfg.Secret) == 0 {
		return nil, ErrNoCredentials
	}
	if len(cfg.Secret) > maxSecretLen {
		return nil, fmt.Errorf("cluster secret longer than %d bytes", maxSecretLen)
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Purpose == 0 {
		cfg.Purpose = PurposeRaft
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if cfg.ServerTLS != nil && cfg.ServerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("peer TLS must require and verify the client's certificate")
	}
	s := &StreamLayer{cfg: cfg, ln: ln, advertise: advertise, queue: connq.New(), done: make(chan struct{}),
		inflight: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Refused counts connections refused because the peer did not authenticate.
func (s *StreamLayer) Refused() uint64 { return s.refused.Load() }

func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	pending := make(chan struct{}, s.cfg.MaxPending)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !connq.RetryAccept(err, s.done) {
				return
			}
			continue
		}
		select {
		case pending <- struct{}{}:
		default:
			s.refuse(c, errors.New("too many handshakes in progress"))
			continue
		}
		if !s.track(c, true) {
			_ = c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-pending }()
			ac, err := s.serverSide(c)
			s.track(c, false)
			if err != nil {
				s.refuse(c, err)
				return
			}
			s.queue.Deliver(ac, s.done)
		}()
	}
}

func (s *StreamLayer) refuse(c net.Conn, err error) {
	s.refused.Add(1)
	_ = c.Close()
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last >= int64(time.Second) && s.lastLog.CompareAndSwap(last, now) {
		s.cfg.Logger.Warn("refused a Raft connection from an unauthenticated peer", "remote", c.RemoteAddr().String(), "error", err, "refused_total", s.refused.Load())
	}
}

// serverSide authenticates an accepted connection.
func (s *StreamLayer) serverSide(c net.Conn) (net.Conn, error) {
	deadline := time.Now().Add(s.cfg.HandshakeTimeout)
	_ = c.SetDeadline(deadline)
	if s.cfg.ServerTLS != nil {
		tc := tls.Server(c, s.cfg.ServerTLS)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: tls: %w", ErrDenied, err)
		}
		_ = c.SetDeadline(time.Time{})
		return tc, nil
	}
	if err := serverHandshake(c, s.cfg.Secret, s.cfg.Purpose); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// Accept returns the next authenticated connection.
func (s *StreamLayer) Accept() (net.Conn, error) { return s.queue.Accept() }

// Dial connects to a peer and authenticates both ways.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.DialContext(context.Background(), string(address), timeout)
}

// DialContext connects to addr and authenticates both ways within timeout.
func (s *StreamLayer) DialContext(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = s.cfg.HandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if s.cfg.ClientTLS != nil {
		tc := tls.Client(c, s.cfg.ClientTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("authenticate to %s: tls: %w", addr, err)
		}
		_ = c.SetDeadline(time.Time{})
		return tc, nil
	}
	if err := clientHandshake(c, s.cfg.Secret, s.cfg.Purpose); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("authenticate to %s: %w", addr, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// track adds or removes a connection in its handshake; it refuses to add
// once the layer is closed.
func (s *StreamLayer) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.inflight, c)
		return true
	}
	if s.inflight == nil {
		return false
	}
	s.inflight[c] = struct{}{}
	return true
}

// Close stops accepting, closes the listener and every connection still in
// its handshake.
func (s *StreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		s.queue.Close()
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.inflight {
			_ = c.Close()
		}
		s.inflight = nil
		s.mu.Unlock()
	})
	s.wg.Wait()
	return err
}

// Addr is the advertised address.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }
