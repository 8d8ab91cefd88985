package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/setenc"
)

// The read path (DESIGN.md, "Reads"; rqlite's recipe):
//
//  1. a leader serves linearizable reads only after it has committed an entry
//     of its own term and applied everything before it (raft.Barrier, once
//     per term);
//  2. read index = Raft's commit index, taken after the read arrived;
//  3. VerifyLeader: a quorum still follows this leader, as shown by replies
//     to requests sent after the round began (freshacks.go), in a round
//     that no stall of this process overlapped (stall.go);
//  4. the term did not change;
//  5. wait until the state machine has applied the read index, then read.
//
// Steps 1-4 are batched: a barrier goroutine serves every read that arrived
// before it took the group with one VerifyLeader round. Step 5 runs in each
// reader, with no polling. A leader that is the only voter skips the barrier
// goroutine and VerifyLeader (soloReadIndex).
//
// Raft's commit index may point at an entry the state machine never sees
// (the leader's no-op, a barrier, a configuration change), so the index
// waited for is the last command entry at or before it (readTarget).

type reader struct {
	// The readers waiting for the barrier goroutine's next round
	// (join, take, sig).
	groupQueue

	// floor is a snapshot index the state machine's state is known to
	// include: entries at or below it need no wait.
	floor atomic.Uint64
	// readyTerm is the term in which this node, as leader, committed and
	// applied a barrier.
	readyTerm atomic.Uint64

	// The last readTarget computation, under memoMu: the barrier goroutine
	// and soloReadIndex's readers share it.
	memoMu                 sync.Mutex
	memoCommit, memoTarget uint64

	// fwd is a follower's readers waiting for a shared read-index call
	// (followerread.go).
	fwd groupQueue
	// fwdCalls counts the read-index calls it made.
	fwdCalls atomic.Uint64
	// batches counts the read calls served, stale ones included: the
	// defragmenter's idle test (defrag.go).
	batches atomic.Uint64
	// restore holds read indexes back while a restore is being installed
	// (restoregate.go).
	restore restoreGate
}

type readGroup struct {
	done   chan struct{}
	target uint64 // wait until the state machine applied this index
	err    []byte // or refuse with this reply
}

func (rd *reader) init() {
	rd.groupQueue.init()
	rd.fwd.init()
}

// randSource is the local random source of reads (SRANDMEMBER, RANDOMKEY):
// math/rand/v2's per-thread generator, safe for concurrent use.
type randSource struct{}

func (randSource) Uint64() uint64 { return rand.Uint64() }

// Read runs a read-only command. Unless stale, the read is linearizable: it
// reflects every write acknowledged before it was called, and it is served
// only after the leader confirmed its leadership after the call (a follower
// asks the leader for the index to wait for, then reads locally). A stale
// read is served from this node's state as it is.
func (n *Node) Read(ctx context.Context, args [][]byte, stale bool) []byte {
	n.rd.batches.Add(1)
	if !stale {
		if reply := n.linearize(ctx); reply != nil {
			return reply
		}
		n.st.reads.Add(1)
	}
	return n.fsm.Read(args, n.nowMs(), randSource{}, nil)
}

// Watch returns the WATCH stamps of keys after the same barrier as a
// linearizable read, or an error reply.
func (n *Node) Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte) {
	if reply := n.linearize(ctx); reply != nil {
		return nil, reply
	}
	return n.fsm.WatchStamp(keys), nil
}

// linearize returns nil once a linearizable read may run, or the reply that
// refuses it. A leader confirms its leadership itself (steps 1-4); a
// follower asks the leader for a read index (raftset.readindex). Either
// then waits until its state machine has applied that index (step 5).
func (n *Node) linearize(ctx context.Context) []byte {
	var target uint64
	var reply []byte
	if n.raft.State() == raft.Leader {
		var ok bool
		if target, ok = n.soloReadIndex(); !ok {
			target, reply = n.readIndex(ctx)
		}
	} else {
		if n.isClosing() {
			return replyReadClosing
		}
		target, reply = n.sharedReadIndex(ctx)
		if reply != nil {
			return reply
		}
		// A follower far behind (or cut off from the leader) must not
		// hold the reader forever.
		wctx, cancel := context.WithTimeout(ctx, n.cfg.BarrierTimeout)
		defer cancel()
		if reply = n.waitApplied(wctx, target); reply != nil && ctx.Err() == nil && !n.isClosing() {
			return replyReadBehind
		}
		return reply
	}
	if reply != nil {
		return reply
	}
	return n.waitApplied(ctx, target)
}

