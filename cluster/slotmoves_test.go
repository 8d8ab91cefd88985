package cluster

import (
	"strings"
	"testing"
)

// TestShardMapEncodingOfSeveralMoves: a map with no move or one encodes as
// before the list existed (what releases that know one move read), two or
// more as "moving" lines, which round-trip, and which those releases
// refuse rather than read as one move.
func TestShardMapEncodingOfSeveralMoves(t *testing.T) {
	base, err := ParseShardMap("0:0-8191:n1 1:8192-16383:n2 2::n3")
	if err != nil {
		t.Fatal(err)
	}
	head := "shard 0:0-8191:n1\nshard 1:8192-16383:n2\nshard 2::n3\n"
	one := base.clone()
	one.Epoch = 5
	one.addMove(SlotMove{First: 100, Last: 199, From: 0, To: 2, Epoch: 5})
	two := one.clone()
	two.Epoch = 7
	// Added out of order: the list is kept by range.
	two.addMove(SlotMove{First: 9000, Last: 9099, From: 1, To: 2, Epoch: 6, Abort: 7})
	two.addMove(SlotMove{First: 0, Last: 9, From: 0, To: 1, Epoch: 7})
	for _, tc := range []struct {
		name string
		m    *ShardMap
		want string
	}{
		{"none", base, "epoch 1\n" + head},
		// The line of a release that knows one move, byte for byte.
		{"one", one, "epoch 5\n" + head + "move 100-199 0 2 5 0\n"},
		{"three", two, "epoch 7\n" + head + "moving 0-9 0 1 7 0\nmoving 100-199 0 2 5 0\nmoving 9000-9099 1 2 6 0 7\n"},
	} {
		enc := tc.m.Encode()
		if enc != tc.want {
			t.Errorf("%s: Encode = %q, want %q", tc.name, enc, tc.want)
		}
		back, err := DecodeShardMap(enc)
		if err != nil {
			t.Fatalf("%s: DecodeShardMap: %v", tc.name, err)
		}
		if got := back.Encode(); got != enc {
			t.Errorf("%s: round trip = %q, want %q", tc.name, got, enc)
		}
		if len(back.Moves) != len(tc.m.Moves) {
			t.Errorf("%s: decoded %d moves, want %d", tc.name, len(back.Moves), len(tc.m.Moves))
		}
	}
	// A release that knows one move reads "move" lines only, and refuses
	// any other line ("cluster map: unknown line"): no line of a map with
	// several moves may be one it would take for the only move.
	for _, line := range strings.Split(two.Encode(), "\n") {
		if strings.HasPrefix(line, "move ") {
			t.Errorf("a map with several moves has the line %q, which a release that knows one move reads", line)
		}
	}
	if _, err := DecodeShardMap("epoch 7\n" + head + "slot-moves 0-9\n"); err == nil || !strings.Contains(err.Error(), `cluster map: unknown line "slot-moves 0-9"`) {
		t.Errorf("an unknown line: err = %v, want the unknown line refused", err)
	}

	for _, tc := range []struct{ name, lines, want string }{
		{"one moving line", "moving 0-9 0 1 7 0\n", `cluster map: 1 move lines, one of them "moving": a single move is a "move" line, several are "moving" lines`},
		{"two move lines", "move 0-9 0 1 7 0\nmove 100-199 0 2 5 0\n", `cluster map: 2 move lines, one of them "move"`},
		{"a mix", "move 0-9 0 1 7 0\nmoving 100-199 0 2 5 0\n", `cluster map: 2 move lines, one of them "move"`},
		{"overlap", "moving 0-99 0 1 7 0\nmoving 50-199 0 2 5 0\n", "cluster map: the moves of slots 0-99 from shard 0 to 1 and slots 50-199 from shard 0 to 2 overlap"},
		{"bad range", "move 10-9 0 1 7 0\n", `cluster map: bad move "10-9 0 1 7 0": bad slot range (slots are 0-16383)`},
		{"out of range", "moving 0-9 0 1 7 0\nmoving 16000-16384 0 1 7 0\n", `cluster map: bad moving "16000-16384 0 1 7 0"`},
	} {
		_, err := DecodeShardMap("epoch 7\n" + head + tc.lines)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestShardMapMoveLookups: MoveOf finds the move holding a slot among
// several, and dropMove leaves the others.
func TestShardMapMoveLookups(t *testing.T) {
	m, err := ParseShardMap("0:0-16383:n1 1::n2 2::n3")
	if err != nil {
		t.Fatal(err)
	}
	m.addMove(SlotMove{First: 500, Last: 599, From: 0, To: 2, Epoch: 3})
	m.addMove(SlotMove{First: 0, Last: 99, From: 0, To: 1, Epoch: 2})
	for s, want := range map[int]uint32{0: 1, 99: 1, 100: 0, 499: 0, 500: 2, 599: 2, 600: 0} {
		mv, ok := m.MoveOf(s)
		if got := map[bool]uint32{true: mv.To, false: 0}[ok]; got != want {
			t.Errorf("MoveOf(%d) = %+v, %v; want a move to %d", s, mv, ok, want)
		}
	}
	if o, ok := m.overlapping(90, 510); !ok || o.First != 0 {
		t.Errorf("overlapping(90, 510) = %+v, %v; want the move of 0-99", o, ok)
	}
	m.dropMove(0, 99)
	if len(m.Moves) != 1 || m.Moves[0].First != 500 {
		t.Errorf("after dropMove(0, 99): %+v", m.Moves)
	}
	m.dropMove(500, 599)
	if m.Moves != nil {
		t.Errorf("after dropping every move: %+v, want nil (as a decoded map without one)", m.Moves)
	}
}
