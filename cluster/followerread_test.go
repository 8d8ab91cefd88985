package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Concurrent linearizable reads at a follower share read-index calls to the
// leader, and each still sees every write acknowledged before it started.
func TestFollowerReadsShareReadIndexCalls(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0]
	ctx := context.Background()
	const readers, rounds = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	before := f.node.rd.fwdCalls.Load()
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("r%d", r)
			for i := range rounds {
				// Acknowledged by the leader, then read at the follower
				// (and half the time in a batch, as a pipeline is).
				if got := write1(t, l.node, "sadd", key, fmt.Sprint(i)); got != ":1\r\n" {
					errs <- fmt.Errorf("SADD %s %d = %q", key, i, got)
					return
				}
				want := fmt.Sprintf(":%d\r\n", i+1)
				var got string
				if i%2 == 0 {
					got = string(f.node.Read(ctx, args("scard", key), false))
				} else {
					out := f.node.ReadBatch(ctx, [][][]byte{args("sismember", key, fmt.Sprint(i)), args("scard", key)}, false)
					if string(out[0]) != ":1\r\n" {
						errs <- fmt.Errorf("follower SISMEMBER %s %d right after the ack = %q", key, i, out[0])
						return
					}
					got = string(out[1])
				}
				if got != want {
					errs <- fmt.Errorf("follower SCARD %s after %d acknowledged adds = %q, want %q", key, i+1, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	calls := f.node.rd.fwdCalls.Load() - before
	t.Logf("%d follower reads, %d read-index calls", readers*rounds, calls)
	if calls == 0 || calls >= readers*rounds {
		t.Errorf("%d read-index calls for %d concurrent follower reads: not shared", calls, readers*rounds)
	}
}