// readIndex runs steps 1-4 on the leader, batched with concurrent readers;
// while a restore is being installed it waits for its end.
func (n *Node) readIndex(ctx context.Context) (uint64, []byte) {
	for {
		if n.raft.State() != raft.Leader {
			if n.isClosing() {
				return 0, replyReadClosing
			}
			return 0, notLeaderRead(n.Leader())
		}
		target, reply := n.rd.await(ctx, n.stopCh)
		if !bytes.Equal(reply, replyReadRestoring) {
			return target, reply
		}
		if err := n.rd.restore.wait(ctx, n.stopCh); err != nil {
			return 0, replyReadCanceled
		}
	}
}

// soloReadIndex runs steps 1-4 on the reader's own goroutine when this
// leader is the only voter of the latest configuration, and reports false
// (take the barrier goroutine's path) otherwise. For one voter Raft's
// VerifyLeader confirms without asking anyone (the quorum is the leader
// itself), so the round through the barrier goroutine and Raft's leader loop
// confirmed nothing that the checks here do not: leader in an unchanged
// term, whose barrier was applied, before and after the commit index is
// taken. A configuration with more voters, or whose one voter is another
// node (this leader is being removed), takes the batched path. That round
// trip (two goroutine wake-ups per pipelined batch) was ~9% of a one-node
// SISMEMBER load's CPU (docs/benchmarks.md).
func (n *Node) soloReadIndex() (uint64, bool) {
	gen := n.rd.restore.gen.Load()
	term := n.raft.CurrentTerm()
	if installing(gen) || n.rd.readyTerm.Load() != term || n.raft.State() != raft.Leader || !n.soleVoter() {
		return 0, false
	}
	commit := n.raft.CommitIndex()
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term || n.rd.restore.gen.Load() != gen {
		return 0, false
	}
	// Not counted in readBarriers: no round was run.
	return n.readTarget(commit), true
}

// soleVoter reports whether this node is the only voter of Raft's latest
// configuration (the one in effect, committed or not).
func (n *Node) soleVoter() bool {
	v := n.voters()
	return len(v) == 1 && string(v[0]) == n.cfg.NodeID
}

