package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// TLSHandshakeTimeout bounds a client's TLS handshake: a connection that
// does not finish it in time is closed before it becomes a client.
const TLSHandshakeTimeout = 10 * time.Second

// Listeners joins the client port (port) and the TLS port (tls-port) into
// the one listener Serve takes; either may be nil (port 0: TLS only), not
// both. Connections accepted on secure are handshaken with cfg on their own
// goroutine before Accept returns them, so a slow or hostile handshake
// never holds up the accept loop, and a failed one is never a client.
func Listeners(plain, secure net.Listener, cfg *tls.Config, onHandshakeError func(net.Addr, error)) (net.Listener, error) {
	if plain == nil && secure == nil {
		return nil, errors.New("resp: no listener (port 0 and no tls-port)")
	}
	if secure != nil && cfg == nil {
		return nil, errors.New("resp: a TLS listener needs a TLS configuration")
	}
	l := &dualListener{
		plain:   plain,
		secure:  secure,
		conns:   make(chan acceptResult),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	for _, ln := range []net.Listener{plain, secure} {
		if ln == nil {
			continue
		}
		l.loops.Add(1)
		go l.acceptLoop(ln, ln == secure, cfg, onHandshakeError)
	}
	return l, nil
}

type acceptResult struct {
	c   net.Conn
	err error
}

type dualListener struct {
	plain, secure net.Listener
	conns         chan acceptResult
	done          chan struct{}
	closeOnce     sync.Once
	loops         sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // TLS connections still handshaking
}

func (l *dualListener) acceptLoop(ln net.Listener, secure bool, cfg *tls.Config, onErr func(net.Addr, error)) {
	defer l.loops.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Handed on, so that Serve's accept-error backoff applies.
			select {
			case l.conns <- acceptResult{err: err}:
				continue
			case <-l.done:
				return
			}
		}
		if !secure {
			l.deliver(c)
			continue
		}
		if !l.track(c) {
			return
		}
		go l.handshake(tls.Server(c, cfg), onErr)
	}
}

func (l *dualListener) handshake(tc *tls.Conn, onErr func(net.Addr, error)) {
	defer l.untrack(tc.NetConn())
	ctx, cancel := context.WithTimeout(context.Background(), TLSHandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		_ = tc.Close()
		select {
		case <-l.done:
			return // closed under it: not the client's fault
		default:
		}
		if onErr != nil {
			onErr(tc.RemoteAddr(), err)
		}
		return
	}
	l.deliver(tc)
}

// track records a connection in handshake so that Close can end it; false
// once closed.
func (l *dualListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		_ = c.Close()
		return false
	}
	l.pending[c] = struct{}{}
	return true
}

func (l *dualListener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, c)
}

func (l *dualListener) deliver(c net.Conn) {
	select {
	case l.conns <- acceptResult{c: c}:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *dualListener) Accept() (net.Conn, error) {
	select {
	case r := <-l.conns:
		return r.c, r.err
	case <-l.done:
		return nil, fmt.Errorf("resp: accept: %w", net.ErrClosed)
	}
}

// Close closes both listeners and every connection still handshaking.
func (l *dualListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		for _, ln := range []net.Listener{l.plain, l.secure} {
			if ln != nil {
				if cerr := ln.Close(); cerr != nil && err == nil {
					err = cerr
				}
			}
		}
		l.mu.Lock()
		for c := range l.pending {
			_ = c.Close()
		}
		l.pending = nil
		l.mu.Unlock()
		l.loops.Wait()
	})
	return err
}

// Addr is the client port's address, or the TLS port's when there is no
// client port: INFO's tcp_port is Redis's "port ? port : tls_port".
func (l *dualListener) Addr() net.Addr {
	if l.plain != nil {
		return l.plain.Addr()
	}
	return l.secure.Addr()
}

// listenerPorts returns the port and tls-port served, as CONFIG GET reports
// them ("0" when off), when the server serves Listeners.
func (s *Server) listenerPorts() (port, tlsPort string, ok bool) {
	s.mu.Lock()
	fl, _ := s.ln.(*frameListener)
	s.mu.Unlock()
	if fl == nil {
		return "", "", false
	}
	dl, _ := fl.Listener.(*dualListener)
	if dl == nil {
		return "", "", false
	}
	portOf := func(ln net.Listener) string {
		if ln == nil {
			return "0"
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			return strconv.Itoa(a.Port)
		}
		return "0"
	}
	return portOf(dl.plain), portOf(dl.secure), true
}

// configPort is CONFIG GET port: the plain port, 0 when only TLS is served.
func (s *Server) configPort() string {
	if p, _, ok := s.listenerPorts(); ok {
		return p
	}
	return s.port()
}

// configTLSPort is CONFIG GET tls-port.
func (s *Server) configTLSPort() string {
	if _, p, ok := s.listenerPorts(); ok {
		return p
	}
	return "0"
}

// socketConn is the TCP connection under a TLS one, for what needs the
// socket itself (its descriptor, a peek for a closed peer).
func socketConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}
