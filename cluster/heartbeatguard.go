package cluster

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Raft's heartbeat fast path runs processHeartbeat on the transport's
// connection goroutine, not on one of Raft's own: Shutdown does not wait
// for it. A heartbeat that passed processHeartbeat's shutdown check just
// before a close can still write the stable store (a higher term), and
// Raft panics when that write fails on a store the close shut meanwhile
// ("failed to save current term"), taking the whole process, every shard
// it holds, down with it. A shard replica closes while its group's peers
// keep sending (REMOVEREPLICA, REMOVESHARD, a refused start), so the node
// closes its stores only once no heartbeat handler runs and none can start.

// heartbeatGuard lets the node's close wait out heartbeat handlers in
// flight and turn later ones away.
type heartbeatGuard struct {
	mu     sync.RWMutex
	closed bool
}

// wrap is handler, run only while the guard is open.
func (g *heartbeatGuard) wrap(handler func(raft.RPC)) func(raft.RPC) {
	if handler == nil {
		return nil // the transport then queues heartbeats for Raft's loop
	}
	return func(rpc raft.RPC) {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if g.closed {
			// As processHeartbeat after Shutdown: no answer, the
			// transport gives up on the request when it closes.
			return
		}
		handler(rpc)
	}
}

// close returns once no handler runs; none runs after it.
func (g *heartbeatGuard) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// guardedTransport is a network transport whose heartbeat handler runs
// under guard. Embedding keeps every other method (the optional
// interfaces Raft looks for included: WithClose, WithPeers, WithPreVote).
type guardedTransport struct {
	*raft.NetworkTransport
	guard *heartbeatGuard
	// lead, when set, holds a follower's successful reply to entries
	// until the leader's deferred fsyncs of them are done (leadersync.go).
	lead *leaderSyncs
	// acks records when the requests peers answered with success were
	// sent, for the read path's leadership check (freshacks.go).
	acks *freshAcks
}

func (t guardedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	var sent int64
	if t.acks != nil {
		sent = t.acks.now()
	}
	// Every entry in args was written before the request: the mark taken
	// now covers them.
	hold := t.lead != nil && len(args.Entries) > 0
	var mark uint64
	if hold {
		mark = t.lead.writtenMark()
	}
	if err := t.NetworkTransport.AppendEntries(id, target, args, resp); err != nil {
		return err
	}
	if !resp.Success {
		return nil
	}
	if t.acks != nil {
		t.acks.record(id, sent)
	}
	if hold {
		if err := t.lead.waitDurable(mark); err != nil {
			return fmt.Errorf("append entries to %s: the leader's own fsync: %w", id, err)
		}
	}
	return nil
}

func (t guardedTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.NetworkTransport.SetHeartbeatHandler(t.guard.wrap(cb))
}
