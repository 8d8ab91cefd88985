package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// TestFailoverClientReplicaOnly drives go-redis's failover client with
// ReplicaOnly through a leadership transfer and a leader kill: its reads go
// to a follower (ROLE slave) found through SENTINEL REPLICAS, never to the
// killed node (flagged s_down), and see every write made before them
// (follower reads are linearizable).
func TestFailoverClientReplicaOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3, "--sentinel-master-name", "raftset")
	l := leaderOf(t, nodes, nil)
	var sentinels []string
	for _, cp := range nodes {
		sentinels = append(sentinels, cp.addr)
	}
	ctx := context.Background()
	opts := func(replica bool) *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: "raftset", SentinelAddrs: sentinels, ReplicaOnly: replica,
			DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, MaxRetries: 3}
	}
	master, reader := redis.NewFailoverClient(opts(false)), redis.NewFailoverClient(opts(true))
	defer master.Close()
	defer reader.Close()

	// check writes member through the master client. A new replica client
	// must then read it from a follower (ROLE slave, found through SENTINEL
	// REPLICAS). The long-lived replica client keeps its connections across
	// a failover, as go-redis does with Redis too (a connection to a
	// promoted replica stays): it must still see the member.
	check := func(member string) {
		t.Helper()
		testutil.WaitFor(t, 20*time.Second, "SADD "+member+" through the master client", func() bool {
			return master.SAdd(ctx, "s", member).Err() == nil
		})
		var last string
		defer func() {
			if t.Failed() {
				t.Logf("last replica read: %s", last)
			}
		}()
		testutil.WaitFor(t, 20*time.Second, "a new replica client that reads "+member+" from a follower", func() bool {
			fresh := redis.NewFailoverClient(opts(true))
			defer fresh.Close()
			role, err := fresh.Do(ctx, "ROLE").Slice()
			if err != nil || len(role) == 0 || role[0] != "slave" {
				last = fmt.Sprintf("ROLE %v %v", role, err)
				return false
			}
			ok, err := fresh.SIsMember(ctx, "s", member).Result()
			last = fmt.Sprintf("SISMEMBER %v %v", ok, err)
			return err == nil && ok
		})
		// After a kill, go-redis first tries the dead node (as sentinel and as
		// replica) with its dial timeout on every attempt: on a loaded
		// machine that takes a while before it moves on.
		testutil.WaitFor(t, 60*time.Second, "the long-lived replica client to read "+member, func() bool {
			ok, err := reader.SIsMember(ctx, "s", member).Result()
			last = fmt.Sprintf("long-lived SISMEMBER %v %v", ok, err)
			return err == nil && ok
		})
	}
	check("a")

	c := dial(t, l.addr)
	testutil.WaitFor(t, 10*time.Second, "RAFT.TRANSFER", func() bool { return do(t, c, "RAFT.TRANSFER") == "+OK\r\n" })
	var nl *clusterProc
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		nl = leaderOf(t, nodes, nil)
		return nl != l
	})
	check("b")

	nl.p.kill9(t)
	leaderOf(t, nodes, nl)
	check("c")
}
