package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"raftset/internal/testutil"
)

// hello3 switches a raw connection to RESP3 and returns HELLO's reply.
func hello3(t *testing.T, c *testutil.RESPClient) testutil.Reply {
	t.Helper()
	r := testutil.ParseReply(do(t, c, "HELLO", "3"))
	if r.Kind != '%' {
		t.Fatalf("HELLO 3 = %s (kind %q), want a map", r, r.Kind)
	}
	return r
}

// TestRESP3DifferentialAgainstRedis runs the random command streams of
// TestDifferentialAgainstRedis on RESP3 connections to raftset and to
// Debian's redis-server (7.0), with the same known differences: every
// reply's RESP3 type must match (sets as '~', nulls as '_', maps as '%'...),
// then its contents. It also compares, by their type skeleton, the replies
// whose contents legitimately differ (versions, ids, command metadata).
func TestRESP3DifferentialAgainstRedis(t *testing.T) {
	redis := testutil.StartRedis(t, "--enable-debug-command", "yes")
	addr, _ := startNode(t, "")
	ours, theirs := dial(t, addr), dial(t, redis.Addr)
	a, b := hello3(t, ours), hello3(t, theirs)
	if got, want := mapKeys(a), mapKeys(b); !slices.Equal(got, want) {
		t.Fatalf("HELLO 3 keys = %q, redis %q", got, want)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		r := rand.New(rand.NewPCG(seed, 33))
		do(t, ours, "FLUSHALL")
		do(t, theirs, "FLUSHALL")
		for i := 0; i < 800; i++ {
			cmd := randomCommand(r)
			compareCommand(t, ours, theirs, seed, i, cmd)
			if t.Failed() {
				return
			}
		}
	}

	// Replies decided by the front end, and the cluster's: exact.
	do(t, ours, "SADD", "s", "a", "b")
	do(t, theirs, "SADD", "s", "a", "b")
	do(t, ours, "SET", "k", "hello")
	do(t, theirs, "SET", "k", "hello")
	for _, cmd := range [][]string{
		{"CONFIG", "GET", "maxclients"},
		{"CONFIG", "GET", "nosuch"},
		{"LCS", "k", "k", "IDX", "WITHMATCHLEN"},
		{"GET", "nosuch"},
		{"MGET", "k", "nosuch"},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETREDIR"},
		{"OBJECT", "ENCODING", "nosuch"},
		{"DUMP", "nosuch"},
		{"SPOP", "nosuch"},
		{"SPOP", "nosuch", "3"},
		{"SRANDMEMBER", "nosuch", "2"},
		{"SMEMBERS", "nosuch"},
		{"SINTER", "s", "nosuch"},
		{"SCRIPT", "EXISTS", "0000000000000000000000000000000000000000"},
		{"EVAL", "return {1, false, 'x'}", "0"},
		{"EVAL", "return false", "0"},
		{"COMMAND", "GETKEYSANDFLAGS", "SET", "a", "b"},
		{"ACL", "GETUSER", "nosuch"},
		{"PING"},
		{"ECHO", "x"},
	} {
		compareRaw(t, ours, theirs, 0, 0, cmd)
	}
	// A transaction: each element in its command's RESP3 form; a watched
	// key's change: a null.
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		do(t, c, "MULTI")
		do(t, c, "SMEMBERS", "s")
		do(t, c, "GET", "nosuch")
		do(t, c, "CONFIG", "GET", "maxclients")
	}
	if x, y := testutil.ParseReply(do(t, ours, "EXEC")), testutil.ParseReply(do(t, theirs, "EXEC")); skeleton(x) != skeleton(y) {
		t.Errorf("EXEC = %s %s, redis %s %s", x, skeleton(x), y, skeleton(y))
	}
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		do(t, c, "WATCH", "k")
		do(t, c, "SET", "k", "v2")
		do(t, c, "MULTI")
		do(t, c, "GET", "k")
	}
	compareRaw(t, ours, theirs, 0, 0, []string{"EXEC"})

	// Replies whose contents differ between the servers: same types.
	for _, cmd := range [][]string{
		{"HELLO"},
		{"INFO", "server"},
		{"CLIENT", "INFO"},
		{"CLIENT", "LIST"},
		{"COMMAND", "INFO", "get", "sintercard", "client"},
		{"COMMAND", "DOCS", "set", "client"},
		{"ACL", "GETUSER", "default"},
		{"TIME"},
	} {
		x, y := testutil.ParseReply(do(t, ours, cmd...)), testutil.ParseReply(do(t, theirs, cmd...))
		if skeleton(x) != skeleton(y) {
			t.Errorf("%q types:\n ours  %s\n redis %s", cmd, skeleton(x), skeleton(y))
		}
	}
	if r := testutil.ParseReply(do(t, ours, "CLIENT", "INFO")); !strings.Contains(r.Str, " resp=3 ") {
		t.Errorf("CLIENT INFO = %q, want resp=3", r.Str)
	}
	// RESET goes back to RESP2.
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		if got := do(t, c, "RESET"); got != "+RESET\r\n" {
			t.Fatalf("RESET = %q", got)
		}
	}
	compareRaw(t, ours, theirs, 0, 0, []string{"GET", "nosuch"})
	compareRaw(t, ours, theirs, 0, 0, []string{"SMEMBERS", "s"})
}

