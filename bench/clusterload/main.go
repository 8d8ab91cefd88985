// Command clusterload sends a fixed number of SADDs of random keys and
// members, spread over every hash slot (no {tag}), through go-redis's
// cluster client: each pipeline is split by slot and sent to each slot's
// master, and -MOVED is followed as any cluster-aware client does. With
// -cluster=false it uses a plain client on the first address, so that a
// single server (the redis-server anchor) gets the same client and load.
//
//	go run ./bench/clusterload -addrs 127.0.0.1:7001,127.0.0.1:7002 -n 10000000 -c 50 -P 10 -r 200000
//
// Keys and members are __rand_int__ as redis-benchmark writes it (12-digit
// zero-padded, below -r): the seed dataset is -n 10000000 -r 200000.
// Output: one line, "n=.. errors=.. secs=.. rate=..". Exits 1 when more
// than -max-errors commands failed (errors are counted, the first one
// printed): a long load on a busy machine may see a leader change, whose
// in-flight writes are answered -CLUSTERDOWN (outcome unknown).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addrs := flag.String("addrs", "127.0.0.1:6379", "comma-separated seed addresses")
	cluster := flag.Bool("cluster", true, "cluster client (CLUSTER SLOTS, -MOVED); false: a plain client on the first address")
	n := flag.Int64("n", 1000000, "SADDs in total")
	conns := flag.Int("c", 50, "concurrent clients, each with one pipeline in flight")
	pipe := flag.Int("P", 10, "SADDs per pipeline")
	keyspace := flag.Int("r", 200000, "keys and members are below this")
	password := flag.String("a", "", "AUTH password")
	maxErrors := flag.Int64("max-errors", 0, "exit 1 when more commands than this failed")
	flag.Parse()
	if *conns <= 0 || *pipe <= 0 || *n <= 0 || *keyspace <= 0 {
		fmt.Fprintln(os.Stderr, "usage: clusterload [-addrs a,b] [-cluster=false] [-n N] [-c n] [-P n] [-r n] [-a pass]")
		os.Exit(2)
	}
	list := strings.Split(*addrs, ",")
	var rdb redis.Cmdable
	if *cluster {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: list, Password: *password, MaxRedirects: 8,
			PoolSize: *conns, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
		defer c.Close()
		rdb = c
	} else {
		c := redis.NewClient(&redis.Options{Addr: list[0], Password: *password, PoolSize: *conns,
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
		defer c.Close()
		rdb = c
	}
	ctx := context.Background()
	// A cluster that just elected its leaders may still refuse a first
	// connection or two; the load starts once one PING succeeds.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "clusterload: PING %s: %v\n", list[0], err)
			os.Exit(1)
		}
	}
	var next, errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := next.Add(int64(*pipe)) - int64(*pipe)
				if from >= *n {
					return
				}
				count := min(int64(*pipe), *n-from)
				cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for range count {
						p.SAdd(ctx, fmt.Sprintf("%012d", rand.IntN(*keyspace)), fmt.Sprintf("%012d", rand.IntN(*keyspace)))
					}
					return nil
				})
				for _, c := range cmds {
					if err := c.Err(); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	fmt.Printf("n=%d errors=%d secs=%.2f rate=%.0f\n", *n, errs.Load(), secs, float64(*n)/secs)
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "clusterload: first error: %s\n", e)
	}
	if errs.Load() > *maxErrors {
		os.Exit(1)
	}
}
