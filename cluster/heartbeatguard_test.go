package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHeartbeatGuard: a node's close waits for a heartbeat handler in
// flight (it may be writing the stable store the close is about to shut),
// and no handler runs after it.
func TestHeartbeatGuard(t *testing.T) {
	var g heartbeatGuard
	entered, release, ran := make(chan struct{}), make(chan struct{}), make(chan int, 2)
	calls := 0
	h := g.wrap(func(raft.RPC) {
		calls++
		if calls == 1 {
			close(entered)
			<-release
		}
		ran <- calls
	})
	go h(raft.RPC{})
	<-entered
	closed := make(chan struct{})
	go func() { g.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while a heartbeat handler ran")
	case <-time.After(100 * time.Millisecond):
		// Still waiting, as it must; it cannot return before release.
	}
	close(release)
	<-closed
	if n := <-ran; n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	h(raft.RPC{}) // after the close: not run
	select {
	case n := <-ran:
		t.Fatalf("a handler ran after the close (call %d)", n)
	default:
	}
	if g.wrap(nil) != nil {
		t.Error("wrap(nil) is not nil: the transport would take it for a fast path")
	}
}
