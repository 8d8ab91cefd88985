package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"raftset/internal/slot"
)

// The map's slot moves (docs/sharding.md, Several moves at once): any
// number of moves may be in progress, each of its own disjoint range with
// its own epochs. A map with at most one move is encoded as before this
// list existed (one "move" line), so releases that know a single move keep
// reading it; a map with two or more writes each as a "moving" line, which
// those releases refuse (unknown line) instead of reading one move of
// several: upgrade every process before running two moves at once.

// SlotMove is a range of slots on its way from one shard to another: Epoch
// is the map epoch that planned it (the freeze, drop-before-import and
// import steps carry it), Flip the epoch at which the map gave the range to
// To (0 before: own and drop carry it), Abort the epoch at which
// RAFT.SHARD ABORT marked it for undoing (0: not; the unfreeze in From and
// the drop in To carry it, and the move cannot be resumed any more).
type SlotMove struct {
	First, Last int
	From, To    uint32
	Epoch, Flip uint64
	Abort       uint64
}

// String names the move as the driver's errors and ABORT's refusal do.
func (mv SlotMove) String() string {
	return fmt.Sprintf("slots %d-%d from shard %d to %d", mv.First, mv.Last, mv.From, mv.To)
}

// overlaps says whether the move's range shares a slot with first..last.
func (mv SlotMove) overlaps(first, last int) bool { return mv.First <= last && first <= mv.Last }

// MoveOf returns the move in progress whose range holds slot s.
func (m *ShardMap) MoveOf(s int) (SlotMove, bool) {
	return m.overlapping(s, s)
}

// overlapping returns the first move in progress whose range shares a slot
// with first..last.
func (m *ShardMap) overlapping(first, last int) (SlotMove, bool) {
	i := slices.IndexFunc(m.Moves, func(mv SlotMove) bool { return mv.overlaps(first, last) })
	if i < 0 {
		return SlotMove{}, false
	}
	return m.Moves[i], true
}

// moveOfRange returns a pointer into m.Moves to the move of exactly
// first..last, nil if there is none: what a step of that move changes in
// the next map (a clone).
func (m *ShardMap) moveOfRange(first, last int) *SlotMove {
	i := slices.IndexFunc(m.Moves, func(mv SlotMove) bool { return mv.First == first && mv.Last == last })
	if i < 0 {
		return nil
	}
	return &m.Moves[i]
}

// sameMove returns m's entry for move mv, the one planned at mv.Epoch:
// nil once it was completed or aborted (and any later move of the range
// has another epoch).
func (m *ShardMap) sameMove(mv SlotMove) *SlotMove {
	if p := m.moveOfRange(mv.First, mv.Last); p != nil && p.Epoch == mv.Epoch {
		return p
	}
	return nil
}

// addMove adds mv, keeping the list sorted by range.
func (m *ShardMap) addMove(mv SlotMove) {
	i, _ := slices.BinarySearchFunc(m.Moves, mv.First, func(x SlotMove, first int) int { return x.First - first })
	m.Moves = slices.Insert(m.Moves, i, mv)
}

// dropMove removes the move of first..last.
func (m *ShardMap) dropMove(first, last int) {
	m.Moves = slices.DeleteFunc(m.Moves, func(mv SlotMove) bool { return mv.First == first && mv.Last == last })
	if len(m.Moves) == 0 {
		m.Moves = nil // as a decoded map without a move
	}
}

// movesList is "slots a-b from shard x to y, ..." for a refusal.
func movesList(moves []SlotMove) string {
	parts := make([]string, len(moves))
	for i, mv := range moves {
		parts[i] = mv.String()
	}
	return strings.Join(parts, ", ")
}

// writeMoves writes the moves' lines: one "move" line for a single move,
// as every release writes it, and "moving" lines for two or more, which
// only releases that know several moves read.
func writeMoves(b *strings.Builder, moves []SlotMove) {
	kind := "move"
	if len(moves) > 1 {
		kind = "moving"
	}
	for _, mv := range moves {
		fmt.Fprintf(b, "%s %d-%d %d %d %d %d", kind, mv.First, mv.Last, mv.From, mv.To, mv.Epoch, mv.Flip)
		if mv.Abort != 0 {
			// Only an aborting move has the seventh field, so a map
			// without one reads as before.
			fmt.Fprintf(b, " %d", mv.Abort)
		}
		b.WriteByte('\n')
	}
}

// moveLine is a decoded "move" or "moving" line, its kind kept for
// checkMoves.
type moveLine struct {
	kind string
	mv   SlotMove
}

// parseMoveLine reads the fields of a "move" or "moving" line.
func parseMoveLine(kind, rest string) (SlotMove, error) {
	var mv SlotMove
	var err error
	switch len(strings.Fields(rest)) {
	case 5:
		_, err = fmt.Sscanf(rest, "%d-%d %d %d %d %d", &mv.First, &mv.Last, &mv.From, &mv.To, &mv.Epoch, &mv.Flip)
	case 6:
		_, err = fmt.Sscanf(rest, "%d-%d %d %d %d %d %d", &mv.First, &mv.Last, &mv.From, &mv.To, &mv.Epoch, &mv.Flip, &mv.Abort)
	default:
		err = errors.New("want first-last from to epoch flip [abort]")
	}
	if err == nil && (mv.First < 0 || mv.Last >= slot.Count || mv.First > mv.Last) {
		err = fmt.Errorf("bad slot range (slots are 0-%d)", slot.Count-1)
	}
	if err != nil {
		return SlotMove{}, fmt.Errorf("cluster map: bad %s %q: %w", kind, rest, err)
	}
	return mv, nil
}

// checkMoves turns the decoded move lines into the map's list: one "move"
// line, or two or more "moving" lines (never a mix, nor a single "moving"
// line: Encode writes neither, and a map must encode as it was stored for
// the metadata group's compare-and-set), with disjoint ranges.
func checkMoves(lines []moveLine) ([]SlotMove, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	want := "moving"
	if len(lines) == 1 {
		want = "move"
	}
	var moves []SlotMove
	for _, l := range lines {
		if l.kind != want {
			return nil, fmt.Errorf("cluster map: %d move lines, one of them %q: a single move is a \"move\" line, several are \"moving\" lines", len(lines), l.kind)
		}
		if o, ok := (&ShardMap{Moves: moves}).overlapping(l.mv.First, l.mv.Last); ok {
			return nil, fmt.Errorf("cluster map: the moves of %s and %s overlap", o, l.mv)
		}
		moves = append(moves, l.mv)
	}
	slices.SortFunc(moves, func(a, b SlotMove) int { return a.First - b.First })
	return moves, nil
}
