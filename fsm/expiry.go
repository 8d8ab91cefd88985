package fsm

import (
	"bytes"
	"math"
)

// MaxExpiredKeys caps one ExpiredKeys call, and so one "raftset.expire"
// proposal built from it: the op is applied under the state machine's lock
// in one entry, so a caller asking for a million keys (a bug, or a batch
// grown without a ceiling) would hold every reply behind that entry for as
// long as a million deletions take, and make an entry of tens of megabytes.
// 16384 keys apply in a few milliseconds.
const MaxExpiredKeys = 16384

// ExpiredKeys samples up to limit keys whose deadline is at or before
// max(nowMs, the state's clock), for the leader to propose as
// "raftset.expire". It walks the index of keys with a deadline from where
// the previous call stopped, examining at most 20 keys per key wanted (as
// Redis's cycle samples), so a call costs little even when few keys are
// due. It changes no replicated state. limit is capped at MaxExpiredKeys.
func (f *FSM) ExpiredKeys(nowMs int64, limit int) [][]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	n := ks.vol.Len()
	if n == 0 || limit <= 0 {
		return nil
	}
	limit = min(limit, MaxExpiredKeys)
	now := max(nowMs, ks.now)
	budget := min(n, limit*20)
	cursor := ks.volCursor.Load()
	var out [][]byte
	seen := 0
	for budget > 0 && len(out) < limit {
		step := min(budget, 16)
		budget -= step
		cursor = ks.vol.Scan(cursor, step, func(k []byte) {
			if len(out) >= limit {
				return
			}
			seen++
			if pos := ks.find(k); pos >= 0 && ks.expiredAt(pos, now) && !ks.slotHeld(k) {
				out = append(out, bytes.Clone(k))
			}
		})
	}
	ks.volCursor.Store(cursor)
	f.counters.noteStale(len(out), seen)
	return out
}

// noteStale folds one sample of active expiry into expired_stale_perc, as
// Redis's cycle does (5% weight to the newest sample).
func (c *counters) noteStale(expired, sampled int) {
	if sampled == 0 {
		return
	}
	cur := float64(expired) * 100 / float64(sampled)
	old := math.Float64frombits(c.stale.Load())
	c.stale.Store(math.Float64bits(cur*0.05 + old*0.95))
}
