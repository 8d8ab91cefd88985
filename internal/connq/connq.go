// Package connq is the hand-off between a listener's accept loop, which
// vets each connection on a goroutine of its own (a handshake, a header),
// and a raft.StreamLayer's Accept, which returns the vetted ones: both the
// authenticated stream layer (peerauth) and each multiplexed Raft group
// (raftmux) are one.
package connq

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Queue passes connections from Deliver to Accept, unbuffered: a
// connection nobody accepts is closed when the queue closes, never left
// open in a buffer.
type Queue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// New returns an open queue.
func New() *Queue {
	return &Queue{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next delivered connection, or net.ErrClosed once the
// queue is closed.
func (q *Queue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Deliver waits until Accept takes c, or closes c if the queue or stop
// closes first (stop may be nil); it reports whether c was taken.
func (q *Queue) Deliver(c net.Conn, stop <-chan struct{}) bool {
	select {
	case q.conns <- c:
		return true
	case <-q.done:
	case <-stop:
	}
	_ = c.Close()
	return false
}

// Close makes Accept return net.ErrClosed and Deliver refuse; it may be
// called more than once.
func (q *Queue) Close() { q.once.Do(func() { close(q.done) }) }

// Done is closed when the queue is.
func (q *Queue) Done() <-chan struct{} { return q.done }

// RetryAccept decides what an accept loop does after its listener's Accept
// failed with err: stop (false) once done is closed or the listener is,
// otherwise go on (true), after a short pause unless err was a timeout, so
// that a persistent failure (EMFILE) does not spin.
func RetryAccept(err error, done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	time.Sleep(10 * time.Millisecond)
	return true
}
