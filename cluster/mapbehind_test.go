package cluster

import "testing"

// stater is a state machine whose slots have the epochs of the test.
type stater struct {
	*fakeFSM
	epoch map[int]uint64
}

func (s stater) SlotState(slot int) (string, uint64) { return "unowned", s.epoch[slot] }

// TestMapBehind: a process answers -TRYAGAIN rather than -MOVED for a slot
// a shard it holds took a step for at a later epoch than its map (a move
// the map does not show yet), and keeps -MOVED for a slot that left such a
// shard at an epoch the map already shows, for slots no step touched, and
// for a move being aborted.
func TestMapBehind(t *testing.T) {
	m, err := ParseShardMap("0:0-8191:n1 1:8192-16383:n1")
	if err != nil {
		t.Fatal(err)
	}
	m.Epoch = 7
	// This process holds shard 1 only; slot 100 (shard 0's in the map)
	// had a step in shard 1 at epoch 8, slot 200 at epoch 7, slot 300 none.
	h := &Host{}
	h.held.Store(&heldShards{ids: []uint32{1}, nodes: map[uint32]*Node{
		1: {fsm: stater{newFakeFSM(), map[int]uint64{100: 8, 200: 7}}},
	}})
	for _, c := range []struct {
		slot int
		want bool
	}{{100, true}, {200, false}, {300, false}} {
		if got := h.mapBehind(m, c.slot, 0); got != c.want {
			t.Errorf("mapBehind(epoch 7, slot %d) = %v, want %v", c.slot, got, c.want)
		}
	}
	// The owner's own steps never count: they are the map's.
	if h.mapBehind(m, 100, 1) {
		t.Errorf("mapBehind counted the owner's own step")
	}
	// A move out of the process's shards, or one being aborted, is no
	// reason: -MOVED to its source is where the slot is.
	m.Moves = []SlotMove{{First: 300, Last: 310, From: 0, To: 1, Epoch: 7, Abort: 8}}
	if h.mapBehind(m, 300, 0) {
		t.Errorf("mapBehind for a move being aborted")
	}
	if got := string(replyMapBehind); got != "-TRYAGAIN this node's cluster map is behind a slot move, retry\r\n" {
		t.Errorf("replyMapBehind = %q", got)
	}
}
