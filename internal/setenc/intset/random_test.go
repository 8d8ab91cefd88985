package intset

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// edges are the values where width changes, where sign handling or
// sign extension goes wrong first.
var edges = []int64{
	0, 1, -1,
	math.MaxInt16, math.MaxInt16 + 1, math.MinInt16, math.MinInt16 - 1,
	math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
	math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1,
}

func randValue(r *rand.Rand) int64 {
	switch p := r.IntN(100); {
	case p < 35: // small range: many duplicate adds and hits
		return r.Int64N(101) - 50
	case p < 60: // near a width boundary
		e := edges[r.IntN(len(edges))]
		d := r.Int64N(5) - 2
		if (d > 0 && e > math.MaxInt64-d) || (d < 0 && e < math.MinInt64-d) {
			return e
		}
		return e + d
	case p < 75:
		return int64(int16(r.Uint64()))
	case p < 87:
		return int64(int32(r.Uint64()))
	default:
		return int64(r.Uint64())
	}
}

// TestDifferential runs random Add/Remove/lookups against a sorted slice and
// checks after every operation: contents, deep validity, Search positions,
// and that the width is exactly the widest value ever added (Redis's rule,
// including "Remove never downgrades").
func TestDifferential(t *testing.T) {
	const ops = 200_000
	r := rand.New(rand.NewPCG(20240601, 7))
	var (
		b      []byte
		ref    []int64
		widest int
	)
	reset := func() {
		if r.IntN(2) == 0 {
			b, ref, widest = New(), nil, 2
			return
		}
		m := map[int64]bool{}
		for range r.IntN(40) + 1 {
			m[randValue(r)] = true
		}
		ref = slices.Sorted(func(yield func(int64) bool) {
			for v := range m {
				if !yield(v) {
					return
				}
			}
		})
		b = FromSorted(ref)
		widest = max(WidthFor(ref[0]), WidthFor(ref[len(ref)-1]))
	}
	reset()
	var adds, removes, upgrades int
	for op := range ops {
		if len(ref) > 300 || r.IntN(2000) == 0 {
			reset()
		}
		v := randValue(r)
		if len(ref) > 0 && r.IntN(3) == 0 {
			v = ref[r.IntN(len(ref))] // make hits common for Remove
		}
		pos, inRef := slices.BinarySearch(ref, v)
		switch p := r.IntN(100); {
		case p < 55:
			before := Width(b)
			var ok bool
			b, ok = Add(b, v)
			if ok != !inRef {
				t.Fatalf("op %d: Add(%d) = %v, want %v", op, v, ok, !inRef)
			}
			if !inRef {
				ref = slices.Insert(ref, pos, v)
				adds++
			}
			widest = max(widest, WidthFor(v))
			if Width(b) > before {
				upgrades++
			}
		case p < 90:
			var ok bool
			b, ok = Remove(b, v)
			if ok != inRef {
				t.Fatalf("op %d: Remove(%d) = %v, want %v", op, v, ok, inRef)
			}
			if inRef {
				ref = slices.Delete(ref, pos, pos+1)
				removes++
			}
		default:
			gotPos, found := Search(b, v)
			if gotPos != pos || found != inRef {
				t.Fatalf("op %d: Search(%d) = %d, %v, want %d, %v", op, v, gotPos, found, pos, inRef)
			}
			if got := Contains(b, v); got != inRef {
				t.Fatalf("op %d: Contains(%d) = %v, want %v", op, v, got, inRef)
			}
		}
		check(t, op, b, ref, widest)
	}
	t.Logf("%d ops: %d adds, %d removes, %d upgrades", ops, adds, removes, upgrades)
}

func check(t *testing.T, op int, b []byte, ref []int64, widest int) {
	t.Helper()
	if got, want := Width(b), widest; got != want {
		t.Fatalf("op %d: Width = %d, want %d", op, got, want)
	}
	if got, want := Len(b), len(ref); got != want {
		t.Fatalf("op %d: Len = %d, want %d", op, got, want)
	}
	if got, want := len(b), SizeFor(len(ref), widest); got != want {
		t.Fatalf("op %d: len(blob) = %d, want %d", op, got, want)
	}
	err := Validate(b, true)
	if len(ref) == 0 {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("op %d: Validate(empty) = %v, want ErrCorrupt", op, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("op %d: Validate = %v, want nil", op, err)
	}
	i := 0
	Iterate(b, func(v int64) bool {
		if v != ref[i] {
			t.Fatalf("op %d: value %d = %d, want %d", op, i, v, ref[i])
		}
		i++
		return true
	})
	if Min(b) != ref[0] || Max(b) != ref[len(ref)-1] {
		t.Fatalf("op %d: Min, Max = %d, %d, want %d, %d", op, Min(b), Max(b), ref[0], ref[len(ref)-1])
	}
}
