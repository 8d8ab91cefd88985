package intset

import (
	"bytes"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"testing"

	"raftset/internal/alloc"
)

// unhex turns "02 00 00 00" style text (as written in the spec) into bytes.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func values(b []byte) []int64 {
	var vs []int64
	Iterate(b, func(v int64) bool { vs = append(vs, v); return true })
	return vs
}

func addAll(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b, _ = Add(b, v)
	}
	return b
}

func TestNew(t *testing.T) {
	b := New()
	if got, want := hex.EncodeToString(b), "0200000000000000"; got != want {
		t.Errorf("New() = %s, want %s", got, want)
	}
	if got, want := cap(b), 8; got != want {
		t.Errorf("cap(New()) = %d, want %d", got, want)
	}
	if got, want := Len(b), 0; got != want {
		t.Errorf("Len(New()) = %d, want %d", got, want)
	}
	if got, want := Width(b), 2; got != want {
		t.Errorf("Width(New()) = %d, want %d", got, want)
	}
}

// TestAppendixA2 pins two intsets worked out by hand from Redis's
// src/intset.h (one at width 2, one at width 4), built both ways a caller
// builds an intset.
func TestAppendixA2(t *testing.T) {
	for _, tc := range []struct {
		vals []int64
		want string
	}{
		{[]int64{1, 2, 3}, "02 00 00 00 03 00 00 00 01 00 02 00 03 00"},
		{[]int64{1, 5, 70000}, "04 00 00 00 03 00 00 00 01 00 00 00 05 00 00 00 70 11 01 00"},
	} {
		want := unhex(t, tc.want)
		if got := FromSorted(tc.vals); !bytes.Equal(got, want) {
			t.Errorf("FromSorted(%v) = % x, want % x", tc.vals, got, want)
		}
		if got := addAll(New(), tc.vals...); !bytes.Equal(got, want) {
			t.Errorf("Add %v from New() = % x, want % x", tc.vals, got, want)
		}
		// Insertion order must not matter when nothing is removed.
		rev := slices.Clone(tc.vals)
		slices.Reverse(rev)
		if got := addAll(New(), rev...); !bytes.Equal(got, want) {
			t.Errorf("Add %v from New() = % x, want % x", rev, got, want)
		}
	}
}

// TestUpgradeSequence follows one set through upgrades and removals: the
// width only ever grows, a value that forces an upgrade lands at the front
// when negative and at the back when positive.
func TestUpgradeSequence(t *testing.T) {
	type step struct {
		add    bool
		v      int64
		wantOK bool
		want   string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"2-4-8-no-downgrade", []step{
			{true, 1, true, "02 00 00 00 01 00 00 00 01 00"},
			{true, 2, true, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, 2, false, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, 70000, true, "04 00 00 00 03 00 00 00 01 00 00 00 02 00 00 00 70 11 01 00"},
			{true, -5000000000, true, "08 00 00 00 04 00 00 00 00 0e fa d5 fe ff ff ff 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 70 11 01 00 00 00 00 00"},
			{false, -5000000000, true, "08 00 00 00 03 00 00 00 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 70 11 01 00 00 00 00 00"},
			{false, 70000, true, "08 00 00 00 02 00 00 00 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00"},
			{false, 1, true, "08 00 00 00 01 00 00 00 02 00 00 00 00 00 00 00"},
			{false, 1, false, "08 00 00 00 01 00 00 00 02 00 00 00 00 00 00 00"},
			{true, -40000, true, "08 00 00 00 02 00 00 00 c0 63 ff ff ff ff ff ff 02 00 00 00 00 00 00 00"},
			{false, -40000, true, "08 00 00 00 01 00 00 00 02 00 00 00 00 00 00 00"},
			{false, 2, true, "08 00 00 00 00 00 00 00"},
		}},
		{"2-8-negative-prepends", []step{
			{true, 1, true, "02 00 00 00 01 00 00 00 01 00"},
			{true, 2, true, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, math.MinInt64, true, "08 00 00 00 03 00 00 00 00 00 00 00 00 00 00 80 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00"},
		}},
		{"2-8-positive-appends", []step{
			{true, 2, true, "02 00 00 00 01 00 00 00 02 00"},
			{true, 1, true, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, 2147483648, true, "08 00 00 00 03 00 00 00 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 00 00 00 80 00 00 00 00"},
		}},
		{"2-4-at-int32-max", []step{
			{true, 1, true, "02 00 00 00 01 00 00 00 01 00"},
			{true, 2, true, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, 2147483647, true, "04 00 00 00 03 00 00 00 01 00 00 00 02 00 00 00 ff ff ff 7f"},
		}},
		{"2-4-at-int16-min-minus-1", []step{
			{true, 1, true, "02 00 00 00 01 00 00 00 01 00"},
			{true, 2, true, "02 00 00 00 02 00 00 00 01 00 02 00"},
			{true, -32769, true, "04 00 00 00 03 00 00 00 ff 7f ff ff 01 00 00 00 02 00 00 00"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			for _, s := range tc.steps {
				var ok bool
				op := "Add"
				if s.add {
					b, ok = Add(b, s.v)
				} else {
					op = "Remove"
					b, ok = Remove(b, s.v)
				}
				if ok != s.wantOK {
					t.Errorf("%s(%d) = %v, want %v", op, s.v, ok, s.wantOK)
				}
				if want := unhex(t, s.want); !bytes.Equal(b, want) {
					t.Fatalf("after %s(%d): % x, want % x", op, s.v, b, want)
				}
			}
		})
	}
}

