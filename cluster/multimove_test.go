package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// fourShards: every host holds every shard, so that a writer's retry finds
// a slot's shard through any host.
const fourShards = "0:0-4095:n1,n2,n3 1:4096-8191:n1,n2,n3 2:8192-12287:n1,n2,n3 3:12288-16383:n1,n2,n3"

// patientTimers are twice production's Raft timers, every host test's
// (hostConfig): five groups on three hosts, under the race detector on a
// loaded machine, held elections all the time with 200 ms timers, and a
// group of two voters lost its leader at every heartbeat slower than a
// 100 ms lease.
func patientTimers(cfg *Config) {
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
}

// moveGate holds the drivers of some moves before one step until the test
// releases them: that each reached it shows the moves in progress at once.
type moveGate struct {
	step    string
	mu      sync.Mutex
	arrived map[int]bool // by the move's first slot
	changed chan struct{}
	release chan struct{}
	fail    map[int]bool // moves whose driver fails at the step instead
}

func newMoveGate(step string) *moveGate {
	return &moveGate{step: step, arrived: map[int]bool{}, changed: make(chan struct{}, 16), release: make(chan struct{}), fail: map[int]bool{}}
}

// install makes the gate every host's move fault.
func (g *moveGate) install(hosts []*Host) {
	f := func(step string, mv SlotMove) error {
		if step != g.step {
			return nil
		}
		g.mu.Lock()
		g.arrived[mv.First] = true
		fail := g.fail[mv.First]
		g.mu.Unlock()
		g.changed <- struct{}{}
		if fail {
			return errors.New("injected failure before " + step)
		}
		select {
		case <-g.release:
			return nil
		case <-time.After(2 * time.Minute):
			return errors.New("the test never released the gate")
		}
	}
	for _, h := range hosts {
		h.moveFault.Store(&f)
	}
}

// wait waits until the moves starting at firsts reached the step.
func (g *moveGate) wait(t *testing.T, firsts ...int) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		g.mu.Lock()
		all := true
		for _, f := range firsts {
			all = all && g.arrived[f]
		}
		g.mu.Unlock()
		if all {
			return
		}
		select {
		case <-g.changed:
		case <-deadline:
			t.Fatalf("the moves of %v did not all reach %s", firsts, g.step)
		}
	}
}

// runMoveSlots sends RAFT.SHARD MOVESLOTS through h as a client would,
// again while no metadata leader is reachable.
func runMoveSlots(t *testing.T, h *Host, first, last int, to uint32) string {
	return adminRetrying(t, h, "raft.shard", "moveslots", fmt.Sprint(first), fmt.Sprint(last), fmt.Sprint(to))
}

// runAbort sends RAFT.SHARD ABORT [first last] through h.
func runAbort(t *testing.T, h *Host, rng ...string) string {
	return adminRetrying(t, h, append([]string{"raft.shard", "abort"}, rng...)...)
}

// adminRetrying runs an admin command through h, again while it answers
// -TRYAGAIN (no reachable metadata leader: an election under load).
func adminRetrying(t *testing.T, h *Host, a ...string) string {
	var r string
	testutil.WaitFor(t, 60*time.Second, a[1]+" to reach the metadata leader", func() bool {
		r = string(h.Admin(context.Background(), args(a...)))
		return !strings.HasPrefix(r, "-TRYAGAIN")
	})
	return r
}

// waitHostMaps waits until every host's map satisfies ok.
func waitHostMaps(t *testing.T, hosts []*Host, what string, ok func(*ShardMap) bool) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, what, func() bool {
		for _, h := range hosts {
			if !ok(h.Map()) {
				return false
			}
		}
		return true
	})
}

