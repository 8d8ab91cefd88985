package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// TestClusterModeClients runs three processes with cluster-enabled and
// drives them as a Redis Cluster: go-redis's ClusterClient writes and reads
// keys over every part of the slot space (and sets, and a hash-tagged
// transaction) through any node; followers redirect with -MOVED to the
// leader, byte for byte as Redis formats it; after a leadership transfer the
// same client follows the new leader; redis-cli -c and redis-cli --cluster
// check accept the cluster.
func TestClusterModeClients(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3, "--cluster-enabled", "yes")
	l := leaderOf(t, nodes, nil)
	var addrs []string
	for _, cp := range nodes {
		addrs = append(addrs, cp.addr)
	}
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer rdb.Close()

	// Every node describes the same shard: the leader masters all slots.
	checkSlots := func(leader *clusterProc) {
		t.Helper()
		testutil.WaitFor(t, 20*time.Second, "every node to report "+leader.id+" as master of 0-16383", func() bool {
			for _, cp := range nodes {
				c := dial(t, cp.addr)
				r := testutil.ParseReply(do(t, c, "CLUSTER", "SLOTS"))
				if len(r.Elems) != 1 || len(r.Elems[0].Elems) != 5 {
					return false
				}
				rng := r.Elems[0].Elems
				master := rng[2].Elems[0].Str + ":" + rng[2].Elems[1].Str
				if rng[0].Str != "0" || rng[1].Str != "16383" || master != leader.addr {
					return false
				}
			}
			return true
		})
	}
	checkSlots(l)

	writeAll := func(round int) {
		t.Helper()
		for i := range 600 {
			k := fmt.Sprintf("key:%d", i)
			if err := rdb.Set(ctx, k, fmt.Sprintf("%d-%d", round, i), 0).Err(); err != nil {
				t.Fatalf("round %d: SET %s: %v", round, k, err)
			}
			if err := rdb.SAdd(ctx, fmt.Sprintf("set:%d", i%50), fmt.Sprintf("m%d-%d", round, i)).Err(); err != nil {
				t.Fatalf("round %d: SADD: %v", round, err)
			}
		}
		for i := range 600 {
			k := fmt.Sprintf("key:%d", i)
			if v, err := rdb.Get(ctx, k).Result(); err != nil || v != fmt.Sprintf("%d-%d", round, i) {
				t.Fatalf("round %d: GET %s = %q, %v", round, k, v, err)
			}
		}
		// A transaction over one hash tag is one slot: allowed. Both sets
		// hold every round so far.
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, "{tx}a", round)
			p.SAdd(ctx, "{tx}b", round)
			p.SInterStore(ctx, "{tx}c", "{tx}a", "{tx}b")
			return nil
		})
		if err != nil || cmds[2].(*redis.IntCmd).Val() != int64(round) {
			t.Fatalf("round %d: tagged transaction: %v %v", round, cmds, err)
		}
	}
	writeAll(1)
	// The 600 keys spread over the slot space.
	seen := map[int]bool{}
	lc := dial(t, l.addr)
	for i := range 600 {
		seen[keySlot(t, lc, fmt.Sprintf("key:%d", i))/1024] = true
	}
	if len(seen) != 16 {
		t.Errorf("keys reached %d of 16 slot ranges of 1024", len(seen))
	}
	for i := range 50 {
		k := fmt.Sprintf("set:%d", i)
		if n, err := rdb.SCard(ctx, k).Result(); err != nil || n != 12 {
			t.Fatalf("SCARD %s = %d, %v", k, n, err)
		}
	}

	// A client that reads from replicas (READONLY on their connections)
	// reads there: stale at most until they apply the writes.
	ro := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadOnly: true, RouteRandomly: true,
		MaxRedirects: 8, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer ro.Close()
	for i := range 100 {
		k := fmt.Sprintf("key:%d", i)
		testutil.WaitFor(t, 10*time.Second, "a replica-reading client to read "+k, func() bool {
			v, err := ro.Get(ctx, k).Result()
			return err == nil && v == fmt.Sprintf("1-%d", i)
		})
	}
	replicaGets := 0
	for _, cp := range followersOf(nodes, l) {
		stats := do(t, dial(t, cp.addr), "INFO", "commandstats")
		if _, rest, ok := strings.Cut(stats, "cmdstat_get:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			replicaGets += n
		}
	}
	if replicaGets == 0 {
		t.Error("no GET reached a replica through the replica-reading client")
	}

	// A follower redirects keyed commands, reads included, to the leader;
	// READONLY lets it serve reads, never writes.
	f := followersOf(nodes, l)[0]
	fc := dial(t, f.addr)
	slotOf := keySlot(t, fc, "key:7")
	moved := fmt.Sprintf("-MOVED %d %s\r\n", slotOf, l.addr)
	for _, cmd := range [][]string{{"GET", "key:7"}, {"SET", "key:7", "x"}, {"SADD", "key:7", "x"}} {
		if r := do(t, fc, cmd...); r != moved {
			t.Errorf("%v on a follower = %q, want %q", cmd, r, moved)
		}
	}
	if r := do(t, fc, "READONLY"); r != "+OK\r\n" {
		t.Fatalf("READONLY = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "the follower to serve a READONLY read", func() bool {
		return do(t, fc, "GET", "key:7") == "$3\r\n1-7\r\n"
	})
	if r := do(t, fc, "SET", "key:7", "x"); r != moved {
		t.Errorf("SET on a READONLY follower connection = %q, want %q", r, moved)
	}

	// COUNTKEYSINSLOT and GETKEYSINSLOT agree with KEYSLOT.
	tag := keySlot(t, lc, "{tx}")
	if r := do(t, lc, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(tag)); r != ":3\r\n" {
		t.Errorf("COUNTKEYSINSLOT of {tx} = %q, want 3", r)
	}
	keys := testutil.ParseReply(do(t, lc, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(tag), "10"))
	var names []string
	for _, e := range keys.Elems {
		names = append(names, e.Str)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"{tx}a", "{tx}b", "{tx}c"}) {
		t.Errorf("GETKEYSINSLOT of {tx} = %v", names)
	}

	// Leadership moves: the same client follows the new master.
	transferTo(t, nodes, f)
	checkSlots(f)
	writeAll(2)
	oc := dial(t, l.addr)
	if r := do(t, oc, "GET", "key:7"); r != fmt.Sprintf("-MOVED %d %s\r\n", slotOf, f.addr) {
		t.Errorf("GET on the old leader = %q, want MOVED to %s", r, f.addr)
	}

	// redis-cli follows redirects with -c and checks the cluster.
	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	host, port := splitHostPort(t, l.addr)
	out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "SET", "cli-key", "v1").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "OK" {
		t.Errorf("redis-cli -c SET through a follower: %q, %v", out, err)
	}
	out, err = exec.Command(cli, "-c", "-h", host, "-p", port, "GET", "cli-key").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "v1" {
		t.Errorf("redis-cli -c GET through a follower: %q, %v", out, err)
	}
	clusterCheck(t, l.addr)

	// A replica dies: the leader reports it failed, and the client keeps
	// writing and reading through the leader.
	var dead *clusterProc
	for _, cp := range nodes {
		if cp != l && cp != f {
			dead = cp
		}
	}
	dead.p.kill9(t)
	fc2 := dial(t, f.addr)
	testutil.WaitFor(t, 20*time.Second, "the leader to flag the dead replica", func() bool {
		nodesOut := testutil.ParseReply(do(t, fc2, "CLUSTER", "NODES")).Str
		for _, line := range strings.Split(nodesOut, "\n") {
			if strings.Contains(line, " "+dead.addr+"@") {
				return strings.Contains(line, " slave,fail ") && strings.HasSuffix(line, " disconnected")
			}
		}
		return false
	})
	if shards := do(t, fc2, "CLUSTER", "SHARDS"); !strings.Contains(shards, "$6\r\nhealth\r\n$6\r\nfailed\r\n") {
		t.Errorf("CLUSTER SHARDS does not report the dead replica failed: %q", shards)
	}
	writeAll(3)
}