func TestWidthFor(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want int
	}{
		{0, 2}, {1, 2}, {-1, 2}, {math.MaxInt16, 2}, {math.MinInt16, 2},
		{math.MaxInt16 + 1, 4}, {math.MinInt16 - 1, 4}, {math.MaxInt32, 4}, {math.MinInt32, 4},
		{math.MaxInt32 + 1, 8}, {math.MinInt32 - 1, 8}, {math.MaxInt64, 8}, {math.MinInt64, 8},
	} {
		if got := WidthFor(tc.v); got != tc.want {
			t.Errorf("WidthFor(%d) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

func TestSizeFor(t *testing.T) {
	for _, tc := range []struct{ n, w, want int }{
		{0, 2, 8}, {3, 2, 14}, {3, 4, 20}, {512, 8, 4104},
	} {
		if got := SizeFor(tc.n, tc.w); got != tc.want {
			t.Errorf("SizeFor(%d, %d) = %d, want %d", tc.n, tc.w, got, tc.want)
		}
	}
}

// TestSearch covers Redis intsetSearch's answers, including the fast paths
// for values beyond min and max, at every width.
func TestSearch(t *testing.T) {
	for _, w := range []int64{1, 100000, 10000000000} { // scales to widths 2, 4, 8
		b := FromSorted([]int64{-20 * w, 10 * w, 20 * w, 30 * w})
		for _, tc := range []struct {
			v       int64
			wantPos int
			wantOK  bool
		}{
			{math.MinInt64, 0, false}, {-21 * w, 0, false}, {-20 * w, 0, true}, {0, 1, false},
			{10 * w, 1, true}, {15 * w, 2, false}, {20 * w, 2, true}, {25 * w, 3, false},
			{30 * w, 3, true}, {31 * w, 4, false}, {math.MaxInt64, 4, false},
		} {
			pos, ok := Search(b, tc.v)
			if pos != tc.wantPos || ok != tc.wantOK {
				t.Errorf("width %d: Search(%d) = %d, %v, want %d, %v", Width(b), tc.v, pos, ok, tc.wantPos, tc.wantOK)
			}
			if got := Contains(b, tc.v); got != tc.wantOK {
				t.Errorf("width %d: Contains(%d) = %v, want %v", Width(b), tc.v, got, tc.wantOK)
			}
		}
	}
	if pos, ok := Search(New(), 5); pos != 0 || ok {
		t.Errorf("Search(New(), 5) = %d, %v, want 0, false", pos, ok)
	}
}

func TestMinMaxGet(t *testing.T) {
	for _, vals := range [][]int64{
		{7},
		{-32768, -5, 1, 2, 3, 100, 32767},
		{-2147483648, -70000, 1, 70000, 2147483647},
		{math.MinInt64, 1, 5000000000, math.MaxInt64},
	} {
		b := FromSorted(vals)
		if got, want := Min(b), vals[0]; got != want {
			t.Errorf("Min(%v) = %d, want %d", vals, got, want)
		}
		if got, want := Max(b), vals[len(vals)-1]; got != want {
			t.Errorf("Max(%v) = %d, want %d", vals, got, want)
		}
		for i, want := range vals {
			if got := Get(b, i); got != want {
				t.Errorf("Get(%v, %d) = %d, want %d", vals, i, got, want)
			}
		}
	}
}

func TestGetOutOfRangePanics(t *testing.T) {
	b := FromSorted([]int64{1, 2, 3})
	for _, i := range []int{-1, -4, 3, 100} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Get(b, %d) did not panic", i)
				}
			}()
			Get(b, i)
		}()
	}
}