func mapKeys(r testutil.Reply) []string {
	var out []string
	for i := 0; i+1 < len(r.Elems); i += 2 {
		out = append(out, r.Elems[i].Str)
	}
	return out
}

// skeleton renders a reply's RESP3 types: a map's keys (sorted) with their
// values' skeletons, an aggregate's distinct element skeletons, a scalar's
// type (a set of names: only its type). Fields raftset does not report (COMMAND DOCS's complexity, history,
// doc_flags; the subcommands Redis 7.0 lacks or raftset lacks) are left out
// of maps.
func skeleton(r testutil.Reply) string {
	switch r.Kind {
	case '%':
		var parts []string
		for i := 0; i+1 < len(r.Elems); i += 2 {
			k := r.Elems[i].Str
			switch k {
			case "complexity", "history", "doc_flags", "subcommands", "tips", "module":
				continue
			}
			parts = append(parts, k+":"+skeleton(r.Elems[i+1]))
		}
		sort.Strings(parts)
		return "%{" + strings.Join(parts, " ") + "}"
	case '*', '~', '>':
		if r.Kind == '~' && (len(r.Elems) == 0 || r.Elems[0].Kind != '%') {
			return "~" // a set of names (flags, categories, tips): only its type
		}
		seen := map[string]bool{}
		var parts []string
		for _, e := range r.Elems {
			if s := skeleton(e); !seen[s] {
				seen[s] = true
				parts = append(parts, s)
			}
		}
		sort.Strings(parts)
		return string(r.Kind) + "[" + strings.Join(parts, "|") + "]"
	}
	return string(r.Kind)
}

// TestClientTrackingMatchesRedis runs the same client-side caching session
// against raftset and redis-server and compares every byte each connection
// receives: invalidation pushes in RESP3, the __redis__:invalidate messages
// of the RESP2 REDIRECT form, BCAST prefixes, OPTIN, NOLOOP, FLUSHALL.
func TestClientTrackingMatchesRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	type side struct {
		name                   string
		tracker, redir, writer *testutil.RESPClient
	}
	sides := []*side{{name: "raftset"}, {name: "redis"}}
	for i, a := range []string{addr, redis.Addr} {
		sides[i].tracker, sides[i].redir, sides[i].writer = dial(t, a), dial(t, a), dial(t, a)
	}
	// step runs one command on one connection of both servers and compares
	// the reply; expectPush then reads what a connection was pushed.
	step := func(pick func(*side) *testutil.RESPClient, args ...string) {
		t.Helper()
		var got []string
		for _, s := range sides {
			got = append(got, do(t, pick(s), args...))
		}
		if got[0] != got[1] {
			t.Fatalf("%q = %q, redis %q", args, got[0], got[1])
		}
	}
	push := func(pick func(*side) *testutil.RESPClient, what string) {
		t.Helper()
		var got []string
		for _, s := range sides {
			raw, err := pick(s).Read()
			if err != nil {
				t.Fatalf("%s: reading %s: %v", s.name, what, err)
			}
			got = append(got, raw)
		}
		if got[0] != got[1] {
			t.Fatalf("%s: %q, redis %q", what, got[0], got[1])
		}
	}
	tr := func(s *side) *testutil.RESPClient { return s.tracker }
	rd := func(s *side) *testutil.RESPClient { return s.redir }
	wr := func(s *side) *testutil.RESPClient { return s.writer }

	// RESP3, default mode: a read key is invalidated once when written.
	for _, s := range sides {
		hello3(t, s.tracker)
	}
	step(tr, "CLIENT", "TRACKING", "ON")
	step(tr, "GET", "k1")
	step(tr, "SMEMBERS", "s1")
	step(wr, "SET", "k1", "v")
	push(tr, "invalidation of k1")
	step(wr, "SET", "k1", "v2") // not read again: no message
	step(wr, "SADD", "s1", "x")
	push(tr, "invalidation of s1")
	// The tracker's own write invalidates its read.
	step(tr, "GET", "k1")
	step(tr, "DEL", "k1")
	push(tr, "invalidation of its own write")
	step(tr, "CLIENT", "TRACKINGINFO")
	step(tr, "CLIENT", "TRACKING", "OFF")

	// OPTIN: only the read after CLIENT CACHING YES is remembered.
	step(tr, "CLIENT", "TRACKING", "ON", "OPTIN")
	step(tr, "GET", "a")
	step(tr, "CLIENT", "CACHING", "YES")
	step(tr, "GET", "b")
	step(wr, "MSET", "a", "1", "b", "1")
	push(tr, "OPTIN invalidation of b")
	step(tr, "CLIENT", "TRACKING", "OFF")

	// BCAST with prefixes: keys under them, without reading them.
	step(tr, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "obj:")
	step(tr, "CLIENT", "TRACKINGINFO")
	step(wr, "SET", "user:1", "x")
	push(tr, "BCAST invalidation of user:1")
	step(wr, "SET", "other", "x")
	step(wr, "SADD", "obj:7", "m")
	push(tr, "BCAST invalidation of obj:7")
	step(tr, "CLIENT", "TRACKING", "OFF")

	// FLUSHALL invalidates everything: a null.
	step(tr, "CLIENT", "TRACKING", "ON")
	step(tr, "GET", "z")
	step(wr, "FLUSHALL")
	push(tr, "FLUSHALL invalidation")
	step(tr, "CLIENT", "TRACKING", "OFF")

	// RESP2 with REDIRECT to a connection subscribed to
	// __redis__:invalidate.
	var ids []string
	for _, s := range sides {
		id := testutil.ParseReply(do(t, s.redir, "CLIENT", "ID")).Str
		ids = append(ids, id)
		do(t, s.tracker, "HELLO", "2")
	}
	step(rd, "SUBSCRIBE", "__redis__:invalidate")
	for i, s := range sides {
		if got := do(t, s.tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", ids[i]); got != "+OK\r\n" {
			t.Fatalf("%s: CLIENT TRACKING ON REDIRECT = %q", s.name, got)
		}
	}
	step(tr, "GET", "r1")
	step(wr, "SET", "r1", "x")
	push(rd, "redirected invalidation of r1")
	for i, s := range sides {
		if got, want := do(t, s.tracker, "CLIENT", "GETREDIR"), ":"+ids[i]+"\r\n"; got != want {
			t.Fatalf("%s: CLIENT GETREDIR = %q, want %q", s.name, got, want)
		}
	}
}

