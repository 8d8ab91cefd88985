package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/cluster"
	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// clusterWriters SADD unique members to keys through a cluster client from
// four goroutines until stopped, noting each member as acknowledged or,
// after an error, as maybe written: what the sharded process tests check
// a cluster against after moving slots under it.
type clusterWriters struct {
	keys []string
	// retryTryAgain sends a write refused with -TRYAGAIN again (refused at
	// apply: not written) for up to 20 s; without it every error the client
	// surfaces is counted in errs (the client's MaxRedirects must ride
	// through).
	retryTryAgain bool
	// counted says which keys' acknowledgements count (all when nil).
	counted func(key string) bool

	mu           sync.Mutex
	acked, maybe map[string]map[string]bool
	errs         map[string]int
	count        atomic.Int64
	stop         atomic.Bool
	wg           sync.WaitGroup
}

// start runs the writers; key i of writer w's round goes to
// keys[(i*stride+w)%len(keys)].
func (cw *clusterWriters) start(ctx context.Context, rdb *redis.ClusterClient, stride int) {
	cw.acked, cw.maybe, cw.errs = map[string]map[string]bool{}, map[string]map[string]bool{}, map[string]int{}
	for w := range 4 {
		cw.wg.Go(func() {
			for i := 0; !cw.stop.Load(); i++ {
				k, m := cw.keys[(i*stride+w)%len(cw.keys)], fmt.Sprintf("w%d-%d", w, i)
				deadline := time.Now().Add(20 * time.Second)
				for {
					err := rdb.SAdd(ctx, k, m).Err()
					if err == nil {
						cw.note(cw.acked, k, m)
						if cw.counted == nil || cw.counted(k) {
							cw.count.Add(1)
						}
						break
					}
					if cw.retryTryAgain && strings.HasPrefix(err.Error(), "TRYAGAIN") && time.Now().Before(deadline) {
						continue
					}
					cw.note(cw.maybe, k, m)
					cw.mu.Lock()
					cw.errs[err.Error()]++
					cw.mu.Unlock()
					break
				}
			}
		})
	}
}

func (cw *clusterWriters) note(into map[string]map[string]bool, k, m string) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if into[k] == nil {
		into[k] = map[string]bool{}
	}
	into[k][m] = true
}

// waitWrites waits until n more counted writes are acknowledged.
func (cw *clusterWriters) waitWrites(t *testing.T, n int64) {
	t.Helper()
	from := cw.count.Load()
	testutil.WaitFor(t, 30*time.Second, "writes to go on", func() bool { return cw.count.Load() >= from+n })
}

