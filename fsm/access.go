package fsm

import (
	"sync/atomic"

	"raftset/internal/alloc"
	"raftset/internal/setenc"
)

// Per-key memory accounting and access statistics, for maxmemory
// (evict.go). Both live in arrays parallel to the keyspace's dense
// positions, beside the chunks rather than in them: they are not replicated
// state (no snapshot carries them, no digest covers them), and keeping them
// apart leaves the chunk layout to the keyspace.
//
// The accounting is a function of the data only (key and value lengths,
// encodings), never of where the bytes live, so two replicas at the same
// index account the same total: the leader's measure is every replica's.
// It is kept up to date incrementally: the keyspace reports every position
// it writes (mark, from cellW) and every add and removal, and flush, at the
// end of each applied entry, re-measures the positions written.
//
// The access statistic is Redis's 24-bit lru field, interpreted by the
// current policy as Redis does: under an LFU policy the minutes of the last
// decrement (16 bits) and a logarithmic counter (8 bits), otherwise the
// cluster clock in seconds at the last access. Reads and writes on a node
// update it there; followers' own reads (READONLY) update only the
// follower's, which no eviction decision reads.
type accounting struct {
	sz    []uint32 // accounted bytes of the key at each position, as of the last flush
	acc   []uint32 // access statistic per position; atomic (reads update it under the read lock)
	dirty []int    // positions written since the last flush
	total int64    // sum of sz

	rnd atomic.Uint64 // LFU's probabilistic increment (node-local: decides nothing replicated)
}

// counters are the node's INFO stats about keys: keyspace_hits and
// keyspace_misses (lookups by reads, here or in a transaction), expired_keys
// and evicted_keys (deletions applied here, so every replica counts the
// same), and expired_stale_perc (from active expiry's samples). They outlive
// a restore, as Redis's outlive a full sync.
type counters struct {
	hits, misses, expired, evicted atomic.Uint64
	stale                          atomic.Uint64 // expired_stale_perc as float64 bits: a running average
}

// keyOverhead is what a key costs besides its own bytes and its value's:
// the Table's dense offset, index slot and tag (about 12 bytes), the
// arena's length prefix and growth slack, the chunk cells (value 16, kind 1,
// deadline 8, version 8) and the two accounting arrays (8).
const keyOverhead = 64

// Redis's LFU parameters (lfu-log-factor, lfu-decay-time) at their defaults.
const (
	lfuInitVal   = 5
	lfuLogFactor = 10
	lfuDecayMin  = 1
)

func (a *accounting) add(pos int, init uint32) {
	a.sz = append(a.sz, 0)
	a.acc = append(a.acc, init)
	a.dirty = append(a.dirty, pos)
}

// remove mirrors keyspace.remove: the last position moves into pos.
func (a *accounting) remove(pos, last int) {
	a.total -= int64(a.sz[pos])
	if pos != last {
		a.sz[pos], a.acc[pos] = a.sz[last], a.acc[last]
		a.dirty = append(a.dirty, pos)
	}
	a.sz, a.acc = a.sz[:last], a.acc[:last]
}

func (a *accounting) mark(pos int) { a.dirty = append(a.dirty, pos) }

func (a *accounting) reset() {
	a.sz, a.acc, a.dirty, a.total = nil, nil, nil, 0
}

// flush re-measures the positions written since the last flush.
func (a *accounting) flush(ks *keyspace) {
	for _, p := range a.dirty {
		if p >= ks.n {
			continue
		}
		s := uint32(min(ks.keyBytes(p), 1<<32-1))
		a.total += int64(s) - int64(a.sz[p])
		a.sz[p] = s
	}
	a.dirty = a.dirty[:0]
}

// keyBytes is the accounted size of the key at pos: its bytes, its value's
// allocation (strings and compact sets rounded up to the allocator's size
// class, from their length, not their capacity, which the defragmenter
// changes), a copy of the key in the deadline index if it has a deadline,
// and keyOverhead.
func (ks *keyspace) keyBytes(pos int) int64 {
	k := ks.keys.At(pos)
	n := int64(keyOverhead + len(k))
	if ks.exp(pos) != noExpiry {
		n += int64(len(k)) + 16
	}
	if !ks.isSet(pos) {
		return n + int64(alloc.RoundUp(len(ks.str(pos))))
	}
	s := ks.set(pos)
	if s.Encoding() == setenc.Hashtable {
		return n + int64(s.MemoryUsage())
	}
	return n + int64(alloc.RoundUp(len(s.Blob())))
}

// initAccess is a new key's statistic: accessed now, and under LFU with
// Redis's initial counter, so that new keys are not evicted first.
func initAccess(nowMs int64, lfu bool) uint32 {
	if lfu {
		return lfuMinutes(nowMs)<<8 | lfuInitVal
	}
	return lruSeconds(nowMs)
}

func lruSeconds(nowMs int64) uint32 { return uint32(max(nowMs, 0) / 1000) }
func lfuMinutes(nowMs int64) uint32 { return uint32(max(nowMs, 0)/60000) & 0xffff }

// touch records an access to the key at pos at nowMs.
func (a *accounting) touch(pos int, nowMs int64, lfu bool) {
	if pos >= len(a.acc) {
		return
	}
	p := &a.acc[pos]
	if !lfu {
		atomic.StoreUint32(p, lruSeconds(nowMs))
		return
	}
	ctr := lfuDecr(atomic.LoadUint32(p), nowMs)
	if ctr < 255 {
		base := float64(max(int(ctr)-lfuInitVal, 0))
		r := float64(mix64(a.rnd.Add(0x9e3779b97f4a7c15))>>11) / (1 << 53)
		if r < 1/(base*lfuLogFactor+1) {
			ctr++
		}
	}
	atomic.StoreUint32(p, lfuMinutes(nowMs)<<8|ctr)
}

// lfuDecr is Redis's LFUDecrAndReturn: the counter less one per decay
// period elapsed since its last decrement.
func lfuDecr(v uint32, nowMs int64) uint32 {
	ldt, ctr := v>>8&0xffff, v&0xff
	now := lfuMinutes(nowMs)
	elapsed := now - ldt
	if now < ldt {
		elapsed = 65535 - ldt + now
	}
	periods := elapsed / lfuDecayMin
	if periods >= ctr {
		return 0
	}
	return ctr - periods
}

// idleMs is Redis's estimateObjectIdleTime: milliseconds since the last
// access, at one-second resolution.
func idleMs(v uint32, nowMs int64) int64 {
	return max(int64(lruSeconds(nowMs))-int64(v), 0) * 1000
}

func (a *accounting) stat(pos int) uint32 {
	if pos >= len(a.acc) {
		return 0
	}
	return atomic.LoadUint32(&a.acc[pos])
}

// resetAccess gives every key the statistic of a new key (after a restore:
// the file carries none).
func (a *accounting) resetAccess(nowMs int64, lfu bool) {
	v := initAccess(nowMs, lfu)
	for i := range a.acc {
		a.acc[i] = v
	}
}

func mix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
