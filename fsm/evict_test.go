package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// checkAccounting re-measures every key and compares with the incremental
// accounting (access.go).
func checkAccounting(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	if len(ks.acct.sz) != ks.n || len(ks.acct.acc) != ks.n {
		t.Fatalf("accounting arrays hold %d and %d positions, the keyspace %d keys", len(ks.acct.sz), len(ks.acct.acc), ks.n)
	}
	var total int64
	for p := range ks.n {
		want := ks.keyBytes(p)
		if int64(ks.acct.sz[p]) != want {
			t.Fatalf("key %q: accounted %d bytes, measures %d", ks.keys.At(p), ks.acct.sz[p], want)
		}
		total += want
	}
	if got := ks.acct.total; got != total {
		t.Fatalf("accounted total %d, keys sum to %d", got, total)
	}
}

// TestEvictionCandidatesPerPolicy fills a keyspace where the right victims
// are known (old or rarely read keys, keys with the nearest deadline, keys
// without a deadline that volatile-* must never pick) and checks what each
// policy picks.
func TestEvictionCandidatesPerPolicy(t *testing.T) {
	const now = 10_000_000
	for _, pol := range policyNames {
		t.Run(pol, func(t *testing.T) {
			f := newTestFSM(t)
			doCmd(t, f, now-1_000_000, "config", "set", "maxmemory", "1mb", "maxmemory-policy", pol, "maxmemory-samples", "10")
			// 100 keys without a deadline written 1000 s ago, and 100 with
			// deadlines from 10 to 1000 s away written at now.
			for i := range 100 {
				doCmd(t, f, now-1_000_000, "set", "old"+strconv.Itoa(i), "v")
			}
			for i := range 100 {
				doCmd(t, f, now, "set", "ttl"+strconv.Itoa(i), "v", "px", strconv.Itoa((i+1)*10_000))
			}
			// Under LFU, the old keys are read often, the new ones never.
			if p, _ := ParsePolicy(pol); p.lfu() {
				for range 30 {
					for i := range 100 {
						doCmd(t, f, now, "get", "old"+strconv.Itoa(i))
					}
				}
			}
			vs := f.EvictionCandidates(1, 20, now, rand.NewPCG(1, 2))
			p, _ := ParsePolicy(pol)
			if p == NoEviction {
				if len(vs) != 0 {
					t.Fatalf("noeviction picked %d keys", len(vs))
				}
				return
			}
			if len(vs) != 1 {
				t.Fatalf("picked %d keys for 1 byte, want 1", len(vs))
			}
			vs = f.EvictionCandidates(1<<40, 20, now, rand.NewPCG(3, 4))
			if len(vs) != 20 {
				t.Fatalf("picked %d keys, want 20", len(vs))
			}
			var keys []string
			for _, v := range vs {
				keys = append(keys, string(v.Key))
			}
			if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != 20 {
				t.Fatalf("a key picked twice: %q", keys)
			}
			count := func(prefix string) int {
				n := 0
				for _, k := range keys {
					if len(k) > len(prefix) && k[:len(prefix)] == prefix {
						n++
					}
				}
				return n
			}
			switch p {
			case AllKeysLRU:
				// Sampling 10 of 200 keys, the pool nearly always holds an
				// old key: nearly every pick is one.
				if count("old") < 18 {
					t.Errorf("allkeys-lru picked %q: want the keys idle for 1000 s", keys)
				}
			case AllKeysLFU:
				if count("ttl") < 18 {
					t.Errorf("allkeys-lfu picked %q: want the keys never read", keys)
				}
			case VolatileLRU, VolatileLFU, VolatileRandom, VolatileTTL, AllKeysRandom:
				if p.volatile() && count("old") != 0 {
					t.Fatalf("%s picked keys without a deadline: %q", pol, keys)
				}
			}
			if p == VolatileTTL {
				// The pool keeps the soonest deadlines seen; with 10 samples a
				// pick, the first pick is among the 30 soonest of 100.
				first, _ := strconv.Atoi(keys[0][3:])
				if first >= 30 {
					t.Errorf("volatile-ttl picked %q first: want one of the nearest deadlines", keys[0])
				}
			}
			// Applying the eviction removes exactly these keys, and the
			// accounting follows.
			before := f.UsedMemory()
			var freed int64
			for _, v := range vs {
				freed += v.Bytes
			}
			args := EvictArgs(vs)
			strs := make([]string, len(args))
			for i, a := range args {
				strs[i] = string(a)
			}
			if got := applyCmd(t, f, now, strs...); got != ":20\r\n" {
				t.Fatalf("raftset.evict = %q, want :20", got)
			}
			if got := f.UsedMemory(); got != before-freed {
				t.Errorf("UsedMemory() = %d after evicting %d bytes from %d", got, freed, before)
			}
			checkAccounting(t, f)
			if c := f.Counters(); c.Evicted != 20 {
				t.Errorf("evicted_keys = %d, want 20", c.Evicted)
			}
			for _, k := range keys {
				if got := doCmd(t, f, now, "exists", k); got != ":0\r\n" {
					t.Fatalf("%s still exists after its eviction", k)
				}
			}
		})
	}
}