// stopAndCheck stops the writers, then checks through rdb that every key
// holds each acknowledged member and nothing never written, and that each
// process stores every key of the shards it holds once (DBSIZE: no copy
// left behind in a shard the slot left; nodes[0]'s map says which shards a
// process holds, so a process may hold some or none). It returns the
// number of keys stored.
func (cw *clusterWriters) stopAndCheck(t *testing.T, ctx context.Context, rdb *redis.ClusterClient, nodes []*clusterProc) int {
	t.Helper()
	cw.stop.Store(true)
	cw.wg.Wait()
	var stored []string
	for _, k := range cw.keys {
		got, err := rdb.SMembers(ctx, k).Result()
		if err != nil {
			t.Fatalf("SMEMBERS %s: %v", k, err)
		}
		have := map[string]bool{}
		for _, m := range got {
			have[m] = true
			if !cw.acked[k][m] && !cw.maybe[k][m] {
				t.Errorf("%s holds %s, never written", k, m)
			}
		}
		for m := range cw.acked[k] {
			if !have[m] {
				t.Errorf("%s lost acknowledged member %s", k, m)
			}
		}
		if len(got) > 0 {
			// Not every key written to: a key whose only SADDs had unknown
			// outcomes may not exist.
			stored = append(stored, k)
		}
	}
	for _, cp := range nodes {
		got, want := "", ""
		// 30 s: a linearizable DBSIZE waits for every held shard's leader.
		if !testutil.Within(30*time.Second, func() bool {
			m, err := shardMapOf(nodes[0].addr)
			if err != nil {
				return false
			}
			held := 0
			for _, k := range stored {
				if sh, _ := m.Shard(m.ShardOf(slot.Of([]byte(k)))); slices.Contains(sh.Members, cp.id) {
					held++
				}
			}
			want = fmt.Sprintf(":%d\r\n", held)
			c, err := testutil.DialRESP(cp.addr, 2*time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			got, err = c.Do("DBSIZE")
			return err == nil && got == want
		}) {
			t.Errorf("DBSIZE on %s = %q, want %q (each key of the shards it holds, once)", cp.id, got, want)
		}
	}
	return len(stored)
}

// shardMapOf is the shard map the process at addr routes by.
func shardMapOf(addr string) (*cluster.ShardMap, error) {
	c, err := testutil.DialRESP(addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	r, err := c.Do("RAFT.SHARD", "MAP")
	if err != nil {
		return nil, fmt.Errorf("RAFT.SHARD MAP on %s: %w", addr, err)
	}
	m, err := cluster.DecodeShardMap(testutil.ParseReply(r).Str)
	if err != nil {
		return nil, fmt.Errorf("RAFT.SHARD MAP on %s: %w", addr, err)
	}
	return m, nil
}

// waitMaps waits until every process routes by a shard map that ok
// accepts (each learns a change within a map refresh), and returns the
// last one's.
func waitMaps(t *testing.T, procs []*clusterProc, what string, ok func(m *cluster.ShardMap) bool) *cluster.ShardMap {
	t.Helper()
	var m *cluster.ShardMap
	for _, cp := range procs {
		testutil.WaitFor(t, 30*time.Second, cp.id+" to route by the map "+what, func() bool {
			var err error
			m, err = shardMapOf(cp.addr)
			return err == nil && ok(m)
		})
	}
	return m
}

// checkNoErrors fails the test if the cluster client surfaced an error to
// a writer: what the tests whose client must ride through a move require.
func (cw *clusterWriters) checkNoErrors(t *testing.T, during string) {
	t.Helper()
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if len(cw.errs) > 0 {
		t.Errorf("the cluster client surfaced errors during %s: %v", during, cw.errs)
	}
}

// maybeCount is the number of writes whose outcome is unknown.
func (cw *clusterWriters) maybeCount() (n int) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for _, ms := range cw.maybe {
		n += len(ms)
	}
	return n
}

// clusterClient is a go-redis ClusterClient seeded with the nodes'
// addresses, closed when the test ends. MaxRedirects 16: an election of the
// loaded machine's own sends -MOVED between two processes until their views
// of the new leader agree, and -TRYAGAIN retries share the budget.
func clusterClient(t *testing.T, timeout time.Duration, nodes ...*clusterProc) *redis.ClusterClient {
	t.Helper()
	addrs := make([]string, 0, len(nodes))
	for _, cp := range nodes {
		addrs = append(addrs, cp.addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16,
		DialTimeout: 2 * time.Second, ReadTimeout: timeout, WriteTimeout: timeout})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// waitVoters waits until every member of every shard of m, asked on its own
// process, lists the shard's members as its voters and no other server
// (RAFT.SHARD <id> RAFT.INFO): after a replica move or a removal, the
// map and the shards' Raft configurations agree.
func waitVoters(t *testing.T, m *cluster.ShardMap, nodes []*clusterProc) {
	t.Helper()
	for _, sh := range m.Shards {
		for _, mem := range sh.Members {
			i := slices.IndexFunc(nodes, func(p *clusterProc) bool { return p.id == mem })
			if i < 0 {
				t.Fatalf("shard %d's member %s is none of the processes", sh.ID, mem)
			}
			c := dial(t, nodes[i].addr)
			testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%s to see shard %d's voters %v", mem, sh.ID, sh.Members), func() bool {
				info := do(t, c, "RAFT.SHARD", fmt.Sprint(sh.ID), "RAFT.INFO")
				for _, v := range sh.Members {
					if !strings.Contains(info, "id="+v+",suffrage=voter") {
						return false
					}
				}
				return strings.Count(info, "suffrage=") == len(sh.Members)
			})
		}
	}
}

// clusterCheck runs redis-cli --cluster check against addr until every
// node agrees on the slots and every slot is covered, for up to 30 s, and
// fails the test with the last output if they never do; it returns the
// output. It polls because the check also asks every shard for its leader:
// right after a restart or a move an election may still be running
// ("no leader is known"), which is eventual by nature.
func clusterCheck(t *testing.T, addr string) string {
	t.Helper()
	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	var out []byte
	var err error
	if !testutil.Within(30*time.Second, func() bool {
		out, err = exec.Command(cli, "--cluster", "check", addr).CombinedOutput()
		return err == nil && strings.Contains(string(out), "[OK] All nodes agree about slots configuration.") &&
			strings.Contains(string(out), "[OK] All 16384 slots covered.")
	}) {
		t.Errorf("redis-cli --cluster check %s: %v\n%s", addr, err, out)
	}
	return string(out)
}

// saddRetrying adds m to k through rdb, again after an error for up to
// 30 s (SADD is idempotent, so a repeat after an unknown outcome is safe).
func saddRetrying(t *testing.T, ctx context.Context, rdb *redis.ClusterClient, k, m string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := rdb.SAdd(ctx, k, m).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SADD %s %s: %v", k, m, err)
		}
		t.Logf("SADD %s %s: %v (retrying)", k, m, err)
	}
}
