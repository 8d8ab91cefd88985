package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// TestAbortMoveUnderWrites aborts moves of a range from shard 0 to shard 1
// while clients write to it: one failed after its copy (shard 1 holds the
// imported keys), with the abort itself failing once half way and run
// again; one failed before the copy, aborted through a process that does
// not lead the metadata group. Each abort gives the range back to shard 0
// (writable there again, no key of it left in shard 1), and a repeated
// abort is a no-op. A move failed after its flip cannot be aborted: the
// refusal says so, and running the move again completes it. Every
// acknowledged member is in its set afterwards, and each key lives in
// exactly one shard on every replica.
func TestAbortMoveUnderWrites(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", 3)
	ctx := context.Background()
	const first, last = 1000, 1031
	ws := startSlotWriters(t, hosts, first, last)
	failOnce := func(step string) {
		var once atomic.Bool
		f := func(s string, _ SlotMove) error {
			if s == step && once.CompareAndSwap(false, true) {
				return errors.New("injected failure before " + s)
			}
			return nil
		}
		for _, h := range hosts {
			h.moveFault.Store(&f)
		}
	}
	// run sends a driver command, retrying as a client would while the
	// metadata group has no reachable leader.
	run := func(h *Host, a ...string) string {
		t.Helper()
		var r string
		testutil.WaitFor(t, 20*time.Second, a[1]+" to reach the metadata leader", func() bool {
			r = string(h.Admin(ctx, args(a...)))
			return !strings.HasPrefix(r, "-TRYAGAIN")
		})
		return r
	}
	move := []string{"raft.shard", "moveslots", fmt.Sprint(first), fmt.Sprint(last), "1"}
	abort := []string{"raft.shard", "abort"}
	var follower *Host
	for _, h := range hosts {
		if !h.MetaNode().IsLeader() {
			follower = h
		}
	}
	// rangeKeys counts shard id's keys of the range on h.
	rangeKeys := func(h *Host, id uint32) int {
		n := 0
		f := h.held.Load().nodes[id].fsm.(interface{ CountKeysInSlot(int) int })
		for s := first; s <= last; s++ {
			n += f.CountKeysInSlot(s)
		}
		return n
	}
	// backToShard0: every host routes the range to shard 0 by a map
	// without a move, every replica of shard 1 holds none of its keys,
	// and writes to it are acknowledged again.
	backToShard0 := func(epoch uint64) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, "every host to route the range to shard 0 again", func() bool {
			for _, h := range hosts {
				m := h.Map()
				if m.Epoch < epoch || len(m.Moves) > 0 || m.ShardOf(first) != 0 || m.ShardOf(last) != 0 {
					return false
				}
			}
			return true
		})
		testutil.WaitFor(t, 10*time.Second, "shard 1 to drop its partial import on every replica", func() bool {
			for _, h := range hosts {
				if rangeKeys(h, 1) != 0 {
					return false
				}
			}
			return true
		})
		ws.waitInRange(t, 50)
	}

	ws.waitInRange(t, 100)
	// Failed after the copy: shard 1 holds the range's keys, importing.
	failOnce("flip")
	if r := run(hosts[0], move...); !strings.Contains(r, "injected failure before flip") {
		t.Fatalf("MOVESLOTS with a failure before the flip = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "shard 1 to hold the imported keys", func() bool { return rangeKeys(hosts[0], 1) > 0 })
	failOnce("abort-drop")
	if r := run(hosts[0], abort...); !strings.HasPrefix(r, "-ERR ABORT of the move of slots 1000-1031 from shard 0 to 1: injected failure before abort-drop (run it again to resume)") {
		t.Fatalf("ABORT with a failure before its drop = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "the aborting move in every map", func() bool {
		for _, h := range hosts {
			if mv := h.Map().Moves; len(mv) == 0 || mv[0].Abort == 0 {
				return false
			}
		}
		return true
	})
	if r := run(hosts[0], move...); !strings.Contains(r, "is being aborted: run RAFT.SHARD ABORT to finish that first") {
		t.Errorf("MOVESLOTS of a move being aborted = %q", r)
	}
	epoch := hosts[0].Map().Epoch
	if r := run(hosts[0], abort...); r != "+OK\r\n" {
		t.Fatalf("ABORT run again = %q", r)
	}
	backToShard0(epoch + 1)
	if r := run(hosts[1], abort...); r != "+OK\r\n" {
		t.Errorf("ABORT with no move in progress = %q", r)
	}

	// Failed before the copy, aborted through a metadata follower.
	failOnce("copy")
	if r := run(hosts[0], move...); !strings.Contains(r, "injected failure before copy") {
		t.Fatalf("MOVESLOTS with a failure before the copy = %q", r)
	}
	epoch = hosts[0].Map().Epoch
	if r := run(follower, abort...); r != "+OK\r\n" {
		t.Fatalf("ABORT through %s = %q", follower.self, r)
	}
	backToShard0(epoch + 2)

	// Failed after the flip: only completing it is possible.
	failOnce("drop")
	if r := run(hosts[0], move...); !strings.Contains(r, "injected failure before drop") {
		t.Fatalf("MOVESLOTS with a failure before the drop = %q", r)
	}
	if r := run(hosts[0], abort...); !strings.HasPrefix(r, "-ERR ABORT: slots 1000-1031 already belong to shard 1 (map epoch ") ||
		!strings.HasSuffix(r, "the move can only be completed: RAFT.SHARD MOVESLOTS 1000 1031 1\r\n") {
		t.Fatalf("ABORT after the flip = %q", r)
	}
	if r := run(hosts[0], move...); r != "+OK\r\n" {
		t.Fatalf("MOVESLOTS run again after the refused abort = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "every host to route the range to shard 1", func() bool {
		for _, h := range hosts {
			if m := h.Map(); len(m.Moves) > 0 || m.ShardOf(first) != 1 {
				return false
			}
		}
		return true
	})
	ws.waitInRange(t, 50)
	ws.stopAndCheck(t, hosts, func(s int) uint32 {
		if s >= first && s <= last {
			return 1
		}
		return 0
	})
	if s := slot.Of([]byte(ws.keys[0])); s < first || s > last {
		t.Fatalf("key %s of slot %d outside the range", ws.keys[0], s)
	}
}

// TestAbortFencesAStaleDriver is the driver of an aborted move still
// running on a former metadata leader: it stalls before its freeze, the
// metadata leadership moves, the move is aborted through the new leader,
// then the stale driver sends its freeze at the move's epoch. The abort's
// unfreeze outranks it: the freeze is refused, the driver stops with an
// error that says the move was aborted, the range stays owned by shard 0
// on every replica and writes to it are acknowledged. (Before the abort
// raised the epoch of slots it found owned, the freeze froze the range in
// shard 0 until its next move.)
func TestAbortFencesAStaleDriver(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", 3)
	ctx := context.Background()
	const first, last = 1000, 1031
	ws := startSlotWriters(t, hosts, first, last)
	ws.waitInRange(t, 50)

	// The first driver to reach its freeze waits there for release.
	reached, release := make(chan *Host, 1), make(chan struct{})
	var stalled atomic.Bool
	for _, h := range hosts {
		f := func(step string, _ SlotMove) error {
			if step == "freeze" && stalled.CompareAndSwap(false, true) {
				reached <- h
				<-release
			}
			return nil
		}
		h.moveFault.Store(&f)
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	moved := make(chan string, 1)
	go func() {
		for {
			r := string(hosts[0].Admin(ctx, args("raft.shard", "moveslots", fmt.Sprint(first), fmt.Sprint(last), "1")))
			if !strings.HasPrefix(r, "-TRYAGAIN") || stalled.Load() {
				moved <- r
				return
			}
			time.Sleep(20 * time.Millisecond) // a client's retry back-off, not synchronisation
		}
	}()
	var driver *Host
	select {
	case driver = <-reached:
	case r := <-moved:
		t.Fatalf("MOVESLOTS returned %q before its freeze", r)
	case <-time.After(60 * time.Second):
		t.Fatal("the driver did not reach its freeze")
	}
	moves := driver.Map().Moves
	if len(moves) == 0 {
		t.Fatal("the stalled driver's map shows no move")
	}
	var other *Host
	testutil.WaitFor(t, 30*time.Second, "another metadata leader", func() bool {
		if driver.MetaNode().IsLeader() {
			// Retried: a transfer can time out on a loaded machine.
			if err := driver.MetaNode().raft.LeadershipTransfer().Error(); err != nil {
				t.Logf("metadata leadership transfer from %s: %v", driver.self, err)
			}
		}
		for _, h := range hosts {
			if h != driver && h.MetaNode().IsLeader() {
				other = h
				return true
			}
		}
		return false
	})
	var r string
	testutil.WaitFor(t, 30*time.Second, "ABORT to run on the new metadata leader", func() bool {
		r = string(other.Admin(ctx, args("raft.shard", "abort")))
		return !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN")
	})
	if r != "+OK\r\n" {
		t.Fatalf("ABORT through the new metadata leader %s = %q", other.self, r)
	}
	testutil.WaitFor(t, 10*time.Second, "every host to map the range to shard 0 without a move", func() bool {
		for _, h := range hosts {
			if m := h.Map(); len(m.Moves) > 0 || m.ShardOf(first) != 0 {
				return false
			}
		}
		return true
	})

	close(release)
	var got string
	select {
	case got = <-moved:
	case <-time.After(2 * time.Minute):
		t.Fatal("the stale driver did not stop")
	}
	mv := moves[0]
	want := fmt.Sprintf("-ERR MOVESLOTS %d-%d to shard 1: freeze in shard 0: the move of epoch %d was aborted", first, last, mv.Epoch)
	if !strings.HasPrefix(got, want) {
		t.Errorf("the stale driver's MOVESLOTS = %q, want it to start %q", got, want)
	}
	for _, h := range hosts {
		f := h.held.Load().nodes[0].fsm.(interface{ SlotState(int) (string, uint64) })
		testutil.WaitFor(t, 10*time.Second, h.self+" to apply shard 0's steps", func() bool {
			st, ep := f.SlotState(first)
			return ep > mv.Epoch && st == "owned"
		})
		for s := first; s <= last; s++ {
			if st, ep := f.SlotState(s); st != "owned" {
				t.Errorf("%s: slot %d of shard 0 is %s at epoch %d after the stale freeze", h.self, s, st, ep)
			}
		}
	}
	ws.waitInRange(t, 50)
	ws.stopAndCheck(t, hosts, func(int) uint32 { return 0 })
}

// TestAbortThroughAnOlderShardLeader aborts a move whose source shard's
// members read log format 2 only (simulated: a release from before
// SlotAbort, which cannot decode the abort's step): the shard's leader
// answers that it is not a slot step, and the abort gives the range back
// with the format-2 SlotUnfreeze instead. The abort completes, the range is
// shard 0's and writable, and its slots keep the epoch they had (the
// move's freeze never happened): that release's rule.
func TestAbortThroughAnOlderShardLeader(t *testing.T) {
	hosts := servedHostsWith(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", 3, func(cfg *Config) { cfg.readFormat = 2 })
	ctx := context.Background()
	const first, last = 1000, 1031
	ws := startSlotWriters(t, hosts, first, last)
	ws.waitInRange(t, 50)
	var once atomic.Bool
	f := func(s string, _ SlotMove) error {
		if s == "freeze" && once.CompareAndSwap(false, true) {
			return errors.New("injected failure before " + s)
		}
		return nil
	}
	for _, h := range hosts {
		h.moveFault.Store(&f)
	}
	var r string
	testutil.WaitFor(t, 30*time.Second, "MOVESLOTS to reach the metadata leader", func() bool {
		r = string(hosts[0].Admin(ctx, args("raft.shard", "moveslots", fmt.Sprint(first), fmt.Sprint(last), "1")))
		return !strings.HasPrefix(r, "-TRYAGAIN")
	})
	if !strings.Contains(r, "injected failure before freeze") {
		t.Fatalf("MOVESLOTS with a failure before the freeze = %q", r)
	}
	testutil.WaitFor(t, 30*time.Second, "ABORT to reach the metadata leader", func() bool {
		r = string(hosts[1].Admin(ctx, args("raft.shard", "abort")))
		return !strings.HasPrefix(r, "-TRYAGAIN") && !strings.HasPrefix(r, "-CLUSTERDOWN")
	})
	if r != "+OK\r\n" {
		t.Fatalf("ABORT with shard 0 reading log format 2 = %q", r)
	}
	testutil.WaitFor(t, 10*time.Second, "every host to map the range to shard 0 without a move", func() bool {
		for _, h := range hosts {
			if m := h.Map(); len(m.Moves) > 0 || m.ShardOf(first) != 0 {
				return false
			}
		}
		return true
	})
	for _, h := range hosts {
		f := h.held.Load().nodes[0].fsm.(interface{ SlotState(int) (string, uint64) })
		for s := first; s <= last; s++ {
			if st, ep := f.SlotState(s); st != "owned" || ep != 0 {
				t.Errorf("%s: slot %d of shard 0 is %s at epoch %d, want owned at 0 (unfrozen in format 2)", h.self, s, st, ep)
			}
		}
	}
	ws.waitInRange(t, 50)
	ws.stopAndCheck(t, hosts, func(int) uint32 { return 0 })
}