// TestSeveralMovesAtOnce runs two moves at the same time between different
// shard pairs (0→1, 2→3), then two out of the same shard (0→2, 0→3), each
// pair held before its flip until both drivers got there (both ranges
// frozen and copied at once, both moves in every host's map), while
// clients write to every moving range; a move overlapping one in progress
// is refused, and ABORT without a range refuses to pick one of two. Then
// every acknowledged member is present and each key lives only in the
// shard the map names, on every replica.
func TestSeveralMovesAtOnce(t *testing.T) {
	hosts := servedHostsWith(t, fourShards, 3, patientTimers)
	type mv struct {
		first, last int
		from, to    uint32
	}
	rounds := [][2]mv{
		{{1000, 1031, 0, 1}, {9000, 9031, 2, 3}},
		{{2000, 2031, 0, 2}, {3000, 3031, 0, 3}},
	}
	var ranges [][2]int
	for _, r := range rounds {
		for _, m := range r {
			ranges = append(ranges, [2]int{m.first, m.last})
		}
	}
	warmUp(t, hosts)
	// Held before their flips, the ranges stay frozen for a while: the
	// writers wait it out.
	ws := startSlotWritersIn(t, hosts, 40000, ranges...)
	ws.waitWrites(t, 100)
	owner := map[[2]int]uint32{}
	for i, round := range rounds {
		g := newMoveGate("flip")
		g.install(hosts)
		replies := make(chan string, 2)
		for j, m := range round {
			go func() { replies <- runMoveSlots(t, hosts[j], m.first, m.last, m.to) }()
		}
		g.wait(t, round[0].first, round[1].first)
		waitHostMaps(t, hosts, "both moves in every map", func(m *ShardMap) bool {
			return len(m.Moves) == 2 && m.Moves[0].Flip == 0 && m.Moves[1].Flip == 0
		})
		if enc := hosts[0].Map().Encode(); strings.Count(enc, "\nmoving ") != 2 || strings.Contains(enc, "\nmove ") {
			t.Errorf("round %d: the map of two moves = %q, want two moving lines", i, enc)
		}
		a, b := round[0], round[1]
		if r := runMoveSlots(t, hosts[2], a.first+10, a.last+10, 3); r != fmt.Sprintf("-ERR MOVESLOTS %d-%d to shard 3: slots %d-%d are moving from shard %d to %d: complete that move first (run it again to resume)\r\n", a.first+10, a.last+10, a.first, a.last, a.from, a.to) {
			t.Errorf("round %d: MOVESLOTS overlapping a move = %q", i, r)
		}
		want := fmt.Sprintf("-ERR ABORT: 2 moves are in progress (slots %d-%d from shard %d to %d, slots %d-%d from shard %d to %d): name one: RAFT.SHARD ABORT <first> <last> (%d-%d, %d-%d)\r\n",
			a.first, a.last, a.from, a.to, b.first, b.last, b.from, b.to, a.first, a.last, b.first, b.last)
		if r := runAbort(t, hosts[1]); r != want {
			t.Errorf("round %d: ABORT of two moves = %q, want %q", i, r, want)
		}
		writeOnce(t, hosts[i], keyIn(t, "free", 5000, 5100), fmt.Sprint("m", i)) // a slot no move holds stays writable
		close(g.release)
		for range round {
			if r := <-replies; r != "+OK\r\n" {
				t.Errorf("round %d: MOVESLOTS = %q", i, r)
			}
		}
		for _, m := range round {
			owner[[2]int{m.first, m.last}] = m.to
		}
		waitHostMaps(t, hosts, "every host to route both ranges by the new map", func(m *ShardMap) bool {
			for _, mv := range round {
				if m.ShardOf(mv.first) != mv.to || m.ShardOf(mv.last) != mv.to || m.ShardOf(mv.first-1) != mv.from {
					return false
				}
			}
			return len(m.Moves) == 0
		})
		ws.waitInRange(t, 50)
	}
	ws.stopAndCheck(t, hosts, func(s int) uint32 {
		for rg, to := range owner {
			if s >= rg[0] && s <= rg[1] {
				return to
			}
		}
		return uint32(s / 4096)
	})
}