// voters lists the voters of Raft's latest configuration.
func (n *Node) voters() []raft.ServerID {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// waitApplied is step 5: wait until the state machine applied target.
func (n *Node) waitApplied(ctx context.Context, target uint64) []byte {
	if n.fsm.AppliedIndex() >= target {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.ctx, cancel)
	err := n.fsm.WaitApplied(wctx, target)
	stop()
	cancel()
	if err != nil {
		if n.isClosing() {
			return replyReadClosing
		}
		return replyReadCanceled
	}
	return nil
}

// runReadBarrier is the barrier goroutine.
func (n *Node) runReadBarrier() {
	defer n.wg.Done()
	// The follower's side of the batching runs beside it (counted here so
	// that startLoops keeps one list).
	n.wg.Add(1)
	go n.runFollowerReads()
	for {
		select {
		case <-n.rd.sig:
		case <-n.stopCh:
			return
		}
		g := n.rd.take()
		if g == nil {
			continue
		}
		g.target, g.err = n.confirm()
		close(g.done)
	}
}

var (
	errBarrier      = errors.New("leader barrier failed")
	errTermAdvanced = errors.New("the term moved on during the barrier")
)

// awaitTermApplied returns once this leader of term has applied every
// entry of earlier terms (a barrier, once per term): before that its state
// machine, and a clock that never saw an entry time, may lag the cluster.
func (n *Node) awaitTermApplied(term uint64) error {
	if n.rd.readyTerm.Load() == term {
		return nil
	}
	if err := n.raft.Barrier(n.cfg.BarrierTimeout).Error(); err != nil {
		n.log.Debug("leader barrier failed", "term", term, "error", err)
		return fmt.Errorf("%w: %w", errBarrier, err)
	}
	if n.raft.CurrentTerm() != term {
		return errTermAdvanced
	}
	n.rd.readyTerm.Store(term)
	n.log.Debug("leader ready for linearizable reads", "term", term)
	return nil
}

// confirm runs steps 1-4 for one group of readers.
func (n *Node) confirm() (uint64, []byte) {
	gen := n.rd.restore.gen.Load()
	if installing(gen) {
		return 0, replyReadRestoring
	}
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return 0, notLeaderRead(n.Leader())
	}
	switch err := n.awaitTermApplied(term); {
	case errors.Is(err, errBarrier):
		return 0, replyReadNotReady
	case err != nil:
		return 0, replyReadLostLeader
	}
	commit := n.raft.CommitIndex()
	n.st.readBarriers.Add(1)
	start := n.stall.now()
	var since int64
	if n.acks != nil {
		since = n.acks.now()
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, replyReadLostLeader
	}
	if !n.freshQuorum(since) {
		// VerifyLeader counted replies to requests sent before the
		// round began, and a quorum did not answer newer ones
		// (freshacks.go).
		n.acks.refused.Add(1)
		return 0, replyReadLostLeader
	}
	if !n.stall.trusted(start) {
		// Replies from before a stall may have confirmed the round
		// (stall.go): answer nothing from it.
		n.stall.refused.Add(1)
		return 0, replyReadLostLeader
	}
	if n.raft.CurrentTerm() != term {
		return 0, replyReadLostLeader
	}
	if n.rd.restore.gen.Load() != gen {
		return 0, replyReadRestoring // commit may be from before it
	}
	return n.readTarget(commit), nil
}

// readTarget returns the index of the last command entry at or before
// commit, or 0 when every such entry is already covered by a snapshot the
// state machine holds. Non-command entries (no-op, barrier, configuration)
// are rare, so this is one cached log lookup in the steady state.
func (n *Node) readTarget(commit uint64) uint64 {
	rd := &n.rd
	rd.memoMu.Lock()
	defer rd.memoMu.Unlock()
	if commit == rd.memoCommit {
		return rd.memoTarget
	}
	target := uint64(0)
	refreshed := false
	var l raft.Log
	for idx := commit; idx > rd.floor.Load(); idx-- {
		if err := n.logs.GetLog(idx, &l); err != nil {
			break // compacted: below it everything is in a snapshot
		}
		if l.Type == raft.LogCommand {
			target = idx
			break
		}
		if !refreshed {
			// A snapshot may have been installed since start; its index is
			// a floor too.
			refreshed = true
			if s, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil && s > rd.floor.Load() {
				rd.floor.Store(s)
			}
		}
	}
	rd.memoCommit, rd.memoTarget = commit, target
	return target
}

// ReadBatch runs consecutive pipelined read commands behind one barrier:
// every one of them arrived before it started, so one barrier makes all of
// them linearizable. It returns one reply per command.
func (n *Node) ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte {
	out := make([][]byte, len(cmds))
	n.rd.batches.Add(1)
	if !stale {
		if reply := n.linearize(ctx); reply != nil {
			fill(out, reply)
			return out
		}
		n.st.reads.Add(uint64(len(cmds)))
	}
	now := n.nowMs()
	if b, ok := n.fsm.(batchReader); ok {
		b.ReadBatch(cmds, now, randSource{}, out)
		return out
	}
	for i, args := range cmds {
		out[i] = n.fsm.Read(args, now, randSource{}, nil)
	}
	return out
}

// batchReader is a state machine that runs a run of reads under one lock
// (*fsm.FSM): per command, the lock round trip, the context and the reply's
// own allocation were about a quarter of ReadBatch's CPU (docs/benchmarks.md).
type batchReader interface {
	ReadBatch(cmds [][][]byte, nowMs int64, src setenc.Source, out [][]byte)
}
