package cluster

import (
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/memlimit"
)

// Eviction (docs/cache.md, invariants §8). Only the leader evicts, and only
// through the log, as it expires: whenever its accounted memory (the state
// machine's, the same on every replica at the same index) is above
// maxmemory, it picks keys from its own access statistics and proposes
// "raftset.evict key version ..."; every replica deletes the keys still at
// those versions. One eviction entry is in flight at a time and the next
// pass measures again after it was applied, so the leader never evicts for
// memory an earlier entry already freed.
//
// While the leader is over the bound with nothing it may evict (noeviction,
// or volatile-* with no key holding a deadline), writes of commands that may
// grow memory (DenyOOM) are refused before proposing, with Redis's -OOM;
// everything else, reads and deletes included, goes on.

const (
	// evictPeriod is how often the leader checks memory without a write
	// waking it; a write proposed while over the bound wakes it at once.
	evictPeriod = 10 * time.Millisecond
	// evictMaxKeys caps one eviction entry.
	evictMaxKeys = 4096
	// evictBudget is a pass's time budget at the default
	// maxmemory-eviction-tenacity (10); it scales with the tenacity as
	// Redis's eviction time limit does, so 100 keeps evicting until the
	// bound is met.
	evictBudget = 25 * time.Millisecond
)

// errOOM is Redis's reply to a command that may grow memory while over
// maxmemory with nothing to evict.
var errOOM = command.Error("OOM command not allowed when used memory > 'maxmemory'.")

// errOOMExec is Redis's reply to EXEC then (execCommandAbort).
var errOOMExec = command.Error("EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.")

// evictor is what eviction uses of the state machine (*fsm.FSM; the
// cluster's test fake has none, and then nothing is evicted).
type evictor interface {
	EvictConfig() fsm.EvictConfig
	UsedMemory() int64
	EvictionCandidates(want int64, max int, nowMs int64, src rand.Source) []fsm.Victim
	Counters() fsm.Counters
	AvgTTL(nowMs int64) int64
}

// evictState is the node's eviction state.
type evictState struct {
	wake chan struct{} // capacity 1
	// stuck is set by a pass that was over the bound and found nothing to
	// evict; writes that may grow memory are refused while it is set and
	// the bound is still exceeded.
	stuck    atomic.Bool
	proposed atomic.Uint64 // keys proposed for eviction by this node
	limitMu  sync.Mutex
	limitSet int64 // the maxmemory GOMEMLIMIT was last derived from
}

func (n *Node) evictor() evictor {
	ev, _ := n.fsm.(evictor)
	return ev
}

func (n *Node) runEvictor() {
	defer n.wg.Done()
	ev := n.evictor()
	if ev == nil {
		return
	}
	t := time.NewTicker(evictPeriod)
	defer t.Stop()
	src := rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid()))
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		case <-n.ev.wake:
		}
		cfg := ev.EvictConfig()
		n.setMemoryLimit(cfg.MaxMemory)
		if cfg.MaxMemory == 0 || n.raft.State() != raft.Leader {
			n.ev.stuck.Store(false)
			continue
		}
		n.evictPass(ev, cfg, src)
	}
}

// evictPass proposes evictions until the accounted memory is under the
// bound, nothing is left to evict, the budget is spent or leadership is lost.
func (n *Node) evictPass(ev evictor, cfg fsm.EvictConfig, src rand.Source) {
	budget := evictBudget * time.Duration(max(cfg.Tenacity, 1)) / 10
	if cfg.Tenacity >= 100 {
		budget = time.Duration(math.MaxInt64)
	}
	deadline := time.Now().Add(budget)
	for !n.isClosing() {
		over := ev.UsedMemory() - cfg.MaxMemory
		if over <= 0 {
			n.ev.stuck.Store(false)
			return
		}
		victims := ev.EvictionCandidates(over, evictMaxKeys, n.nowMs(), src)
		if len(victims) == 0 {
			n.ev.stuck.Store(true)
			return
		}
		n.ev.stuck.Store(false)
		op := command.Cmd(fsm.EvictArgs(victims)...)
		replies := n.w.submit(n.ctx, []command.Op{op}, true)
		if command.IsError(replies[0]) {
			n.log.Debug("eviction proposal failed", "keys", len(victims), "reply", string(replies[0]))
			return
		}
		n.ev.proposed.Add(uint64(len(victims)))
		if time.Now().After(deadline) || n.raft.State() != raft.Leader {
			return
		}
		cfg = ev.EvictConfig()
		if cfg.MaxMemory == 0 {
			return
		}
	}
}

// refuseOOM reports whether the leader refuses a write that may grow
// memory now: the accounted memory is over maxmemory and there is nothing
// to evict (noeviction, or the last pass found no candidate). Over the
// bound, it also wakes the evictor.
func (n *Node) refuseOOM(ev evictor) bool {
	if ev == nil {
		return false
	}
	cfg := ev.EvictConfig()
	if cfg.MaxMemory == 0 || ev.UsedMemory() <= cfg.MaxMemory {
		return false
	}
	if cfg.Policy == fsm.NoEviction {
		return true
	}
	select {
	case n.ev.wake <- struct{}{}:
	default:
	}
	return n.ev.stuck.Load()
}

// denyOOM reports whether the command named name may grow memory.
func denyOOM(name []byte) bool {
	s, ok := command.LookupFold(commandSpecs(), name)
	return ok && s.Has(command.DenyOOM)
}

var commandSpecs = sync.OnceValue(command.Commands)

// oomOp returns the op to log for op when the leader is over the bound with
// nothing to evict: Redis's -OOM for a command that may grow memory (EXEC's
// abort for a transaction holding one), op itself otherwise.
func oomOp(op command.Op) command.Op {
	switch op.Kind {
	case command.OpCommand:
		if len(op.Args) > 0 && denyOOM(op.Args[0]) {
			return command.Op{Kind: command.OpReply, Reply: errOOM}
		}
	case command.OpTx:
		if op.Tx != nil {
			for _, in := range op.Tx.Ops {
				if in.Kind == command.OpCommand && len(in.Args) > 0 && denyOOM(in.Args[0]) {
					return command.Op{Kind: command.OpReply, Reply: errOOMExec}
				}
			}
		}
	}
	return op
}

// setMemoryLimit derives the Go runtime's soft memory limit from maxmemory
// (unless GOMEMLIMIT is set in the environment): 1.5 × maxmemory + 64 MiB,
// room for the dataset, the Raft log cache, copy-on-write chunks of a
// snapshot in progress and connection buffers, so that the collector works
// harder before the heap doubles past the bound instead of letting it.
// maxmemory 0 lifts the limit.
func (n *Node) setMemoryLimit(maxmemory int64) {
	n.ev.limitMu.Lock()
	defer n.ev.limitMu.Unlock()
	if n.ev.limitSet == maxmemory || os.Getenv("GOMEMLIMIT") != "" || n.cfg.InMemory {
		return
	}
	n.ev.limitSet = maxmemory
	limit := int64(math.MaxInt64)
	if maxmemory > 0 {
		limit = maxmemory + maxmemory/2 + 64<<20
	}
	memlimit.SetCeiling(limit) // the limit following the live heap (gc-follow-live) stays under it
}
