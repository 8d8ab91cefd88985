package cluster

import (
	"context"
	"sync"
	"sync/atomic"
)

// Reads wait while a restore is being installed (RAFT.RESTORE, Import).
//
// Raft's user restore replaces the leader's state at once, but it commits
// nothing: the leader's commit index stays where it was, and the followers
// install the restored snapshot only when replication next reaches past it.
// A read index taken in between (the leader's commit index) is one every
// follower has already applied, so a follower would serve the state from
// before the restore while the leader serves the restored one, and a later
// read would go back in time (a CAS register read old after a newer read,
// found by TestJepsen/restore-3). The restore is done — installed on a
// quorum — once an entry this leader proposed after it commits (Import's
// first write): only then does the read index pass the restore, so that
// every replica must install it before it answers. Until then the leader
// hands out no read index: readers wait for the end of the restore.
type restoreGate struct {
	// gen is odd while a restore is being installed; it changes at the
	// start and at the end of each, so a read index taken across a whole
	// restore is seen too.
	gen atomic.Uint64
	// held counts read rounds that waited for a restore.
	held atomic.Uint64

	mu   sync.Mutex
	done chan struct{} // closed when the restore in progress ends
}

// begin marks a restore as in progress; end, as over. Node.Import runs
// one restore at a time (importMu).
func (g *restoreGate) begin() {
	g.mu.Lock()
	g.done = make(chan struct{})
	g.gen.Add(1)
	g.mu.Unlock()
}

func (g *restoreGate) end() {
	g.mu.Lock()
	g.gen.Add(1)
	close(g.done)
	g.mu.Unlock()
}

// installing reports whether the generation gen was taken during a restore.
func installing(gen uint64) bool { return gen%2 == 1 }

// wait returns nil once no restore is in progress, or ctx's error.
func (g *restoreGate) wait(ctx context.Context, stop <-chan struct{}) error {
	g.mu.Lock()
	done, busy := g.done, installing(g.gen.Load())
	g.mu.Unlock()
	if !busy {
		return nil
	}
	g.held.Add(1)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return context.Canceled
	}
}