// TestVolatileWithoutDeadlines: volatile-* policies find nothing to evict
// when no key has a deadline (the leader then answers -OOM, as Redis does).
func TestVolatileWithoutDeadlines(t *testing.T) {
	for _, pol := range []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"} {
		f := newTestFSM(t)
		doCmd(t, f, 1000, "config", "set", "maxmemory-policy", pol)
		for i := range 50 {
			doCmd(t, f, 1000, "set", fmt.Sprint("k", i), "v")
		}
		if vs := f.EvictionCandidates(1<<30, 100, 1000, rand.NewPCG(1, 1)); len(vs) != 0 {
			t.Errorf("%s picked %d keys without a deadline", pol, len(vs))
		}
	}
}

// TestEvictStaleVersion: a key rewritten after the leader picked it stays.
func TestEvictStaleVersion(t *testing.T) {
	f := newTestFSM(t)
	doCmd(t, f, 1000, "set", "k", "v1")
	ver := f.WatchStamp(toArgs("k"))[0].Stamp
	doCmd(t, f, 1000, "set", "k", "v2")
	if got := applyCmd(t, f, 1000, CmdEvict, "k", strconv.FormatUint(ver, 10)); got != ":0\r\n" {
		t.Fatalf("evict of a rewritten key = %q, want :0", got)
	}
	if got := doCmd(t, f, 1000, "get", "k"); got != "$2\r\nv2\r\n" {
		t.Fatalf("GET k = %q after a stale eviction", got)
	}
}