func TestIterateStops(t *testing.T) {
	for _, vals := range [][]int64{{1, 2, 3, 4}, {1, 2, 70000, 80000}, {1, 2, 3, 1 << 40}} {
		b := FromSorted(vals)
		var got []int64
		Iterate(b, func(v int64) bool { got = append(got, v); return len(got) < 2 })
		if want := vals[:2]; !slices.Equal(got, want) {
			t.Errorf("Iterate stopping after 2 over %v = %v, want %v", vals, got, want)
		}
		if got := values(b); !slices.Equal(got, vals) {
			t.Errorf("Iterate(%v) = %v, want %v", vals, got, vals)
		}
	}
}

func TestFromSorted(t *testing.T) {
	for _, tc := range []struct {
		vals  []int64
		width int
	}{
		{nil, 2}, {[]int64{-32768, 32767}, 2}, {[]int64{-32769, 0}, 4}, {[]int64{0, 32768}, 4},
		{[]int64{math.MinInt32, math.MaxInt32}, 4}, {[]int64{math.MinInt32 - 1, 0}, 8},
		{[]int64{0, math.MaxInt32 + 1}, 8},
	} {
		b := FromSorted(tc.vals)
		if got := Width(b); got != tc.width {
			t.Errorf("Width(FromSorted(%v)) = %d, want %d", tc.vals, got, tc.width)
		}
		if got, want := cap(b), alloc.RoundUp(SizeFor(len(tc.vals), tc.width)); got != want {
			t.Errorf("cap(FromSorted(%v)) = %d, want %d", tc.vals, got, want)
		}
		if got := values(b); !slices.Equal(got, tc.vals) {
			t.Errorf("values(FromSorted(%v)) = %v, want %v", tc.vals, got, tc.vals)
		}
	}
	for _, bad := range [][]int64{{2, 1}, {1, 1}, {1, 5, 3}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("FromSorted(%v) did not panic", bad)
				}
			}()
			FromSorted(bad)
		}()
	}
}

// TestAddGrowsToSizeClass checks that growth follows the allocator's size
// classes (not append's doubling), so a set's slack stays below one class.
func TestAddGrowsToSizeClass(t *testing.T) {
	b := New()
	moves := 0
	for i := range int64(600) {
		v := i * 7
		if i == 300 {
			v = 1 << 20 // upgrade to width 4 midway
		}
		old := &b[0]
		b, _ = Add(b, v)
		if &b[0] != old {
			moves++
			if got, want := cap(b), alloc.RoundUp(len(b)); got != want {
				t.Errorf("after Add(%d) moved the blob: cap %d, want %d (len %d)", v, got, want, len(b))
			}
		}
		if cap(b) > alloc.RoundUp(len(b)) {
			t.Errorf("after Add(%d): cap %d exceeds size class %d of len %d", v, cap(b), alloc.RoundUp(len(b)), len(b))
		}
	}
	t.Logf("600 adds moved the blob %d times", moves)
}

func TestRemoveKeepsCapacity(t *testing.T) {
	b := FromSorted([]int64{1, 2, 3, 4, 5})
	c, p := cap(b), &b[0]
	b, ok := Remove(b, 3)
	if !ok {
		t.Fatalf("Remove(3) = %v, want %v", ok, true)
	}
	if cap(b) != c || &b[0] != p {
		t.Errorf("Remove moved or resized the blob: cap %d, want %d", cap(b), c)
	}
	if got, want := values(b), []int64{1, 2, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("values after Remove(3) = %v, want %v", got, want)
	}
	// A value wider than the set cannot be in it.
	if _, ok := Remove(b, 1<<40); ok {
		t.Errorf("Remove(1<<40) = %v, want %v", ok, false)
	}
}

// TestNoAllocs: lookups and in-capacity updates must not allocate, since
// they run per command on the Raft apply path.
func TestNoAllocs(t *testing.T) {
	b := FromSorted([]int64{1, 3, 5, 7, 9, 11})
	b = slices.Grow(b, 64)
	var sink int64
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"Contains", func() { _ = Contains(b, 7) }},
		{"Search", func() { _, _ = Search(b, 8) }},
		{"Iterate", func() { Iterate(b, func(v int64) bool { sink += v; return true }) }},
		{"Validate", func() { _ = Validate(b, true) }},
		{"AddRemove", func() { b, _ = Add(b, 4); b, _ = Remove(b, 4) }},
	} {
		if got := testing.AllocsPerRun(100, tc.fn); got != 0 {
			t.Errorf("%s allocs = %v, want 0", tc.name, got)
		}
	}
	_ = sink
}
