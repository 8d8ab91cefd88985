package cluster

import (
	"context"
	"sync"
)

// Follower reads share read-index rounds. A follower's linearizable read
// needs an index from the leader (raftset.readindex) taken after the read
// arrived. Asking once per read batch made every pipelined batch of every
// connection pay a call: a pooled connection, a write and a read on each
// side, and a goroutine wake-up on the leader; the follower spent a quarter
// of its CPU there and the leader as much again (docs/benchmarks.md,
// "Follower reads share one read-index call").
//
// Now one goroutine makes the calls: each call serves every read that
// joined before the call was sent (take closes the group first), so the
// index the leader answers was taken after all of them arrived, which is
// what linearizability asks of a read index. Reads that arrive while a call
// is in flight form the next group. This is the leader's own batching
// (reader.join, runReadBarrier), one hop further out.

// groupQueue collects the readers waiting for the next round: of the
// leader's barrier (reader) and of a follower's shared call (reader.fwd).
type groupQueue struct {
	mu   sync.Mutex
	next *readGroup
	sig  chan struct{} // capacity 1
}

func (q *groupQueue) init() { q.sig = make(chan struct{}, 1) }

// join adds the caller to the group the next round will serve.
func (q *groupQueue) join() *readGroup {
	q.mu.Lock()
	g := q.next
	if g == nil {
		g = &readGroup{done: make(chan struct{})}
		q.next = g
	}
	q.mu.Unlock()
	select {
	case q.sig <- struct{}{}:
	default:
	}
	return g
}

// await joins the next group and returns its answer: the index to wait
// for, or the reply to refuse with (also when ctx ends or stop closes).
func (q *groupQueue) await(ctx context.Context, stop <-chan struct{}) (uint64, []byte) {
	g := q.join()
	select {
	case <-g.done:
	case <-ctx.Done():
		return 0, replyReadCanceled
	case <-stop:
		return 0, replyReadClosing
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.target, nil
}

// take closes the waiting group to newcomers and returns it (nil if none).
func (q *groupQueue) take() *readGroup {
	q.mu.Lock()
	g := q.next
	q.next = nil
	q.mu.Unlock()
	return g
}

// sharedReadIndex is followerReadIndex for a reader: it joins the next
// shared call and returns its answer.
func (n *Node) sharedReadIndex(ctx context.Context) (uint64, []byte) {
	return n.rd.fwd.await(ctx, n.stopCh)
}

// runFollowerReads makes the shared read-index calls, one at a time.
func (n *Node) runFollowerReads() {
	defer n.wg.Done()
	for {
		select {
		case <-n.rd.fwd.sig:
		case <-n.stopCh:
			return
		}
		g := n.rd.fwd.take()
		if g == nil {
			continue
		}
		// The call is bounded by the pool's timeout and by Close (n.ctx);
		// a reader that stops waiting leaves it to the others.
		n.rd.fwdCalls.Add(1)
		g.target, g.err = n.followerReadIndex(n.ctx)
		close(g.done)
	}
}
