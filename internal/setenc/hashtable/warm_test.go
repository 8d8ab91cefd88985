package hashtable

import (
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWarm checks what Warm promises its callers: for a member in its home
// slot the member's own position, -1 or a valid position for any other
// (absent or displaced), one answer per member, and a table left as it was.
func TestWarm(t *testing.T) {
	if got := New(0).Warm([][]byte{[]byte("a"), nil}, nil); !slices.Equal(got, []int{-1, -1}) {
		t.Fatalf("Warm on an empty table = %v, want [-1 -1]", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	tb := New(0)
	var ms [][]byte
	for range 20000 {
		m := member(r)
		ms = append(ms, m)
		if r.IntN(4) == 0 {
			tb.Remove(m)
		} else {
			tb.Add(m)
		}
	}
	before := members(tb)
	pos := tb.Warm(ms, make([]int, 3))
	if len(pos) != len(ms) {
		t.Fatalf("Warm returned %d positions for %d members", len(pos), len(ms))
	}
	home := 0
	for j, m := range ms {
		h := maphash.Bytes(seed, m)
		slot, p := tb.find(m, h)
		switch {
		case p >= 0 && slot == tb.home(h):
			home++
			if pos[j] != p {
				t.Fatalf("member %d (%q) sits in its home slot at position %d, Warm said %d", j, m, p, pos[j])
			}
		case pos[j] < -1 || pos[j] >= tb.Len():
			t.Fatalf("member %d (%q): Warm said %d, not a position of a table of %d", j, m, pos[j], tb.Len())
		}
	}
	if home == 0 {
		t.Fatal("no member sat in its home slot: the test checks nothing")
	}
	if after := members(tb); !slices.Equal(after, before) {
		t.Fatal("Warm changed the table")
	}
}