// TestRESP3Clients: go-redis with Protocol 3 and rueidis with client-side
// caching against one node.
func TestRESP3Clients(t *testing.T) {
	addr, _ := startNode(t, "")
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3})
	defer rdb.Close()
	if err := rdb.SAdd(ctx, "s", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	m, err := rdb.SMembers(ctx, "s").Result()
	if sort.Strings(m); err != nil || !slices.Equal(m, []string{"a", "b"}) {
		t.Fatalf("SMEMBERS = %q, %v", m, err)
	}
	if _, err := rdb.Get(ctx, "nosuch").Result(); err != redis.Nil {
		t.Fatalf("GET nosuch: %v, want redis.Nil", err)
	}
	cfg, err := rdb.ConfigGet(ctx, "maxclients").Result()
	if err != nil || cfg["maxclients"] == "" {
		t.Fatalf("CONFIG GET = %v, %v", cfg, err)
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil || !strings.Contains(info, "redis_version:") {
		t.Fatalf("INFO = %q, %v", info, err)
	}
	sub := rdb.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Publish(ctx, "ch", "hi").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "hi" {
		t.Fatalf("message = %v, %v", msg, err)
	}

	writer := redis.NewClient(&redis.Options{Addr: addr})
	defer writer.Close()
	cachedReadSeesWrite(t, []string{addr}, writer)
}

// TestRESP3ClusterTracking: rueidis caching through one follower of a
// 3-process cluster, writes through the other follower (forwarded to the
// leader): the invalidation reaches the client and its next cached read
// sees the new value.
func TestRESP3ClusterTracking(t *testing.T) {
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	fs := followersOf(nodes, l)
	writer := redis.NewClient(&redis.Options{Addr: fs[1].addr, Protocol: 3})
	defer writer.Close()
	cachedReadSeesWrite(t, []string{fs[0].addr}, writer)
	// And through the leader.
	lw := redis.NewClient(&redis.Options{Addr: l.addr})
	defer lw.Close()
	cachedReadSeesWrite(t, []string{fs[0].addr}, lw)
}

// cachedReadSeesWrite reads a key through rueidis's client-side cache
// (connected to addrs), changes it through writer, and waits for the cache
// to serve the new value: only an invalidation makes it read again.
func cachedReadSeesWrite(t *testing.T, addrs []string, writer *redis.Client) {
	t.Helper()
	ctx := context.Background()
	key := fmt.Sprintf("cached:%d", time.Now().UnixNano())
	if err := writer.Set(ctx, key, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	get := func() (string, bool) {
		t.Helper()
		r := client.DoCache(ctx, client.B().Get().Key(key).Cache(), time.Minute)
		v, err := r.ToString()
		if err != nil {
			t.Fatalf("DoCache GET: %v", err)
		}
		return v, r.IsCacheHit()
	}
	if v, _ := get(); v != "v1" {
		t.Fatalf("first read = %q", v)
	}
	// Through a follower, the first read may be invalidated by the write
	// of v1 applied there while it waited: the cache fills on a later one.
	testutil.WaitFor(t, 10*time.Second, "a cache hit", func() bool {
		v, hit := get()
		return v == "v1" && hit
	})
	if err := writer.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the cached value to be invalidated", func() bool {
		v, _ := get()
		return v == "v2"
	})
	// The new value is cached again (an invalidation racing the re-read
	// may take one more read).
	testutil.WaitFor(t, 10*time.Second, "v2 from the cache", func() bool {
		v, hit := get()
		return v == "v2" && hit
	})
}
