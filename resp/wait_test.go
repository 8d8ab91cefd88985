package resp

import (
	"context"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// waitStore gives fakeStore write indexes and WAIT: each Write call's index is one more
// than the last; WAIT n 0 blocks until released or its context ends, any
// other WAIT answers the index it was given.
type waitStore struct {
	*fakeStore
	index    uint64
	entered  chan struct{}
	canceled chan struct{}
	release  chan struct{}
}

func (w *waitStore) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	replies := w.Write(ctx, ops)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.index++
	return replies, w.index
}

func (w *waitStore) Wait(ctx context.Context, args [][]byte, index uint64) []byte {
	if string(args[2]) != "0" {
		return command.AppendInt(nil, int64(index))
	}
	w.entered <- struct{}{}
	select {
	case <-ctx.Done():
		close(w.canceled)
		return command.Zero
	case <-w.release:
		return command.AppendInt(nil, 7)
	}
}

func newWaitStore() *waitStore {
	return &waitStore{fakeStore: newFakeStore(), entered: make(chan struct{}, 1),
		canceled: make(chan struct{}), release: make(chan struct{})}
}

// WAIT is given the index of the connection's latest write (each
// connection its own).
func TestWaitGetsTheConnectionsWriteIndex(t *testing.T) {
	_, addr := startServer(t, Config{}, newWaitStore())
	a, b := dial(t, addr), dial(t, addr)
	if got := a.do("WAIT", "1", "5"); got != integer(0) {
		t.Errorf("WAIT before any write = %q, want index 0", got)
	}
	a.do("SADD", "s", "1")
	b.do("SADD", "s", "2")
	a.send(enc("SADD", "s", "3") + enc("SADD", "s", "4") + enc("SISMEMBER", "s", "1"))
	a.replies(3)
	if got := a.do("WAIT", "1", "5"); got != integer(3) {
		t.Errorf("WAIT after a's second batch = %q, want index 3", got)
	}
	if got := b.do("WAIT", "1", "5"); got != integer(2) {
		t.Errorf("WAIT on b = %q, want index 2", got)
	}
}

// A WAIT blocked for a client that closed its connection ends; one
// followed by pipelined commands keeps waiting, and the commands run after.
func TestWaitEndsWhenTheClientLeaves(t *testing.T) {
	w := newWaitStore()
	_, addr := startServer(t, Config{}, w)
	c := dial(t, addr)
	c.send(enc("WAIT", "1", "0"))
	<-w.entered
	c.send(enc("PING")) // arrives while WAIT blocks: left for after it
	close(w.release)
	if got := c.replies(2); got != integer(7)+"+PONG\r\n" {
		t.Fatalf("WAIT then PING = %q", got)
	}
	select {
	case <-w.canceled:
		t.Errorf("WAIT canceled while its client was connected")
	default:
	}

	w2 := newWaitStore()
	_, addr2 := startServer(t, Config{}, w2)
	c2 := dial(t, addr2)
	c2.send(enc("WAIT", "2", "0"))
	<-w2.entered
	c2.c.Close()
	testutil.WaitFor(t, 10*time.Second, "the blocked WAIT to end after its client left", func() bool {
		select {
		case <-w2.canceled:
			return true
		default:
			return false
		}
	})
}
