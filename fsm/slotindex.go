package fsm

import (
	"slices"

	"raftset/internal/slot"
)

// slotIndex groups the keys by hash slot, as Redis Cluster's slot_to_keys:
// CLUSTER COUNTKEYSINSLOT in O(1), GETKEYSINSLOT in O(count), and the keys a
// slot migration exports or drops without walking the keyspace.
//
// It is intrusive: each slot is a doubly linked list threaded through the
// keyspace's dense positions (next and prev, int32 each, in pages parallel
// to the chunks), so it costs 8 bytes a key plus 128 KiB of heads and
// counts, and allocates nothing per key. A key's slot is not stored: it is
// recomputed (CRC16 of a short key) on removal. New keys go to the head of
// their slot's list, as in Redis 7.0, so GETKEYSINSLOT lists the newest
// first.
//
// The index is derived state, like the keyspace's deadline table: a
// keyspace restored from a snapshot rebuilds it in dense order, so the
// order of a slot's list can differ between a restored replica and one
// that replayed the log. Nothing replicated depends on that order: the
// state machine's own uses (export, drop) sort the keys they take from it
// (slotKeys).
type slotIndex struct {
	head  [slot.Count]int32 // first position of each slot's list, -1 when empty
	count [slot.Count]uint32
	pages []*slotPage // pages[pos>>chunkShift] holds pos's links
}

type slotPage struct {
	next, prev [chunkLen]int32
}

const noPos = -1

func newSlotIndex() *slotIndex {
	x := &slotIndex{}
	for i := range x.head {
		x.head[i] = noPos
	}
	return x
}

func (x *slotIndex) link(pos int) (next, prev *int32) {
	p := x.pages[pos>>chunkShift]
	i := pos & chunkMask
	return &p.next[i], &p.prev[i]
}

// add links the key at pos, the keyspace's new last position, into slot s.
func (x *slotIndex) add(pos, s int) {
	if pos>>chunkShift == len(x.pages) {
		x.pages = append(x.pages, new(slotPage))
	}
	next, prev := x.link(pos)
	*next, *prev = x.head[s], noPos
	if h := x.head[s]; h != noPos {
		_, hp := x.link(int(h))
		*hp = int32(pos)
	}
	x.head[s] = int32(pos)
	x.count[s]++
}

// unlink takes pos out of slot s's list.
func (x *slotIndex) unlink(pos, s int) {
	next, prev := x.link(pos)
	if *prev != noPos {
		pn, _ := x.link(int(*prev))
		*pn = *next
	} else {
		x.head[s] = *next
	}
	if *next != noPos {
		_, np := x.link(int(*next))
		*np = *prev
	}
	x.count[s]--
}

// remove mirrors keyspace.remove: the key at pos (slot s) leaves, and the
// key at last (slot lastSlot) moves into pos.
func (x *slotIndex) remove(pos, s, last, lastSlot int) {
	x.unlink(pos, s)
	if pos != last {
		lnext, lprev := x.link(last)
		next, prev := x.link(pos)
		*next, *prev = *lnext, *lprev
		if *prev != noPos {
			pn, _ := x.link(int(*prev))
			*pn = int32(pos)
		} else {
			x.head[lastSlot] = int32(pos)
		}
		if *next != noPos {
			_, np := x.link(int(*next))
			*np = int32(pos)
		}
	}
	if last&chunkMask == 0 {
		x.pages[len(x.pages)-1] = nil
		x.pages = x.pages[:len(x.pages)-1]
	}
}

// positions appends the positions of slot s's keys, in list order, up to
// limit of them (limit < 0: all).
func (x *slotIndex) positions(dst []int, s, limit int) []int {
	for p := x.head[s]; p != noPos && limit != 0; limit-- {
		dst = append(dst, int(p))
		p, _ = x.next(int(p))
	}
	return dst
}

func (x *slotIndex) next(pos int) (int32, bool) {
	next, _ := x.link(pos)
	return *next, *next != noPos
}

// slotIndexBytes is the index's own memory for n keys: the heads and
// counts, and one page of links per chunk.
func slotIndexBytes(n int) int {
	return slot.Count*8 + (n+chunkLen-1)/chunkLen*chunkLen*8
}

// buildSlotIndex indexes every key of ks, in dense order.
func (ks *keyspace) buildSlotIndex() {
	x := newSlotIndex()
	for pos := range ks.n {
		x.add(pos, slot.Of(ks.keys.At(pos)))
	}
	ks.slotIdx = x
}

// slotKeys returns the positions of the keys of slots first..last in
// descending position order: an order that depends only on replicated
// state (the dense order), whatever the lists' order on this replica.
// Removing keys in that order never moves a key not yet removed (the last
// key moves into each hole, and every later hole is below it).
func (ks *keyspace) slotKeys(first, last int) []int {
	ks.ensureSlotIndex()
	var out []int
	for s := first; s <= last; s++ {
		out = ks.slotIdx.positions(out, s, -1)
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// ensureSlotIndex builds the index on first use: a node that never asks
// for keys by slot pays nothing for it.
func (ks *keyspace) ensureSlotIndex() {
	if ks.slotIdx == nil {
		ks.buildSlotIndex()
	}
}
