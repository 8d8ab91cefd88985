package cluster

import (
	"runtime/debug"
	"runtime/metrics"
	"time"

	"raftset/fsm"
)

// Memory defragmentation (fsm/defrag.go) runs on every node: it decides
// where the node's own bytes live, not what it holds. The loop gives the
// state machine a short step every defragStep (each holds the write lock for
// about a millisecond per 4096 keys) and rests defragRest between cycles, so
// on the seed dataset a cycle takes about 2 s and costs under 5% of a core;
// a key must stay unchanged for three cycles (fsm.stableCycles) to move.
// When the packing catches up after moving a lot, the spans it emptied are
// handed back to the OS at once rather than over the runtime's slow
// scavenging minutes.
const (
	defragStep       = 20 * time.Millisecond
	defragRest       = time.Second
	defragBudget     = 4096 // keys per step
	defragReturnsOS  = 8 << 20
	defragQuiet      = 1 << 20
	defragIdleReturn = 2 << 20
	// defragIdleGC: while the node takes no writes, a collection after
	// every this much packing, and the free pages go back to the OS. The
	// packing empties the heap's spans in address order (fsm's drain), but
	// their pages serve the next slabs only once a collection has freed the
	// blobs that left them; without one the collector waited for half the
	// heap to be allocated, and the slabs took new pages meanwhile. A
	// collection alone left the freed pages resident: a slab needs 32
	// contiguous pages, the spans emptied between two collections are not
	// always that, and the soft memory limit, raised by the part-empty spans
	// the packing leaves behind, did not make the runtime return them. After
	// the seed's 10M SADDs on a loaded machine RSS rose from 260 to 330 MB
	// during the packing while the heap's objects stayed under 180 MB
	// (docs/benchmarks.md, session 10).
	defragIdleGC = 16 << 20
)

type defragmenter interface {
	Defrag(budget int) fsm.DefragStats
}

func (n *Node) runDefrag() {
	defer n.wg.Done()
	d, ok := n.fsm.(defragmenter)
	if !ok {
		return
	}
	t := time.NewTimer(defragRest)
	defer t.Stop()
	var moved, sinceReturn, sinceGC int64
	stepApplied := n.fsm.AppliedIndex()
	// lastApplied is the applied index at the end of the previous cycle;
	// idleBase what heapReclaimable was after the latest return.
	var lastApplied, lastReads, idleBase uint64
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		st := d.Defrag(defragBudget)
		moved += st.Moved
		sinceGC += st.Moved
		if applied := n.fsm.AppliedIndex(); applied != stepApplied {
			stepApplied, sinceGC = applied, 0
		} else if sinceGC >= defragIdleGC {
			debug.FreeOSMemory()
			sinceGC = 0
		}
		n.st.defragMoved.Add(st.Moved)
		n.st.defragSlabBytes.Store(st.SlabBytes)
		next := defragStep
		if st.CycleDone || st.SnapshotRan {
			next = defragRest
		}
		if st.CycleDone {
			n.st.defragCycles.Add(1)
			n.log.Debug("defrag cycle", "moved", moved, "slabs", st.Slabs, "slab_bytes", st.SlabBytes, "flood", st.Flood)
			// Once the packing has caught up (a cycle with little left to
			// move), the spans it emptied go back to the OS.
			sinceReturn += moved
			//
			// A node that stopped taking writes also collects and returns,
			// whenever what it could give back grew by defragIdleReturn
			// since the last time (at rest, the garbage of the last writes,
			// then the blobs the packing replaced, would otherwise count in
			// used_memory until the runtime's two-minute forced collection,
			// and their spans in RSS for longer).
			//
			// Idle means no writes and no reads: under a read load the
			// garbage of the reads passed defragIdleReturn every cycle, and
			// each return (a forced collection, every free page given back
			// and faulted in again by the next allocations) cost the
			// readers about 8% of the node's CPU (docs/benchmarks.md).
			applied, reads := n.fsm.AppliedIndex(), n.rd.batches.Load()
			idle := applied == lastApplied && reads == lastReads
			lastApplied, lastReads = applied, reads
			if !idle {
				idleBase = 0
			}
			if moved < defragQuiet && (sinceReturn >= defragReturnsOS ||
				idle && heapReclaimable() >= idleBase+defragIdleReturn) {
				debug.FreeOSMemory()
				sinceReturn, idleBase = 0, heapReclaimable()
			}
			moved = 0
		}
		t.Reset(next)
	}
}

// heapReclaimable estimates what a collection and scavenge would give back:
// the heap objects beyond those live at the last collection (garbage since),
// plus free heap memory not yet returned to the OS.
func heapReclaimable() uint64 {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(samples)
	var v [3]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	var garbage uint64
	if v[0] > v[1] {
		garbage = v[0] - v[1]
	}
	return garbage + v[2]
}
