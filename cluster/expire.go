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
//
// That budget is wall time, and most of a round is spent waiting for the
// disk, not computing: with the batch climbing from 20 again in every cycle
// and each cycle stopped after 25 ms, 1,000,000 keys with 1-second TTLs
// took 19-65 s to drain where Redis took 1.4 s (docs/benchmarks.md,
// "Strings and expiry"). So the batch size carries over from one cycle to
// the next while samples stay mostly expired, and the 25 ms budget binds
// only while client writes wait for the proposer; with none waiting, a
// cycle goes on until a sample is mostly live (expireIdleBudget is a
// backstop). Reads still get the state machine's lock between entries;
// what they wait for is one entry's deletions (at most expireMaxBatch).

const (
	expirePeriod    = 100 * time.Millisecond // Redis's hz 10
	expireSample    = 20                     // keys per first sample (ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP)
	expireMaxBatch  = 8192                   // keys per op at most
	expireBusyBatch = 1024                   // ... while client writes are queued
	expireBudget    = 25 * time.Millisecond  // 25% of a period, like Redis's slow cycle
	// expireIdleBudget bounds a cycle while no client write is waiting.
	expireIdleBudget = time.Second
	// expireOp is the internal command the state machine applies.
	expireOp = "raftset.expire"
)

func (n *Node) runExpiry() {
	defer n.wg.Done()
	t := time.NewTicker(expirePeriod)
	defer t.Stop()
	batch := expireSample
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if n.activeExpire.Load() && n.raft.State() == raft.Leader {
			batch = n.expireCycle(batch)
		} else {
			batch = expireSample
		}
	}
}

// expireCycle proposes the removal of sampled expired keys, starting with
// batches of batch keys, until a sample is mostly live, the budget is
// spent, or leadership is lost. It returns the batch size the next cycle
// starts with: the one reached, unless the cycle ended on a mostly live
// sample or a failure.
func (n *Node) expireCycle(batch int) int {
	start := time.Now()
	for !n.isClosing() {
		if n.w.queued() > 0 {
			batch = min(batch, expireBusyBatch)
		}
		keys := n.fsm.ExpiredKeys(n.nowMs(), batch)
		if len(keys) == 0 {
			return expireSample
		}
		args := make([][]byte, 0, len(keys)+1)
		args = append(args, []byte(expireOp))
		args = append(args, keys...)
		replies := n.w.submit(n.ctx, []command.Op{command.Cmd(args...)}, true)
		if command.IsError(replies[0]) {
			n.log.Debug("active expiry proposal failed", "keys", len(keys), "reply", string(replies[0]))
			return expireSample
		}
		n.st.expired.Add(uint64(len(keys)))
		if len(keys)*10 <= batch {
			return expireSample
		}
		if len(keys) == batch {
			batch = min(batch*4, expireMaxBatch)
		}
		budget := expireIdleBudget
		if n.w.queued() > 0 {
			budget = expireBudget
		}
		if time.Since(start) > budget || n.raft.State() != raft.Leader {
			return batch
		}
	}
	return expireSample
}
