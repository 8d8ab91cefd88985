package cluster

import (
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Active expiry (as Redis's active expire cycle). Only the leader
// deletes expired keys, and only through the log: ten times a second it asks
// the state machine for a sample of expired keys and proposes
// "raftset.expire key..." through the proposer; every replica removes a
// proposed key only if it is still expired at that entry's time. Like
// Redis's cycle, it repeats while more than a tenth of a sample was expired,
// within a time budget. Followers never delete on their own.
//
// Redis deletes as it samples, a few microseconds a key; each of our rounds
// waits for its entry to commit (a disk sync), so rounds of Redis's 20 keys
// drained 200,000 keys with 1-second TTLs in 24 s where Redis took 2. A
// round that finds as many expired keys as it asked for asks for four times
// more in the next, up to expireMaxBatch keys in one op. The op rides in
// the proposer's group-commit entries with client writes rather than in
// entries of its own; while clients are waiting for the proposer the batch
// stays under expireBusyBatch, so an entry's apply (and the replies behind
// it) is not held up by a long run of deletions, and the time budget keeps
// expiry to a quarter of the leader's wall time, as Redis's slow cycle.

const (
	expirePeriod    = 100 * time.Millisecond // Redis's hz 10
	expireSample    = 20                     // keys per first sample (ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP)
	expireMaxBatch  = 8192                   // keys per op at most
	expireBusyBatch = 1024                   // ... while client writes are queued
	expireBudget    = 25 * time.Millisecond  // 25% of a period, like Redis's slow cycle
	// expireOp is the internal command the state machine applies.
	expireOp = "raftset.expire"
)

func (n *Node) runExpiry() {
	defer n.wg.Done()
	t := time.NewTicker(expirePeriod)
	defer t.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if n.activeExpire.Load() && n.raft.State() == raft.Leader {
			n.expireCycle()
		}
	}
}

// expireCycle proposes the removal of sampled expired keys until a sample
// is mostly live, the budget is spent, or leadership is lost.
func (n *Node) expireCycle() {
	deadline := time.Now().Add(expireBudget)
	batch := expireSample
	for !n.isClosing() {
		if n.w.queued() > 0 {
			batch = min(batch, expireBusyBatch)
		}
		keys := n.fsm.ExpiredKeys(n.nowMs(), batch)
		if len(keys) == 0 {
			return
		}
		args := make([][]byte, 0, len(keys)+1)
		args = append(args, []byte(expireOp))
		args = append(args, keys...)
		replies := n.w.submit(n.ctx, []command.Op{command.Cmd(args...)}, true)
		if command.IsError(replies[0]) {
			n.log.Debug("active expiry proposal failed", "keys", len(keys), "reply", string(replies[0]))
			return
		}
		n.st.expired.Add(uint64(len(keys)))
		if len(keys)*10 <= batch || time.Now().After(deadline) || n.raft.State() != raft.Leader {
			return
		}
		if len(keys) == batch {
			batch = min(batch*4, expireMaxBatch)
		}
	}
}
