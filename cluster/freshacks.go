package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// freshAcks makes the read path's leadership check (read.go, confirm)
// count only acknowledgements of requests sent after the check began.
//
// hashicorp/raft's VerifyLeader counts a follower's successful reply to a
// heartbeat or an AppendEntries for every verification waiting when the
// reply is processed (v1.7.3, followerReplication.notifyAll), including
// verifications that began after the request was sent. Such a reply says
// the follower followed this leader when it answered, before the read
// arrived: another leader may have been elected and have committed writes
// since (docs/jepsen.md, Findings, a leader resumed from SIGSTOP). The Raft
// port's transport records, per peer, when it sent the latest request the
// peer answered with success; a round is confirmed once a quorum of voters
// (this node counting for itself) answered requests sent no earlier than
// the round's start. VerifyLeader itself makes the heartbeats go out at
// once, so in the usual case their replies have been recorded before it
// returns and nothing waits; after a stale confirmation the check waits
// for those heartbeats' replies, up to freshAckWait, and refuses the round
// if a quorum does not answer.
type freshAcks struct {
	origin time.Time

	mu      sync.Mutex
	sent    map[raft.ServerID]int64 // ns since origin
	waiters int
	changed chan struct{} // closed and replaced on a record while waiters > 0

	// refused counts the read rounds refused for want of fresh
	// acknowledgements (INFO raft_read_stale_ack_refusals).
	refused atomic.Uint64
}

func newFreshAcks() *freshAcks {
	return &freshAcks{origin: time.Now(), sent: map[raft.ServerID]int64{}, changed: make(chan struct{})}
}

func (a *freshAcks) now() int64 { return int64(time.Since(a.origin)) }

// record notes that id answered with success a request sent at sent.
func (a *freshAcks) record(id raft.ServerID, sent int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sent <= a.sent[id] {
		return
	}
	a.sent[id] = sent
	if a.waiters > 0 {
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// quorum reports whether a quorum of voters answered requests sent at or
// after since, self counting as an answer.
func (a *freshAcks) quorumLocked(since int64, voters []raft.ServerID, self raft.ServerID) bool {
	acks := 0
	for _, v := range voters {
		if v == self || a.sent[v] >= since {
			acks++
		}
	}
	return acks > len(voters)/2
}

// wait returns once a quorum of voters answered requests sent at or after
// since (true), or after timeout or when stop closes (false).
func (a *freshAcks) wait(since int64, voters []raft.ServerID, self raft.ServerID, timeout time.Duration, stop <-chan struct{}) bool {
	a.mu.Lock()
	if a.quorumLocked(since, voters, self) {
		a.mu.Unlock()
		return true
	}
	a.waiters++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.waiters--
		a.mu.Unlock()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		a.mu.Lock()
		if a.quorumLocked(since, voters, self) {
			a.mu.Unlock()
			return true
		}
		ch := a.changed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-stop:
			return false
		}
	}
}

// freshAckWait bounds the wait for fresh acknowledgements: a heartbeat's
// round trip, with room for a loaded machine. A quorum that does not answer
// within it is treated as lost (the readers retry).
const freshAckWait = 500 * time.Millisecond

// freshQuorum is step 3's second half (read.go): true once a quorum
// acknowledged requests sent at or after since. Without the Raft port's
// transport (in-memory tests) there are no records, and VerifyLeader alone
// decides.
func (n *Node) freshQuorum(since int64) bool {
	if n.acks == nil {
		return true
	}
	return n.acks.wait(since, n.voters(), raft.ServerID(n.cfg.NodeID), freshAckWait, n.stopCh)
}

// staleAckRefusals is INFO raft_read_stale_ack_refusals.
func (n *Node) staleAckRefusals() uint64 {
	if n.acks == nil {
		return 0
	}
	return n.acks.refused.Load()
}
