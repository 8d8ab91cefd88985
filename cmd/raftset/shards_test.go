package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// threeShards puts three shards on each of n1, n2 and n3.
const threeShards = "0:0-5460:n1,n2,n3 1:5461-10922:n1,n2,n3 2:10923-16383:n1,n2,n3"

// TestShardedClusterClients runs three processes hosting three shards each
// (shard-map) and drives them as a Redis Cluster of three shards:
// go-redis's ClusterClient writes and reads keys of every shard through any
// node; after one shard's leadership moves (RAFT.SHARD id RAFT.TRANSFER),
// every node reports its new master, the old one answers -MOVED to it, and
// the same client follows; redis-cli -c and redis-cli --cluster check
// accept the cluster.
func TestShardedClusterClients(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	// A cluster secret: every group's connections pass the Raft port's
	// authentication, and shards 1 and 2 reach other processes' replicas
	// through RAFTSET.AUTH-ed client connections (raftset.shard).
	// The automatic leader balancer off: the test moves a leadership by
	// hand and asserts where it stays.
	nodes := startCluster(t, 3, "--cluster-enabled", "yes", "--shard-map", threeShards, "--cluster-secret", "shh",
		"--cluster-leader-balance-interval", "0")
	byAddr := map[string]*clusterProc{}
	var addrs []string
	for _, cp := range nodes {
		byAddr[cp.addr] = cp
		addrs = append(addrs, cp.addr)
	}
	// masters returns each range's master as every node reports it, once
	// all agree and every shard has one.
	masters := func(what string, ok func(m map[string]*clusterProc) bool) map[string]*clusterProc {
		t.Helper()
		var got map[string]*clusterProc
		testutil.WaitFor(t, 30*time.Second, what, func() bool {
			var first string
			for _, cp := range nodes {
				rep, ok := clusterSlots(cp.addr)
				if !ok || len(rep.Elems) != 3 {
					return false
				}
				m := map[string]*clusterProc{}
				var sig []string
				for _, rng := range rep.Elems {
					if len(rng.Elems) != 5 {
						return false // every shard on all three nodes
					}
					for _, n := range rng.Elems[2:] {
						// Every replica published its client address in
						// its shard's log (else its Raft address shows).
						if byAddr[slotNodeAddr(n)] == nil {
							return false
						}
					}
					a := slotNodeAddr(rng.Elems[2])
					m[rng.Elems[0].Str+"-"+rng.Elems[1].Str] = byAddr[a]
					sig = append(sig, rng.Elems[0].Str+"-"+rng.Elems[1].Str+"="+a)
				}
				if s := strings.Join(sig, " "); first == "" {
					first = s
				} else if s != first {
					return false
				}
				got = m
			}
			return ok(got)
		})
		return got
	}
	want := []string{"0-5460", "5461-10922", "10923-16383"}
	before := masters("every node to report the same master for each of the 3 shards", func(m map[string]*clusterProc) bool {
		for _, r := range want {
			if m[r] == nil {
				return false
			}
		}
		return true
	})

	ctx := context.Background()
	// MaxRedirects as the move-slots tests (docs/sharding.md): an election
	// of the loaded machine's own sends -MOVED between two processes until
	// their views of the new leader agree (8 ran out once, in round 1).
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer rdb.Close()
	lc := dial(t, nodes[0].addr)
	perShard := map[int]int{}
	writeAll := func(round int) {
		t.Helper()
		for i := range 300 {
			k := fmt.Sprintf("key:%d", i)
			if err := rdb.Set(ctx, k, fmt.Sprintf("%d-%d", round, i), 0).Err(); err != nil {
				t.Fatalf("round %d: SET %s: %v", round, k, err)
			}
			if err := rdb.SAdd(ctx, fmt.Sprintf("set:%d", i%30), fmt.Sprintf("m%d-%d", round, i)).Err(); err != nil {
				t.Fatalf("round %d: SADD: %v", round, err)
			}
		}
		for i := range 300 {
			k := fmt.Sprintf("key:%d", i)
			if v, err := rdb.Get(ctx, k).Result(); err != nil || v != fmt.Sprintf("%d-%d", round, i) {
				t.Fatalf("round %d: GET %s = %q, %v", round, k, v, err)
			}
		}
		for i := range 30 {
			k := fmt.Sprintf("set:%d", i)
			if n, err := rdb.SCard(ctx, k).Result(); err != nil || n != int64(10*round) {
				t.Fatalf("round %d: SCARD %s = %d, %v", round, k, n, err)
			}
		}
	}
	writeAll(1)
	for i := range 300 {
		s := keySlot(t, lc, fmt.Sprintf("key:%d", i))
		perShard[min(s/5461, 2)]++
	}
	if len(perShard) != 3 {
		t.Errorf("the keys reached %d of 3 shards: %v", len(perShard), perShard)
	}
	// Each shard holds only its own keys: DBSIZE-like counts per slot.
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		s := keySlot(t, c, "key:1")
		if r := do(t, c, "CLUSTER", "COUNTKEYSINSLOT", fmt.Sprint(s)); r == ":0\r\n" {
			t.Errorf("%s: COUNTKEYSINSLOT of key:1's slot = %q", cp.id, r)
		}
	}

	// A client that reads from replicas reads there too.
	ro := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadOnly: true, RouteRandomly: true,
		MaxRedirects: 8, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer ro.Close()
	for i := range 60 {
		k := fmt.Sprintf("key:%d", i)
		testutil.WaitFor(t, 10*time.Second, "a replica-reading client to read "+k, func() bool {
			v, err := ro.Get(ctx, k).Result()
			return err == nil && v == fmt.Sprintf("1-%d", i)
		})
	}
	// Shard 0 is in the data directory itself, the others under shards/.
	for _, cp := range nodes {
		for _, f := range []string{"raft.db", "shards/1/raft.db", "shards/2/raft.db"} {
			if _, err := os.Stat(filepath.Join(cp.dir, f)); err != nil {
				t.Errorf("%s: %v", cp.id, err)
			}
		}
	}

	// DBSIZE and INFO keyspace count the keys of every shard held here:
	// all of them, on a process that holds all three.
	total := 300 + 30 // key:*, set:*
	for _, cp := range nodes {
		c := dial(t, cp.addr)
		if r := do(t, c, "DBSIZE"); r != fmt.Sprintf(":%d\r\n", total) {
			t.Errorf("%s: DBSIZE = %q, want %d", cp.id, r, total)
		}
		if r := do(t, c, "INFO", "keyspace"); !strings.Contains(r, fmt.Sprintf("db0:keys=%d,", total)) {
			t.Errorf("%s: INFO keyspace = %q, want %d keys", cp.id, r, total)
		}
	}

	// Shard 1's leadership moves to another node.
	old := before["5461-10922"]
	var target *clusterProc
	for _, cp := range nodes {
		if cp != old {
			target = cp
			break
		}
	}
	testutil.WaitFor(t, 30*time.Second, "RAFT.SHARD 1 RAFT.TRANSFER to succeed", func() bool {
		c, err := testutil.DialRESP(old.addr, 5*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		r, err := c.Do("RAFT.SHARD", "1", "RAFT.TRANSFER", target.id)
		if err != nil || r != "+OK\r\n" {
			t.Logf("RAFT.SHARD 1 RAFT.TRANSFER %s = %q, %v (retrying)", target.id, r, err)
			return false
		}
		return true
	})
	after := masters("every node to report "+target.id+" as shard 1's master", func(m map[string]*clusterProc) bool {
		return m["5461-10922"] == target
	})
	// The transfer was shard 1's alone: no other shard's leadership went to
	// the target. (Another shard may elect a new leader of its own accord on
	// a loaded machine; that is not the transfer's doing.)
	for _, r := range []string{"0-5460", "10923-16383"} {
		if after[r] != before[r] && after[r] == target {
			t.Errorf("shard %s's master moved from %s to %s with shard 1's transfer", r, before[r].id, after[r].id)
		}
	}
	var k1 string
	for i := range 300 {
		if s := keySlot(t, lc, fmt.Sprintf("key:%d", i)); s >= 5461 && s <= 10922 {
			k1 = fmt.Sprintf("key:%d", i)
			break
		}
	}
	oc := dial(t, old.addr)
	if r := do(t, oc, "GET", k1); r != fmt.Sprintf("-MOVED %d %s\r\n", keySlot(t, oc, k1), target.addr) {
		t.Errorf("GET %s on shard 1's old leader = %q, want MOVED to %s", k1, r, target.addr)
	}
	writeAll(2)

	// Keys of different shards in one command: CROSSSLOT, as Redis.
	if r := do(t, oc, "MSET", "a", "1", "b", "2"); r != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
		t.Errorf("MSET across slots = %q", r)
	}

	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	for _, cp := range nodes {
		host, port := splitHostPort(t, cp.addr)
		for i, want := range []string{"OK", "v-" + cp.id} {
			argv := []string{"-c", "-h", host, "-p", port, "SET", "cli-key:" + cp.id, "v-" + cp.id}
			if i == 1 {
				argv = []string{"-c", "-h", host, "-p", port, "GET", "cli-key:" + cp.id}
			}
			// redis-cli -c follows -MOVED but not -TRYAGAIN (a shard
			// between leaders), which a cluster client retries.
			var out []byte
			var err error
			testutil.WaitFor(t, 20*time.Second, "redis-cli to get an answer other than TRYAGAIN", func() bool {
				out, err = exec.Command(cli, argv...).CombinedOutput()
				return !strings.HasPrefix(string(out), "TRYAGAIN")
			})
			if err != nil || strings.TrimSpace(string(out)) != want {
				t.Errorf("redis-cli %v: %q, %v", argv, out, err)
			}
		}
	}
	t.Logf("redis-cli --cluster check:\n%s", clusterCheck(t, nodes[0].addr))
}

