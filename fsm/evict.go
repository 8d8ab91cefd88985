package fsm

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"raftset/internal/command"
)

// maxmemory (docs/cache.md, invariants §8). The setting is replicated state:
// "config set maxmemory ..." entries change it on every replica at the same
// index, and snapshots carry it (AuxMaxmemory). Eviction is the leader's
// decision: it compares its accounted memory (access.go) with the bound,
// picks keys with EvictionCandidates from its own access statistics, and
// proposes "raftset.evict key version ..."; every replica deletes a proposed
// key only if its version (the index of its last change) is still the one
// the leader saw, so a key rewritten after it was picked stays.

// CmdEvict is "raftset.evict key version [key version ...]".
const CmdEvict = "raftset.evict"

// AuxMaxmemory carries the EvictConfig: "maxmemory policy samples tenacity".
const AuxMaxmemory = "raftset-maxmemory"

// Policy is a maxmemory-policy.
type Policy uint8

// The policies, as Redis names them.
const (
	NoEviction Policy = iota
	AllKeysLRU
	AllKeysLFU
	AllKeysRandom
	VolatileLRU
	VolatileLFU
	VolatileRandom
	VolatileTTL
)

var policyNames = [...]string{"noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
	"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}

func (p Policy) String() string { return policyNames[p] }

func (p Policy) lfu() bool      { return p == AllKeysLFU || p == VolatileLFU }
func (p Policy) lru() bool      { return p == AllKeysLRU || p == VolatileLRU }
func (p Policy) volatile() bool { return p >= VolatileLRU }

// ParsePolicy reads a policy name, in any case.
func ParsePolicy(s string) (Policy, bool) {
	for i, n := range policyNames {
		if strings.EqualFold(s, n) {
			return Policy(i), true
		}
	}
	return 0, false
}

// errPolicy is Redis's message for an unknown policy.
const errPolicy = "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, " +
	"volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"

// EvictConfig is the replicated maxmemory configuration.
type EvictConfig struct {
	MaxMemory int64 // bytes; 0: no bound
	Policy    Policy
	Samples   int // keys sampled per eviction (maxmemory-samples)
	Tenacity  int // maxmemory-eviction-tenacity: accepted; see cluster/evict.go
}

// DefaultEvictConfig is Redis's default: no bound, noeviction, 5 samples.
func DefaultEvictConfig() EvictConfig {
	return EvictConfig{Policy: NoEviction, Samples: 5, Tenacity: 10}
}

// ParseMemory reads a memory value as Redis's memtoull does: digits and an
// optional unit b, k, kb, m, mb, g or gb in any case (k = 1000, kb = 1024).
func ParseMemory(s string) (int64, bool) {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false
	}
	mul := int64(1)
	switch strings.ToLower(s[i:]) {
	case "", "b":
	case "k":
		mul = 1000
	case "kb":
		mul = 1024
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1024 * 1024
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1024 * 1024 * 1024
	default:
		return 0, false
	}
	v, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || v > (1<<63-1)/mul {
		return 0, false
	}
	return v * mul, true
}

// setParam sets one maxmemory parameter from a CONFIG SET value. It
// reports whether name is one, and an error message (after Redis's "CONFIG
// SET failed ... - ") for a bad value.
func (e *EvictConfig) setParam(name, v string) (bool, string) {
	switch strings.ToLower(name) {
	case "maxmemory":
		m, ok := ParseMemory(v)
		if !ok {
			return true, "argument must be a memory value"
		}
		e.MaxMemory = m
	case "maxmemory-policy":
		p, ok := ParsePolicy(v)
		if !ok {
			return true, errPolicy
		}
		e.Policy = p
	case "maxmemory-samples", "maxmemory-eviction-tenacity":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return true, "argument couldn't be parsed into an integer"
		}
		if name == "maxmemory-samples" {
			if n < 1 || n > 1<<31-1 {
				return true, "argument must be between 1 and 2147483647 inclusive"
			}
			e.Samples = int(n)
		} else {
			if n < 0 || n > 100 {
				return true, "argument must be between 0 and 100 inclusive"
			}
			e.Tenacity = int(n)
		}
	default:
		return false, ""
	}
	return true, ""
}

