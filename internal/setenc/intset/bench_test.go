package intset

import (
	"fmt"
	"testing"
)

// benchSizes: 50 is a typical small set; 128 is set-max-listpack-entries,
// a size where callers compare intset against listpack.
var benchSizes = []int{50, 128}

// benchSet holds 0, 10, 20, ... so odd multiples of 5 fall between members.
func benchSet(n int) []byte {
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = int64(i) * 10
	}
	return FromSorted(vals)
}

// BenchmarkAdd inserts a new middle member. Each iteration first restores
// the original set with a copy (~n*2 bytes) so every Add does the same
// work; the copy is included in the time.
func BenchmarkAdd(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			base := benchSet(n)
			s := make([]byte, len(base), len(base)+64)
			v := int64(n/2)*10 + 5
			b.ReportAllocs()
			for b.Loop() {
				s = s[:len(base)]
				copy(s, base)
				s, _ = Add(s, v)
			}
		})
	}
}

func BenchmarkContains(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := benchSet(n)
			hits := 0
			i := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				// Alternate hits and misses across the whole range.
				if Contains(s, (i%int64(2*n))*5) {
					hits++
				}
				i++
			}
			if hits == 0 {
				b.Fatal("no hits")
			}
		})
	}
}

// BenchmarkRemove removes a middle member from a freshly restored copy,
// like BenchmarkAdd.
func BenchmarkRemove(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			base := benchSet(n)
			s := make([]byte, len(base))
			v := int64(n/2) * 10
			b.ReportAllocs()
			for b.Loop() {
				s = s[:len(base)]
				copy(s, base)
				s, _ = Remove(s, v)
			}
		})
	}
}

func BenchmarkIterate(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := benchSet(n)
			var sum int64
			b.ReportAllocs()
			for b.Loop() {
				Iterate(s, func(v int64) bool { sum += v; return true })
			}
			if sum == 0 {
				b.Fatal("empty iteration")
			}
		})
	}
}