// TestObjectIntrospection: OBJECT FREQ, IDLETIME and REFCOUNT and MEMORY
// USAGE, with Redis 7's replies and errors, and TOUCH recording an access
// where EXISTS does not.
func TestObjectIntrospection(t *testing.T) {
	f := newTestFSM(t)
	const t0 = 5_000_000
	doCmd(t, f, t0, "set", "a", "5")
	doCmd(t, f, t0, "set", "b", "hello")
	doCmd(t, f, t0, "sadd", "s", "x")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"object", "freq", "a"}, "-" + errNotLFU + "\r\n"},
		{[]string{"object", "idletime", "a"}, ":0\r\n"},
		{[]string{"object", "refcount", "a"}, ":2147483647\r\n"},
		{[]string{"object", "refcount", "b"}, ":1\r\n"},
		{[]string{"object", "refcount", "s"}, ":1\r\n"},
		{[]string{"object", "idletime", "nokey"}, "$-1\r\n"},
		{[]string{"object", "freq"}, "-ERR wrong number of arguments for 'object|freq' command\r\n"},
		{[]string{"memory", "usage", "nokey"}, "$-1\r\n"},
		{[]string{"memory", "usage", "b", "samples", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"memory", "usage", "b", "foo", "1"}, "-ERR syntax error\r\n"},
		{[]string{"memory", "usage"}, "-ERR wrong number of arguments for 'memory|usage' command\r\n"},
	} {
		if got := doCmd(t, f, t0, c.args...); got != c.want {
			t.Errorf("%q = %q, want %q", c.args, got, c.want)
		}
	}
	// 65 s later: EXISTS leaves the idle time, TOUCH resets it.
	doCmd(t, f, t0+65_000, "exists", "a")
	if got := doCmd(t, f, t0+65_000, "object", "idletime", "a"); got != ":65\r\n" {
		t.Errorf("OBJECT IDLETIME after EXISTS = %q, want :65", got)
	}
	doCmd(t, f, t0+65_000, "touch", "a")
	if got := doCmd(t, f, t0+66_000, "object", "idletime", "a"); got != ":1\r\n" {
		t.Errorf("OBJECT IDLETIME after TOUCH = %q, want :1", got)
	}
	if got, want := doCmd(t, f, t0, "memory", "usage", "b", "samples", "0"), ":"+strconv.FormatInt(keyOverhead+1+8, 10)+"\r\n"; got != want {
		t.Errorf("MEMORY USAGE b = %q, want %q", got, want)
	}
	doCmd(t, f, t0, "config", "set", "maxmemory-policy", "allkeys-lfu")
	if got := doCmd(t, f, t0, "object", "idletime", "a"); got != "-"+errLFU+"\r\n" {
		t.Errorf("OBJECT IDLETIME under LFU = %q", got)
	}
	doCmd(t, f, t0, "set", "c", "x")
	if got := doCmd(t, f, t0, "object", "freq", "c"); got != ":5\r\n" {
		t.Errorf("OBJECT FREQ of a new key = %q, want Redis's initial :5", got)
	}
	// Two decay periods later the counter lost 2.
	if got := doCmd(t, f, t0+120_000, "object", "freq", "c"); got != ":3\r\n" {
		t.Errorf("OBJECT FREQ two minutes later = %q, want :3", got)
	}
	doCmd(t, f, t0, "config", "set", "maxmemory", "1gb")
	if got := doCmd(t, f, t0, "object", "refcount", "a"); got != ":1\r\n" {
		t.Errorf("OBJECT REFCOUNT of a small integer under maxmemory + LFU = %q, want :1", got)
	}
	doCmd(t, f, t0, "get", "nokey")
	c := f.Counters()
	if c.Hits == 0 || c.Misses == 0 {
		t.Errorf("keyspace hits %d, misses %d: reads were not counted", c.Hits, c.Misses)
	}
}

// TestEvictConfigSnapshot: the maxmemory settings travel in snapshots and
// a restored replica answers the same CONFIG.
func TestEvictConfigSnapshot(t *testing.T) {
	f := newTestFSM(t)
	doCmd(t, f, 1000, "config", "set", "maxmemory", "64mb", "maxmemory-policy", "VOLATILE-TTL", "maxmemory-samples", "7")
	doCmd(t, f, 1000, "set", "k", "v")
	c := restored(t, persist(t, f))
	want := EvictConfig{MaxMemory: 64 << 20, Policy: VolatileTTL, Samples: 7, Tenacity: 10}
	if got := c.EvictConfig(); got != want {
		t.Fatalf("restored EvictConfig() = %+v, want %+v", got, want)
	}
	checkAccounting(t, c)
	if c.UsedMemory() != f.UsedMemory() {
		t.Errorf("restored UsedMemory() = %d, want %d", c.UsedMemory(), f.UsedMemory())
	}
	// A default configuration writes no field (files stay as they were).
	g := newTestFSM(t)
	if got := restored(t, persist(t, g)).EvictConfig(); got != DefaultEvictConfig() {
		t.Errorf("default config restored as %+v", got)
	}
}