// CheckEvictParam checks a CONFIG SET of a maxmemory parameter without
// applying it: ok is false when name is not one.
func CheckEvictParam(name, v string) (ok bool, msg string) {
	e := DefaultEvictConfig()
	return e.setParam(name, v)
}

func (e EvictConfig) aux() string {
	return strconv.FormatInt(e.MaxMemory, 10) + " " + e.Policy.String() + " " +
		strconv.Itoa(e.Samples) + " " + strconv.Itoa(e.Tenacity)
}

func parseEvictAux(s string) (EvictConfig, bool) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return EvictConfig{}, false
	}
	e := DefaultEvictConfig()
	for i, name := range []string{"maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity"} {
		if _, msg := e.setParam(name, f[i]); msg != "" {
			return EvictConfig{}, false
		}
	}
	return e, true
}

// memoryState is what the leader checks before proposing each write,
// published after every applied entry so that the check takes no lock (the
// proposer must not wait behind Apply).
type memoryState struct {
	used atomic.Int64
	cfg  atomic.Pointer[EvictConfig]
}

// publishMemory publishes the keyspace's accounted total and maxmemory
// settings; f.mu is held.
func (f *FSM) publishMemory() {
	ks := f.ks
	f.mem.used.Store(ks.acct.total)
	if c := f.mem.cfg.Load(); c == nil || *c != ks.evict {
		e := ks.evict
		f.mem.cfg.Store(&e)
	}
}

// EvictConfig returns the replicated maxmemory configuration as of the last
// applied entry. It takes no lock.
func (f *FSM) EvictConfig() EvictConfig {
	if c := f.mem.cfg.Load(); c != nil {
		return *c
	}
	return DefaultEvictConfig()
}

// UsedMemory is the accounted size of the dataset (access.go) as of the
// last applied entry: the measure maxmemory bounds. It takes no lock.
func (f *FSM) UsedMemory() int64 { return f.mem.used.Load() }

// AvgTTL estimates the average remaining time to live, in ms, of the keys
// with a deadline, from up to 100 of them spread over the deadline index
// (INFO keyspace's avg_ttl; Redis estimates it from its expiry samples).
func (f *FSM) AvgTTL(nowMs int64) int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	n := ks.vol.Len()
	if n == 0 {
		return 0
	}
	now := max(nowMs, ks.now)
	step := max(n/100, 1)
	var sum, cnt int64
	for i := 0; i < n; i += step {
		if pos := ks.find(ks.vol.At(i)); pos >= 0 {
			if e := ks.exp(pos); e > now {
				sum += e - now
			}
			cnt++
		}
	}
	if cnt == 0 {
		return 0
	}
	return sum / cnt
}

// Counters are the node's key statistics for INFO stats.
type Counters struct {
	Hits, Misses, Expired, Evicted uint64
	StalePerc                      float64
}

// Counters returns the node's key statistics.
func (f *FSM) Counters() Counters {
	c := &f.counters
	return Counters{Hits: c.hits.Load(), Misses: c.misses.Load(), Expired: c.expired.Load(),
		Evicted: c.evicted.Load(), StalePerc: math.Float64frombits(c.stale.Load())}
}

// Victim is a key EvictionCandidates picked: its name, its version (the
// WATCH stamp raftset.evict checks) and its accounted bytes.
type Victim struct {
	Key   []byte
	Ver   uint64
	Bytes int64
}

// evictPoolSize is Redis's EVPOOL_SIZE: the best candidates kept across
// samples.
const evictPoolSize = 16

type poolEntry struct {
	pos   int
	score uint64 // higher goes first
}

