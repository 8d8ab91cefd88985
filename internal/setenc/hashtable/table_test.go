package hashtable

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

func member(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return fmt.Appendf(nil, "%012d", r.IntN(5000))
	case 1:
		return []byte{byte(r.IntN(3)), 0xff, 0} // binary, tiny alphabet → collisions
	case 2:
		return []byte{}
	default:
		b := make([]byte, r.IntN(300))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
}

// TestDifferential applies random operations to a Table and to a Go map and
// compares them after every step.
func TestDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tb := New(0)
	ref := map[string]bool{}
	for i := 0; i < 200000; i++ {
		m := member(r)
		switch op := r.IntN(10); {
		case op < 5:
			if got, want := tb.Add(m), !ref[string(m)]; got != want {
				t.Fatalf("step %d: Add(%q) = %v, want %v", i, m, got, want)
			}
			ref[string(m)] = true
		case op < 8:
			if got, want := tb.Remove(m), ref[string(m)]; got != want {
				t.Fatalf("step %d: Remove(%q) = %v, want %v", i, m, got, want)
			}
			delete(ref, string(m))
		default:
			if got, want := tb.Contains(m), ref[string(m)]; got != want {
				t.Fatalf("step %d: Contains(%q) = %v, want %v", i, m, got, want)
			}
		}
		if tb.Len() != len(ref) {
			t.Fatalf("step %d: Len() = %d, want %d", i, tb.Len(), len(ref))
		}
		if i%5000 == 0 {
			checkSame(t, tb, ref)
		}
	}
	checkSame(t, tb, ref)
}

func checkSame(t *testing.T, tb *Table, ref map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	tb.Iterate(func(m []byte) bool {
		if seen[string(m)] {
			t.Fatalf("Iterate returned %q twice", m)
		}
		seen[string(m)] = true
		if !ref[string(m)] {
			t.Fatalf("Iterate returned %q, not a member", m)
		}
		return true
	})
	if len(seen) != len(ref) {
		t.Fatalf("Iterate returned %d members, want %d", len(seen), len(ref))
	}
	// Every dense position must be findable through the index.
	for i := 0; i < tb.Len(); i++ {
		if !tb.Contains(tb.At(i)) {
			t.Fatalf("member %d (%q) not found through the index", i, tb.At(i))
		}
	}
}

// TestDenseOrderIsAFunctionOfOperations: two tables fed the same operations
// hold their members in the same order, and so does a table rebuilt from an
// iteration (what a snapshot restore does), so random picks agree.
func TestDenseOrderIsAFunctionOfOperations(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	a, b := New(0), New(0)
	for i := 0; i < 50000; i++ {
		m := fmt.Appendf(nil, "m%d", r.IntN(3000))
		if r.IntN(3) == 0 {
			a.Remove(m)
			b.Remove(m)
		} else {
			a.Add(m)
			b.Add(m)
		}
	}
	c := a.Clone()
	for _, x := range []*Table{b, c} {
		if got, want := members(x), members(a); !slices.Equal(got, want) {
			t.Fatalf("dense order differs: %d vs %d members", len(got), len(want))
		}
	}
}

func members(t *Table) []string {
	var out []string
	t.Iterate(func(m []byte) bool { out = append(out, string(m)); return true })
	return out
}

// TestScanGuarantee interleaves scan steps with adds and removes of other
// members and checks that every member present for the whole scan was
// returned at least once.
func TestScanGuarantee(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		tb := New(0)
		for i := 0; i < 1000; i++ {
			tb.Add(fmt.Appendf(nil, "stable-%d", i))
		}
		for i := 0; i < r.IntN(2000); i++ {
			tb.Add(fmt.Appendf(nil, "churn-%d", i))
		}
		seen := map[string]bool{}
		cursor := uint64(0)
		next := 0
		for {
			cursor = tb.Scan(cursor, 1+r.IntN(40), func(m []byte) { seen[string(m)] = true })
			// Grow and shrink between calls, but never touch stable members.
			for k := r.IntN(200); k > 0; k-- {
				if r.IntN(2) == 0 {
					tb.Add(fmt.Appendf(nil, "churn-%d", 2000+next))
					next++
				} else {
					tb.Remove(fmt.Appendf(nil, "churn-%d", r.IntN(2000+next)))
				}
			}
			if cursor == 0 {
				break
			}
		}
		for i := 0; i < 1000; i++ {
			if !seen[fmt.Sprintf("stable-%d", i)] {
				t.Fatalf("seed %d: scan missed stable-%d", seed, i)
			}
		}
	}
}