// keySlot asks a node for key's hash slot.
func keySlot(t *testing.T, c *testutil.RESPClient, key string) int {
	t.Helper()
	r := testutil.ParseReply(do(t, c, "CLUSTER", "KEYSLOT", key))
	n, err := strconv.Atoi(r.Str)
	if r.Kind != ':' || err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s = %v", key, r)
	}
	return n
}

func splitHostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q has no port", addr)
	}
	return addr[:i], addr[i+1:]
}

// TestClusterModeMatchesRedis sends the same commands to a cluster-enabled
// raftset and a cluster-enabled redis-server that owns every slot, and
// compares the replies byte for byte: CROSSSLOT (plain commands, inside
// MULTI, at EXEC, in EVAL), KEYSLOT, argument errors and INFO's cluster
// section; CLUSTER INFO must have Redis's fields in Redis's order. Then a
// raftset and a redis-server with cluster mode off answer CLUSTER alike.
func TestClusterModeMatchesRedis(t *testing.T) {
	r := testutil.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	theirs := dial(t, r.Addr)
	if rep := do(t, theirs, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); rep != "+OK\r\n" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE = %q", rep)
	}
	testutil.WaitFor(t, 10*time.Second, "redis-server's cluster_state:ok", func() bool {
		return strings.Contains(do(t, theirs, "CLUSTER", "INFO"), "cluster_state:ok")
	})
	addr, _ := startNode(t, "", "--cluster-enabled", "yes")
	ours := dial(t, addr)

	for _, cmd := range [][]string{
		{"MSET", "a", "1", "b", "2"},
		{"MSET", "{a}1", "1", "{a}2", "2"},
		{"SINTERSTORE", "d", "a", "b"},
		{"SMOVE", "a", "b", "m"},
		{"SUNION", "{t}x", "{t}y"},
		{"SINTERCARD", "2", "a", "b"},
		{"DEL", "a", "b", "c"},
		{"EVAL", "return 1", "2", "a", "b"},
		{"EVAL", "return 1", "2", "{a}x", "{a}y"},
		{"MULTI"}, {"SET", "a", "1"}, {"SET", "b", "1"}, {"EXEC"},
		{"MULTI"}, {"MSET", "a", "1", "b", "1"}, {"SET", "a", "1"}, {"EXEC"},
		{"MULTI"}, {"SET", "{q}a", "1"}, {"GET", "{q}b"}, {"EXEC"},
		{"CLUSTER", "KEYSLOT", "{user1000}.following"},
		{"CLUSTER", "KEYSLOT", ""},
		{"CLUSTER", "KEYSLOT"},
		{"CLUSTER", "COUNTKEYSINSLOT", "x"},
		{"CLUSTER", "COUNTKEYSINSLOT", "16384"},
		{"CLUSTER", "COUNTKEYSINSLOT", "-1"},
		{"CLUSTER", "GETKEYSINSLOT", "1", "-1"},
		{"CLUSTER", "GETKEYSINSLOT", "16384", "1"},
		{"CLUSTER", "GETKEYSINSLOT", "x", "1"},
		{"CLUSTER", "MYID", "x"},
		{"CLUSTER", "NOSUCH"},
		{"ASKING"},
		{"INFO", "cluster"},
	} {
		if a, b := do(t, ours, cmd...), do(t, theirs, cmd...); a != b {
			t.Errorf("%q: raftset %q, redis %q", cmd, a, b)
		}
	}

	// The keys of a slot, newest first as Redis 7.0's slot-to-keys lists
	// them, through creations, a deletion that moves another key in the
	// keyspace's dense order, and a rename (the first COUNTKEYSINSLOT
	// builds raftset's index, as a node that builds it at start would have
	// it).
	g := strconv.Itoa(keySlot(t, ours, "{g}"))
	for _, cmd := range [][]string{
		{"CLUSTER", "COUNTKEYSINSLOT", g},
		{"SET", "{g}1", "a"}, {"SADD", "{g}2", "b"}, {"SET", "other", "x"}, {"SET", "{g}3", "c"}, {"SET", "{g}4", "d"},
		{"DEL", "{g}2"}, {"RENAME", "{g}3", "{g}5"}, {"SET", "more", "y"}, {"DEL", "other"},
		{"CLUSTER", "GETKEYSINSLOT", g, "10"},
		{"CLUSTER", "GETKEYSINSLOT", g, "2"},
		{"CLUSTER", "GETKEYSINSLOT", g, "0"},
		{"CLUSTER", "COUNTKEYSINSLOT", g},
	} {
		if a, b := do(t, ours, cmd...), do(t, theirs, cmd...); a != b {
			t.Errorf("%q: raftset %q, redis %q", cmd, a, b)
		}
	}

	fields := func(c *testutil.RESPClient) []string {
		var out []string
		for _, line := range strings.Split(testutil.ParseReply(do(t, c, "CLUSTER", "INFO")).Str, "\r\n") {
			if k, _, ok := strings.Cut(line, ":"); ok {
				out = append(out, k)
			}
		}
		return out
	}
	if a, b := fields(ours), fields(theirs); !slices.Equal(a, b) {
		t.Errorf("CLUSTER INFO fields: raftset %v, redis %v", a, b)
	}
	if id := testutil.ParseReply(do(t, ours, "CLUSTER", "MYID")).Str; len(id) != 40 {
		t.Errorf("CLUSTER MYID = %q, want 40 hex characters", id)
	}

	plain := dial(t, testutil.StartRedis(t).Addr)
	plainAddr, _ := startNode(t, "")
	plainOurs := dial(t, plainAddr)
	for _, cmd := range [][]string{
		{"CLUSTER", "INFO"}, {"CLUSTER", "KEYSLOT", "a"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "NOSUCH"},
		{"MSET", "a", "1", "b", "2"}, {"INFO", "cluster"}, {"ASKING"},
	} {
		if a, b := do(t, plainOurs, cmd...), do(t, plain, cmd...); a != b {
			t.Errorf("cluster mode off: %q: raftset %q, redis %q", cmd, a, b)
		}
	}
}