// EvictionCandidates picks keys to evict under the current policy, as
// Redis's performEvictions does: for each key it samples maxmemory-samples
// keys (all keys, or those with a deadline under volatile-*), merges them
// into a pool of the 16 best candidates, and takes the best (the longest
// idle for LRU, the least frequent for LFU, the soonest deadline for
// volatile-ttl; random policies take one random key). It stops once the
// picked keys account for want bytes or max keys were picked, or when no
// key is eligible (volatile-* with no deadline left): then it returns what
// it has, possibly nothing. src is the leader's own randomness: the choice
// is not replicated, only its outcome.
func (f *FSM) EvictionCandidates(want int64, max int, nowMs int64, src rand.Source) []Victim {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	pol := ks.evict.Policy
	if pol == NoEviction || want <= 0 || max <= 0 {
		return nil
	}
	now := nowMs
	if ks.now > now {
		now = ks.now
	}
	rng := rand.New(src)
	picked := make(map[int]bool)
	var out []Victim
	var got int64
	pool := make([]poolEntry, 0, evictPoolSize)
	samples := ks.evict.Samples
	// sample returns a random eligible position, or -1.
	sample := func() int {
		p := -1
		switch {
		case pol.volatile():
			if n := ks.vol.Len(); n > 0 {
				p = ks.find(ks.vol.At(rng.IntN(n)))
			}
		case ks.n > 0:
			p = rng.IntN(ks.n)
		}
		if p >= 0 && ks.slotHeld(ks.keys.At(p)) {
			return -1 // its slot is migrating: the eviction would be skipped
		}
		return p
	}
	eligible := ks.n
	if pol.volatile() {
		eligible = ks.vol.Len()
	}
	// Sampling stops finding new keys as picked approaches eligible: the
	// attempts are bounded so that a nearly exhausted keyspace ends the call.
	attempts := 4*max + 64
	for got < want && len(out) < max && len(picked) < eligible && attempts > 0 {
		attempts--
		best := -1
		switch pol {
		case AllKeysRandom, VolatileRandom:
			for range 2 * samples {
				if p := sample(); p >= 0 && !picked[p] {
					best = p
					break
				}
			}
		default:
			for range samples {
				p := sample()
				if p < 0 || picked[p] || inPool(pool, p) {
					continue
				}
				pool = poolInsert(pool, poolEntry{p, ks.evictScore(p, pol, now)})
			}
			if len(pool) > 0 {
				best = pool[len(pool)-1].pos
				pool = pool[:len(pool)-1]
			}
		}
		if best < 0 {
			continue
		}
		picked[best] = true
		b := int64(ks.acct.sz[best])
		out = append(out, Victim{Key: bytes.Clone(ks.keys.At(best)), Ver: ks.ver(best), Bytes: b})
		got += b
	}
	return out
}

// evictScore orders candidates: a higher score is evicted first.
func (ks *keyspace) evictScore(pos int, pol Policy, now int64) uint64 {
	v := ks.acct.stat(pos)
	switch {
	case pol.lfu():
		return 255 - uint64(lfuDecr(v, now))
	case pol == VolatileTTL:
		return ^uint64(ks.exp(pos))
	default:
		return uint64(idleMs(v, now))
	}
}

func inPool(pool []poolEntry, pos int) bool {
	for _, e := range pool {
		if e.pos == pos {
			return true
		}
	}
	return false
}

// poolInsert keeps pool sorted by ascending score and at most
// evictPoolSize long, dropping the lowest.
func poolInsert(pool []poolEntry, e poolEntry) []poolEntry {
	i := 0
	for i < len(pool) && pool[i].score < e.score {
		i++
	}
	if len(pool) == evictPoolSize {
		if i == 0 {
			return pool
		}
		copy(pool[:i-1], pool[1:i])
		pool[i-1] = e
		return pool
	}
	pool = append(pool, poolEntry{})
	copy(pool[i+1:], pool[i:])
	pool[i] = e
	return pool
}

// cmdRaftsetEvict applies the leader's evictions: each key goes if it is
// still at the version the leader picked.
func cmdRaftsetEvict(c *execCtx, args [][]byte) {
	if len(args)%2 != 1 {
		c.err(command.ErrArity(CmdEvict))
		return
	}
	n := 0
	for i := 1; i < len(args); i += 2 {
		ver, err := strconv.ParseUint(string(args[i+1]), 10, 64)
		if err != nil {
			continue
		}
		if pos := c.ks.find(args[i]); pos >= 0 && c.ks.ver(pos) == ver && !c.ks.slotHeld(args[i]) {
			c.deleteAt(pos)
			n++
		}
	}
	c.f.counters.evicted.Add(uint64(n))
	c.int(int64(n))
}

// EvictArgs builds the raftset.evict command for victims.
func EvictArgs(victims []Victim) [][]byte {
	args := make([][]byte, 0, 1+2*len(victims))
	args = append(args, []byte(CmdEvict))
	for _, v := range victims {
		args = append(args, v.Key, strconv.AppendUint(nil, v.Ver, 10))
	}
	return args
}
