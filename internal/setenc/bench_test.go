package setenc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// benchMembers returns n members of the kind each encoding holds: small
// integers for intset, the seed benchmark's 12-digit strings otherwise.
func benchMembers(enc Encoding, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		if enc == Intset {
			out[i] = fmt.Appendf(nil, "%d", i*37)
		} else {
			out[i] = fmt.Appendf(nil, "%012d", i*37)
		}
	}
	return out
}

func benchSet(enc Encoding, members [][]byte) *Set {
	lim := DefaultLimits()
	var s *Set
	switch enc {
	case Intset:
		s = newIntset()
	case Listpack:
		s = newListpack()
	default:
		s = NewForAdd([]byte("x"), 100000, lim)
	}
	for _, m := range members {
		s.Add(m, lim)
	}
	if s.Encoding() != enc {
		panic(fmt.Sprintf("benchSet: got %v, want %v", s.Encoding(), enc))
	}
	return s
}

// BenchmarkSet measures the per-operation cost for each encoding at the sizes
// issue 2 names: 50 and 128 members, and 10,000 for hashtable.
func BenchmarkSet(b *testing.B) {
	lim := DefaultLimits()
	lim.MaxListpackEntries = 1 << 20 // so Add/Remove cycles at 128 members stay listpack
	for _, enc := range []Encoding{Intset, Listpack, Hashtable} {
		sizes := []int{50, 128}
		if enc == Hashtable {
			sizes = append(sizes, 10000)
		}
		for _, n := range sizes {
			members := benchMembers(enc, n+1)
			extra := members[n]
			members = members[:n]
			name := fmt.Sprintf("%v/%d", enc, n)
			b.Run(name+"/Add", func(b *testing.B) {
				s := benchSet(enc, members)
				b.ReportAllocs()
				for b.Loop() {
					s.Add(extra, lim)
					s.Remove(extra)
				}
			})
			b.Run(name+"/Contains", func(b *testing.B) {
				s := benchSet(enc, members)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					s.Contains(members[i%n])
				}
			})
			b.Run(name+"/Remove", func(b *testing.B) {
				s := benchSet(enc, members)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					m := members[i%n]
					s.Remove(m)
					s.Add(m, lim)
				}
			})
			b.Run(name+"/Pop", func(b *testing.B) {
				s := benchSet(enc, members)
				src := rand.NewPCG(1, 2)
				b.ReportAllocs()
				for b.Loop() {
					m := s.Pop(src)
					s.Add(m, lim)
				}
			})
			b.Run(name+"/Iterate", func(b *testing.B) {
				s := benchSet(enc, members)
				b.ReportAllocs()
				for b.Loop() {
					s.Iterate(func([]byte) bool { return true })
				}
			})
		}
	}
}

// BenchmarkSeedMemory builds the seed dataset of issue 2 — 200,000 keys of
// 50 members, keys and members 12-digit zero-padded decimals, added by SADDs
// of one member as redis-benchmark does — and reports the live heap per set,
// key included (Redis 7.2: 800 bytes per key).
func BenchmarkSeedMemory(b *testing.B) {
	lim := DefaultLimits()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := rand.New(rand.NewPCG(1, 2))
		keys := make(map[string]*Set, 200000)
		for i := 0; i < 200000; i++ {
			key := fmt.Sprintf("%012d", i)
			var s *Set
			for s == nil || s.Len() < 50 {
				m := fmt.Appendf(nil, "%012d", r.IntN(200000))
				if s == nil {
					s = NewForAdd(m, 1, lim)
				}
				s.Add(m, lim)
			}
			keys[key] = s
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(keys)), "bytes/set")
		runtime.KeepAlive(keys)
	}
}
