package cluster

// Automatic leader spreading (docs/sharding.md, Placement): the metadata
// leader's process runs BALANCE-LEADERS' own code by itself, one transfer
// at a time, once the leaderships have settled. Elections put leaders
// wherever a node happened to time out first, and a node that comes back
// after a crash leads nothing until leaderships move to it; without this,
// an operator must notice and run RAFT.SHARD BALANCE-LEADERS, as Redis
// Cluster's CLUSTER FAILOVER is run by hand. TiKV's PD and CockroachDB
// spread leaders (leases) by themselves in the same way.
//
// Settled means: the map's epoch and every shard's leader and term read
// the same for a whole interval, with no slot move in the map. A transfer
// an operator made (RAFT.TRANSFER) changes a term, so it restarts the
// wait: the balancer never undoes it sooner than one interval later. A
// plan that moves nothing is a no-op. A member whose process does not
// answer that it follows the shard's leader is no candidate (a node that
// is down is planned around, not tried); a transfer that fails all the
// same (the target cannot catch up, a partition) is retried after a
// backoff of 2, then 4 intervals, so a shard that cannot move is not
// hammered.

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// leaderBalance is the automatic balancer's setting and what it did.
type leaderBalance struct {
	interval  atomic.Int64 // time.Duration; 0: off
	transfers atomic.Uint64
	failures  atomic.Uint64
}

const (
	// balanceMaxBackoff bounds the backoff after failed transfers, as a
	// power of two of the interval (2, then 4 intervals).
	balanceMaxBackoff = 2
	// balanceStepTimeout bounds one automatic step: the leaders asked
	// again, then one transfer and its confirmation (transferWait).
	balanceStepTimeout = time.Minute
)

// SetLeaderBalanceInterval changes Config.LeaderBalanceInterval at run
// time (CONFIG SET cluster-leader-balance-interval); 0 turns it off.
func (h *Host) SetLeaderBalanceInterval(d time.Duration) { h.bal.interval.Store(int64(max(d, 0))) }

// LeaderBalanceInterval is the setting in force.
func (h *Host) LeaderBalanceInterval() time.Duration { return time.Duration(h.bal.interval.Load()) }

// balancePoll is how often the balancer looks at the leaders: often enough
// that a change between two looks is seen (a term moves), rarely enough
// that a cluster of many shards is not asked for its leaders constantly.
func balancePoll(every time.Duration) time.Duration {
	if every <= 0 {
		return time.Second // off: only notice being turned on
	}
	return min(max(every/4, 100*time.Millisecond), 2*time.Second)
}

// runLeaderBalance is the balancer's loop, on every process; it acts only
// while this process's metadata voter leads.
func (h *Host) runLeaderBalance() {
	defer h.wg.Done()
	var (
		sig     string    // what was last seen (leaderSignature)
		since   time.Time // since when sig holds, or the last step
		fails   int       // failed steps in a row
		retryAt time.Time // no step before this after a failure
	)
	for {
		every := h.LeaderBalanceInterval()
		select {
		case <-h.stop:
			return
		case <-time.After(balancePoll(every)):
		}
		every = h.LeaderBalanceInterval()
		if m := h.meta.Load(); every <= 0 || m == nil || !m.IsLeader() {
			// A process that becomes the metadata leader waits a whole
			// interval of its own before it moves anything.
			sig, fails, retryAt = "", 0, time.Time{}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), balancePoll(every)+time.Second)
		now, ok := h.leaderSignature(ctx)
		cancel()
		if !ok || now != sig {
			sig, since = now, time.Now()
			continue
		}
		if time.Since(since) < every || time.Now().Before(retryAt) {
			continue
		}
		moved, busy, err := h.balanceStep()
		// Whatever happened, a full settled interval before the next step.
		since = time.Now()
		switch {
		case busy:
		case err != nil:
			fails++
			h.bal.failures.Add(1)
			backoff := every << min(fails, balanceMaxBackoff)
			retryAt = time.Now().Add(backoff)
			h.log.Warn("leader balance: a transfer failed; backing off", "error", err, "retry-in", backoff)
		default:
			fails, retryAt = 0, time.Time{}
			if moved != "" {
				h.bal.transfers.Add(1)
				h.log.Info("leader balance: moved a leadership", "move", moved, "after-settled", every)
			}
		}
	}
}

// leaderSignature is the map's epoch and every shard's leader and term as
// the replica here (else the first member that answers) knows them; false
// while slots move or some shard names no leader.
func (h *Host) leaderSignature(ctx context.Context) (string, bool) {
	m := h.Map()
	if m.Epoch == 0 || len(m.Moves) > 0 {
		return "", false
	}
	var b strings.Builder
	b.WriteString(strconv.FormatUint(m.Epoch, 10))
	for _, sh := range m.Shards {
		l, ok := parseLeaderReply(h.shardCall(ctx, sh.ID, [][]byte{[]byte(cmdLeader)}))
		if !ok || l.id == "" {
			return "", false
		}
		b.WriteString(" " + strconv.FormatUint(uint64(sh.ID), 10) + "=" + l.id + "@" + l.term)
	}
	return b.String(), true
}

// balanceStep runs BALANCE-LEADERS' driver for at most one transfer; busy
// (nothing done) while a slot move, replica change, shard addition or an
// operator's BALANCE-LEADERS runs on this process. It holds moveMu through
// the transfer, so those wait for it rather than start under it.
func (h *Host) balanceStep() (moved string, busy bool, err error) {
	if !h.moveMu.TryLock() {
		return "", true, nil
	}
	defer h.moveMu.Unlock()
	if !h.balanceMu.TryLock() {
		return "", true, nil
	}
	defer h.balanceMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), balanceStepTimeout)
	defer cancel()
	moves, err := h.driveBalance(ctx, false, 1)
	if len(moves) > 0 {
		moved = moves[0]
	}
	return moved, false, err
}

// leaderBalanceInfo is INFO cluster's account of the balancer on this
// process (only the metadata leader's acts, so a cluster's total is the sum
// over the metadata voters).
func (h *Host) leaderBalanceInfo() InfoSection {
	return InfoSection{Name: "Cluster", Fields: [][2]string{
		{"cluster_leader_balance_interval_ms", strconv.FormatInt(h.LeaderBalanceInterval().Milliseconds(), 10)},
		{"cluster_leader_balance_transfers", strconv.FormatUint(h.bal.transfers.Load(), 10)},
		{"cluster_leader_balance_failures", strconv.FormatUint(h.bal.failures.Load(), 10)},
	}}
}