func TestScanOfEmptyTableEnds(t *testing.T) {
	calls := 0
	if c := New(0).Scan(0, 10, func([]byte) { calls++ }); c != 0 || calls != 0 {
		t.Errorf("Scan(empty) = %d with %d members, want 0 with 0", c, calls)
	}
}

func TestArenaCompactionKeepsOrder(t *testing.T) {
	tb := New(0)
	for i := 0; i < 1000; i++ {
		tb.Add(fmt.Appendf(nil, "%0100d", i))
	}
	for i := 0; i < 900; i++ {
		tb.Remove(fmt.Appendf(nil, "%0100d", i))
	}
	if tb.garbage > len(tb.arena)/2 {
		t.Fatalf("garbage %d of %d arena bytes was never compacted", tb.garbage, len(tb.arena))
	}
	ref := map[string]bool{}
	for i := 900; i < 1000; i++ {
		ref[fmt.Sprintf("%0100d", i)] = true
	}
	checkSame(t, tb, ref)
}

func BenchmarkTable10k(b *testing.B) {
	ms := make([][]byte, 10000)
	for i := range ms {
		ms[i] = fmt.Appendf(nil, "%012d", i*7)
	}
	tb := New(0)
	for _, m := range ms {
		tb.Add(m)
	}
	src := rand.New(rand.NewPCG(1, 1))
	b.Run("Contains", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			tb.Contains(ms[i%len(ms)])
		}
	})
	b.Run("AddRemove", func(b *testing.B) {
		extra := []byte("000000999999")
		for b.Loop() {
			tb.Add(extra)
			tb.Remove(extra)
		}
	})
	b.Run("RandomAt", func(b *testing.B) {
		for b.Loop() {
			_ = tb.At(src.IntN(tb.Len()))
		}
	})
}

// BenchmarkLookup200k looks up random keys of a table the size of the seed
// dataset's keyspace (200,000 twelve-digit keys), which outgrows the caches:
// what the state machine pays per command to find its key.
func BenchmarkLookup200k(b *testing.B) {
	ms := make([][]byte, 200_000)
	for i := range ms {
		ms[i] = fmt.Appendf(nil, "%012d", i*7)
	}
	tb := New(0)
	for _, m := range ms {
		tb.Add(m)
	}
	src := rand.New(rand.NewPCG(1, 2))
	b.Run("Hit", func(b *testing.B) {
		for b.Loop() {
			tb.Find(ms[src.IntN(len(ms))])
		}
	})
	b.Run("Miss", func(b *testing.B) {
		miss := make([]byte, 12)
		for b.Loop() {
			miss = fmt.Appendf(miss[:0], "%012d", src.IntN(len(ms))*7+3)
			tb.Find(miss)
		}
	})
}

// BenchmarkMemory10k reports heap bytes per member for 100 tables of 10,000
// twelve-digit members (issue 2's target: at most 40 bytes per member).
func BenchmarkMemory10k(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := rand.New(rand.NewPCG(3, 4))
		tables := make([]*Table, 100)
		for i := range tables {
			tables[i] = New(0)
			for tables[i].Len() < 10000 {
				tables[i].Add(fmt.Appendf(nil, "%012d", r.IntN(1_000_000_000)))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "bytes/member")
		runtime.KeepAlive(tables)
	}
}
