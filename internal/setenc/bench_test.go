package setenc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"raftset/internal/setenc/hashtable"
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
	s := buildInEncoding(enc, members)
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

// BenchmarkSeedMemory builds the seed dataset of issue 2 the way the seed
// benchmark did — 10,000,000 SADDs of a random key and a random member, both
// 12-digit zero-padded decimals below 200,000 (redis-benchmark -r 200000
// "sadd __rand_int__ __rand_int__"), which leaves 200,000 sets of about 50
// members — and reports the live heap per set, key included (Redis 7.2: 800
// bytes per key). Keys live the way the keyspace keeps them: in a
// hashtable.Table, with the Set values in a parallel slice.
func BenchmarkSeedMemory(b *testing.B) {
	lim := DefaultLimits()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := rand.New(rand.NewPCG(1, 2))
		keys := hashtable.New(0)
		var vals []Set
		var key, member []byte
		members := 0
		for range 10_000_000 {
			key = fmt.Appendf(key[:0], "%012d", r.IntN(200000))
			member = fmt.Appendf(member[:0], "%012d", r.IntN(200000))
			pos := keys.Find(key)
			if pos < 0 {
				keys.Add(key)
				vals = append(vals, *NewForAdd(member, 1, lim))
				pos = len(vals) - 1
			}
			if vals[pos].Add(member, lim) {
				members++
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(keys.Len()), "bytes/set")
		b.ReportMetric(float64(members)/float64(keys.Len()), "members/set")
		runtime.KeepAlive(keys)
		runtime.KeepAlive(vals)
	}
}