// TestShardedSixNodesTwoShards runs six processes, each holding one of two
// shards (replication factor 3), with the map naming every node's client
// address: a node learns the leader of the shard it does not hold from
// that shard's members, so every node reports both shards alike, redirects
// a key of the other shard to its leader (also after that leadership
// moves), and go-redis, redis-cli -c and redis-cli --cluster check work
// through any node.
func TestShardedSixNodesTwoShards(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	var peers, members [2][]string
	nodes := make([]*clusterProc, 6)
	raftAddrs := make([]string, 6)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		raftAddrs[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		nodes[i] = &clusterProc{id: id, dir: filepath.Join(t.TempDir(), id),
			addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
		peers[0] = append(peers[0], id+"="+raftAddrs[i])
		members[i/3] = append(members[i/3], id+"@"+nodes[i].addr)
	}
	smap := "0:0-8191:" + strings.Join(members[0], ",") + " 1:8192-16383:" + strings.Join(members[1], ",")
	for i, cp := range nodes {
		_, port := splitHostPort(t, cp.addr)
		cp.extra = []string{"--port", port, "--raft-addr", raftAddrs[i], "--node-id", cp.id,
			"--peers", strings.Join(peers[0], ","), "--loglevel", "info", "--cluster-enabled", "yes", "--shard-map", smap}
		cp.start(t)
	}
	byAddr := map[string]*clusterProc{}
	var addrs []string
	for _, cp := range nodes {
		waitWritable(t, cp.addr)
		byAddr[cp.addr] = cp
		addrs = append(addrs, cp.addr)
	}
	// masters waits until every node reports both shards with the same
	// masters, each shard with its three members, and returns them.
	masters := func(what string, ok func(m0, m1 *clusterProc) bool) (m0, m1 *clusterProc) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, what, func() bool {
			var first string
			for _, cp := range nodes {
				rep, ok := clusterSlots(cp.addr)
				if !ok || len(rep.Elems) != 2 || len(rep.Elems[0].Elems) != 5 || len(rep.Elems[1].Elems) != 5 {
					return false
				}
				var sig string
				for _, rng := range rep.Elems {
					for _, n := range rng.Elems[2:] {
						sig += slotNodeAddr(n) + " "
					}
				}
				if first == "" {
					first = sig
				} else if sig != first {
					return false
				}
				m0 = byAddr[slotNodeAddr(rep.Elems[0].Elems[2])]
				m1 = byAddr[slotNodeAddr(rep.Elems[1].Elems[2])]
			}
			return m0 != nil && m1 != nil && ok(m0, m1)
		})
		return m0, m1
	}
	m0, m1 := masters("every node to report the masters of both shards", func(m0, m1 *clusterProc) bool { return true })
	if !slices.Contains(nodes[:3], m0) || !slices.Contains(nodes[3:], m1) {
		t.Fatalf("masters %s and %s are not members of their shards", m0.id, m1.id)
	}

	ctx := context.Background()
	// MaxRedirects as the move-slots tests (docs/sharding.md): an election
	// of the loaded machine's own sends -MOVED between two processes until
	// their views of the new leader agree (8 ran out once, in round 1).
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer rdb.Close()
	roundTrip := func(round int) {
		t.Helper()
		for i := range 200 {
			k := fmt.Sprintf("k:%d", i)
			if err := rdb.SAdd(ctx, k, round).Err(); err != nil {
				t.Fatalf("round %d: SADD %s: %v", round, k, err)
			}
		}
		for i := range 200 {
			k := fmt.Sprintf("k:%d", i)
			if n, err := rdb.SCard(ctx, k).Result(); err != nil || n != int64(round) {
				t.Fatalf("round %d: SCARD %s = %d, %v", round, k, n, err)
			}
		}
	}
	roundTrip(1)
	c1 := dial(t, nodes[0].addr)
	var k1 string
	for i := range 200 {
		if keySlot(t, c1, fmt.Sprintf("k:%d", i)) >= 8192 {
			k1 = fmt.Sprintf("k:%d", i)
			break
		}
	}
	// A node of shard 0 sends a key of shard 1 to shard 1's leader.
	movedTo := func(cp *clusterProc) string {
		return fmt.Sprintf("-MOVED %d %s\r\n", keySlot(t, c1, k1), cp.addr)
	}
	if r := do(t, c1, "SCARD", k1); r != movedTo(m1) {
		t.Errorf("SCARD %s on n1 = %q, want %q", k1, r, movedTo(m1))
	}

	// Shard 1's leadership moves: n1 learns it from shard 1's members.
	var target *clusterProc
	for _, cp := range nodes[3:] {
		if cp != m1 {
			target = cp
			break
		}
	}
	testutil.WaitFor(t, 30*time.Second, "RAFT.TRANSFER in shard 1 to succeed", func() bool {
		r := do(t, dial(t, m1.addr), "RAFT.TRANSFER", target.id)
		if r != "+OK\r\n" {
			t.Logf("RAFT.TRANSFER %s = %q (retrying)", target.id, r)
		}
		return r == "+OK\r\n"
	})
	masters("every node to report "+target.id+" as shard 1's master", func(_, m1 *clusterProc) bool { return m1 == target })
	testutil.WaitFor(t, 10*time.Second, "n1 to redirect to shard 1's new leader", func() bool {
		return do(t, c1, "SCARD", k1) == movedTo(target)
	})
	roundTrip(2)

	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	host, port := splitHostPort(t, nodes[0].addr)
	out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "SCARD", k1).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2" {
		t.Errorf("redis-cli -c SCARD %s through n1: %q, %v", k1, out, err)
	}
	t.Logf("redis-cli --cluster check:\n%s", clusterCheck(t, nodes[0].addr))
}

// clusterSlots asks addr for CLUSTER SLOTS (false: no answer).
func clusterSlots(addr string) (testutil.Reply, bool) {
	c, err := testutil.DialRESP(addr, 2*time.Second)
	if err != nil {
		return testutil.Reply{}, false
	}
	defer c.Close()
	r, err := c.Do("CLUSTER", "SLOTS")
	return testutil.ParseReply(r), err == nil
}

// slotNodeAddr is host:port of one node of a CLUSTER SLOTS range.
func slotNodeAddr(n testutil.Reply) string { return n.Elems[0].Str + ":" + n.Elems[1].Str }
