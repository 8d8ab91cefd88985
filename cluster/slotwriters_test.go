package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// slotWriters are clients writing to keys of a range of slots (and one key
// outside it) while the range moves: each SADDs members of its own through
// any host, retrying on -TRYAGAIN and -MOVED (every host holds every
// shard: the retry finds the slot's current shard); -CLUSTERDOWN leaves a
// member indeterminate.
type slotWriters struct {
	keys    []string // 24 keys of the ranges, then outside
	outside string   // a key of a slot below the ranges

	mu      sync.Mutex
	acked   map[string]map[string]bool
	maybe   map[string]map[string]bool
	stop    atomic.Bool
	wg      sync.WaitGroup
	sent    atomic.Int64
	inRange atomic.Int64 // acknowledged writes to keys of the range
}

func startSlotWriters(t *testing.T, hosts []*Host, first, last int) *slotWriters {
	t.Helper()
	return startSlotWritersIn(t, hosts, 2000, [2]int{first, last})
}

// startSlotWritersIn is startSlotWriters over several ranges (several
// moves at once), 24 keys shared evenly between them, and the outside key
// below the lowest; the first range must not start at slot 0. A write
// gives up (an error) after tries -TRYAGAIN or -MOVED answers.
func startSlotWritersIn(t *testing.T, hosts []*Host, tries int, ranges ...[2]int) *slotWriters {
	t.Helper()
	ws := &slotWriters{acked: map[string]map[string]bool{}, maybe: map[string]map[string]bool{}}
	low := slot.Count
	for j, rg := range ranges {
		low = min(low, rg[0])
		for i, n := 0, 0; n < 24/len(ranges)+min(1, max(0, 24%len(ranges)-j)); i++ {
			k := fmt.Sprintf("k%d", i)
			if s := slot.Of([]byte(k)); s >= rg[0] && s <= rg[1] {
				ws.keys = append(ws.keys, k)
				n++
			}
		}
	}
	ws.outside = keyIn(t, "out", 0, low-1)
	ws.keys = append(ws.keys, ws.outside)
	ctx := context.Background()
	for w := range 4 {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; !ws.stop.Load(); i++ {
				k, m := ws.keys[r.IntN(len(ws.keys))], fmt.Sprintf("w%d-%d", w, i)
				for try := 0; ; try++ {
					h := hosts[r.IntN(len(hosts))]
					rep, _ := h.WriteIndexed(ctx, []command.Op{cmd("sadd", k, m)})
					got := string(rep[0])
					if got == ":1\r\n" {
						ws.record(ws.acked, k, m)
						ws.sent.Add(1)
						if k != ws.outside {
							ws.inRange.Add(1)
						}
						break
					}
					if strings.HasPrefix(got, "-TRYAGAIN") || strings.HasPrefix(got, "-MOVED") {
						if try > tries {
							t.Errorf("SADD %s: still %q after %d tries", k, got, try)
							return
						}
						time.Sleep(5 * time.Millisecond) // a client's retry back-off, not synchronisation
						continue
					}
					ws.record(ws.maybe, k, m)
					break
				}
			}
		}()
	}
	t.Cleanup(func() { ws.stop.Store(true); ws.wg.Wait() })
	return ws
}

func (ws *slotWriters) record(into map[string]map[string]bool, k, m string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if into[k] == nil {
		into[k] = map[string]bool{}
	}
	into[k][m] = true
}

// waitWrites waits for n more acknowledged writes.
func (ws *slotWriters) waitWrites(t *testing.T, n int64) {
	t.Helper()
	from := ws.sent.Load()
	testutil.WaitFor(t, 30*time.Second, "writes to go on", func() bool { return ws.sent.Load() >= from+n })
}

// waitInRange waits for n more acknowledged writes to keys of the range.
func (ws *slotWriters) waitInRange(t *testing.T, n int64) {
	t.Helper()
	from := ws.inRange.Load()
	testutil.WaitFor(t, 30*time.Second, "writes to the range to be acknowledged", func() bool { return ws.inRange.Load() >= from+n })
}

// stopAndCheck stops the writers, then checks on every host that every
// acknowledged member is in its set and nothing else but indeterminate
// ones, and that each key's slot has keys in exactly the shard owner
// names, on every replica.
func (ws *slotWriters) stopAndCheck(t *testing.T, hosts []*Host, owner func(s int) uint32) {
	t.Helper()
	ws.stop.Store(true)
	ws.wg.Wait()
	ctx := context.Background()
	for _, h := range hosts {
		for _, k := range ws.keys {
			testutil.WaitFor(t, 10*time.Second, h.self+" to apply every write to "+k, func() bool {
				r := h.ReadBatch(ctx, [][][]byte{args("smembers", k)}, false)[0]
				v, err := respwire.Parse(r)
				if err != nil || v.Kind != '*' {
					return false
				}
				got := map[string]bool{}
				for _, e := range v.Elems {
					got[e.Str] = true
				}
				ws.mu.Lock()
				defer ws.mu.Unlock()
				for m := range ws.acked[k] {
					if !got[m] {
						return false
					}
				}
				for m := range got {
					if !ws.acked[k][m] && !ws.maybe[k][m] {
						t.Errorf("%s: %s holds %s, never written", h.self, k, m)
					}
				}
				return true
			})
			s := slot.Of([]byte(k))
			want := owner(s)
			for id, n := range h.held.Load().nodes {
				f := n.fsm.(interface{ CountKeysInSlot(int) int })
				has := f.CountKeysInSlot(s) > 0
				if has != (id == want) {
					t.Errorf("%s: shard %d holds keys of slot %d: %v (the slot is shard %d's)", h.self, id, s, has, want)
				}
			}
		}
	}
}
