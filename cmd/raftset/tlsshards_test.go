package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// TestTLSClusterShards: three processes hosting three shards each with
// tls-cluster yes. Every group's Raft traffic shares one mutual-TLS Raft
// port (raftmux under the TLS stream layer), and the calls a process makes
// to another's replica of a shard (raftset.shard, leader queries) go to its
// TLS client port. A go-redis ClusterClient over TLS, following -MOVED to
// the published TLS addresses, reads and writes keys of every shard.
func TestTLSClusterShards(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	pki := newTestPKI(t, t.TempDir(), "shards")
	nodes := make([]*tlsClusterNode, 3)
	var peers, tlsAddrs []string
	for i := range nodes {
		nodes[i] = newTLSClusterNode(t, pki, fmt.Sprintf("n%d", i+1))
		peers = append(peers, nodes[i].id+"="+nodes[i].raftAdr)
		tlsAddrs = append(tlsAddrs, nodes[i].tlsAddr)
	}
	for _, n := range nodes {
		n.args = append(n.args, "--peers", strings.Join(peers, ","), "--cluster-enabled", "yes", "--shard-map", threeShards)
		n.start(t)
	}
	published := map[string]bool{}
	for _, a := range tlsAddrs {
		published[a] = true
	}
	// Every node reports the three shards, each with its three replicas at
	// their TLS addresses: what the processes published in each shard's log.
	testutil.WaitFor(t, 30*time.Second, "every node to report 3 shards of 3 replicas at TLS addresses", func() bool {
		for _, n := range nodes {
			rep, ok := clusterSlots(n.addr)
			if !ok || len(rep.Elems) != 3 {
				return false
			}
			for _, rng := range rep.Elems {
				if len(rng.Elems) != 5 {
					return false
				}
				for _, m := range rng.Elems[2:] {
					if !published[slotNodeAddr(m)] {
						return false
					}
				}
			}
		}
		return true
	})

	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: tlsAddrs, MaxRedirects: 8,
		TLSConfig:   pki.clientTLS(t, "client"),
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer rdb.Close()
	c := dial(t, nodes[0].addr)
	shards := map[int]bool{}
	for i := range 200 {
		k := fmt.Sprintf("tls:%d", i)
		if err := rdb.SAdd(ctx, k, "a", "b").Err(); err != nil {
			t.Fatalf("SADD %s over TLS: %v", k, err)
		}
		shards[min(keySlot(t, c, k)/5461, 2)] = true
	}
	if len(shards) != 3 {
		t.Fatalf("the keys reached %d of 3 shards", len(shards))
	}
	for i := range 200 {
		k := fmt.Sprintf("tls:%d", i)
		if n, err := rdb.SCard(ctx, k).Result(); err != nil || n != 2 {
			t.Fatalf("SCARD %s over TLS = %d, %v", k, n, err)
		}
	}
	// A process that does not lead a key's shard answers -MOVED to the
	// leader's TLS address, and a keyless command reaches every shard's
	// replica on this process.
	for _, n := range nodes {
		r := do(t, dial(t, n.addr), "SCARD", "tls:7")
		if r == ":2\r\n" {
			continue
		}
		_, addr, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(r, "-MOVED ")), " ")
		if !strings.HasPrefix(r, "-MOVED ") || !ok || !published[addr] {
			t.Errorf("%s: SCARD tls:7 = %q, want :2 or -MOVED to a TLS address", n.id, r)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "DBSIZE of 200 on every process", func() bool {
		for _, n := range nodes {
			cn, err := testutil.DialRESP(n.addr, 2*time.Second)
			if err != nil {
				return false
			}
			r, err := cn.Do("DBSIZE")
			cn.Close()
			if err != nil || r != ":200\r\n" {
				return false
			}
		}
		return true
	})
}