// TestAbortOneOfTwoMoves: of two moves out of shard 0 in progress at once,
// one's driver fails before its flip while the other is held there; ABORT
// of the failed one's range undoes it and the other then completes. ABORT
// of a range inside a move names that move; of a range no move holds, and
// again of the aborted one, it does nothing.
func TestAbortOneOfTwoMoves(t *testing.T) {
	hosts := servedHostsWith(t, fourShards, 3, patientTimers)
	const aFirst, aLast, bFirst, bLast = 1000, 1031, 2000, 2031
	warmUp(t, hosts)
	ws := startSlotWritersIn(t, hosts, 40000, [2]int{aFirst, aLast}, [2]int{bFirst, bLast})
	ws.waitWrites(t, 100)
	g := newMoveGate("flip")
	g.fail[aFirst] = true
	g.install(hosts)
	held := make(chan string, 1)
	go func() { held <- runMoveSlots(t, hosts[0], bFirst, bLast, 2) }()
	g.wait(t, bFirst)
	if r := runMoveSlots(t, hosts[1], aFirst, aLast, 1); r != fmt.Sprintf("-ERR MOVESLOTS %d-%d to shard 1: injected failure before flip (run it again to resume)\r\n", aFirst, aLast) {
		t.Fatalf("MOVESLOTS failing before its flip = %q", r)
	}
	waitHostMaps(t, hosts, "both moves in every map", func(m *ShardMap) bool { return len(m.Moves) == 2 })
	if r := runAbort(t, hosts[2], "2005", "2010"); r != "-ERR ABORT: no move of slots 2005-2010, but the move of slots 2000-2031 from shard 0 to 2 overlaps them: RAFT.SHARD ABORT 2000 2031\r\n" {
		t.Errorf("ABORT inside a move = %q", r)
	}
	if r := runAbort(t, hosts[2], "5", "1"); r != "-ERR ABORT: 5 1 is not a slot range (slots are 0-16383)\r\n" {
		t.Errorf("ABORT 5 1 = %q", r)
	}
	for _, rng := range [][]string{{"1000", "1031"}, {"1000", "1031"}, {"500", "600"}} {
		if r := runAbort(t, hosts[2], rng...); r != "+OK\r\n" {
			t.Errorf("ABORT %v = %q", rng, r)
		}
	}
	waitHostMaps(t, hosts, "the aborted move gone, the other in every map", func(m *ShardMap) bool {
		return len(m.Moves) == 1 && m.Moves[0].First == bFirst && m.ShardOf(aFirst) == 0
	})
	writeOnce(t, hosts[0], keyIn(t, "back", aFirst, aLast), "m") // the aborted range is writable again
	close(g.release)
	if r := <-held; r != "+OK\r\n" {
		t.Errorf("MOVESLOTS of the held move = %q", r)
	}
	waitHostMaps(t, hosts, "the held move complete in every map", func(m *ShardMap) bool {
		return len(m.Moves) == 0 && m.ShardOf(bFirst) == 2 && m.ShardOf(bLast) == 2 && m.ShardOf(aLast) == 0
	})
	if r := runAbort(t, hosts[0]); r != "+OK\r\n" {
		t.Errorf("ABORT with no move = %q", r)
	}
	ws.stopAndCheck(t, hosts, func(s int) uint32 {
		if s >= bFirst && s <= bLast {
			return 2
		}
		return uint32(s / 4096)
	})
}

// writeOnce adds member to key through h, again while the answer is
// -TRYAGAIN (a map that a refresh brings up to date) or -CLUSTERDOWN (an
// election), and fails the test unless it is acknowledged within 30 s
// (:0 once an attempt's outcome was unknown: it may have added it).
func writeOnce(t *testing.T, h *Host, key, member string) {
	t.Helper()
	var r string
	unknown := false
	testutil.WaitFor(t, 30*time.Second, "SADD "+key+" to be acknowledged", func() bool {
		rep, _ := h.WriteIndexed(context.Background(), []command.Op{cmd("sadd", key, member)})
		r = string(rep[0])
		unknown = unknown || strings.HasPrefix(r, "-CLUSTERDOWN")
		return !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN")
	})
	if r != ":1\r\n" && !(unknown && r == ":0\r\n") {
		t.Errorf("SADD %s %s = %q", key, member, r)
	}
}

// warmUp writes a key in each of fourShards' shards, so that the writers
// start once every shard has a leader (elections of five groups on a
// loaded machine can take longer than their first wait).
func warmUp(t *testing.T, hosts []*Host) {
	t.Helper()
	for id := range 4 {
		writeOnce(t, hosts[0], keyIn(t, "warm", id*4096+100, id*4096+999), "m")
	}
}
