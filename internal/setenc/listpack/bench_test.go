package listpack

import (
	"fmt"
	"strconv"
	"testing"
)

type benchSet struct {
	name    string
	members [][]byte
	miss    []byte
}

func benchSets() []benchSet {
	var out []benchSet
	for _, n := range []int{50, 128} {
		var strs, ints [][]byte
		for i := range n {
			strs = append(strs, fmt.Appendf(nil, "%012d", 123456+i*7919))
			ints = append(ints, strconv.AppendInt(nil, int64(i*37), 10))
		}
		out = append(out,
			benchSet{fmt.Sprintf("str12x%d", n), strs, []byte("000000999999")},
			benchSet{fmt.Sprintf("int%d", n), ints, []byte("100001")},
		)
	}
	return out
}

// BenchmarkAppend builds the whole set from New() by Append (one op = the
// whole set).
func BenchmarkAppend(b *testing.B) {
	for _, s := range benchSets() {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				lp := New()
				for _, m := range s.members {
					lp = Append(lp, m)
				}
			}
		})
	}
}

func BenchmarkFromMembers(b *testing.B) {
	for _, s := range benchSets() {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				FromMembers(s.members)
			}
		})
	}
}

// BenchmarkFindHit looks up every member in turn (one op = one Find).
func BenchmarkFindHit(b *testing.B) {
	for _, s := range benchSets() {
		lp := FromMembers(s.members)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if Find(lp, s.members[i]) < 0 {
					b.Fatal("miss")
				}
				if i++; i == len(s.members) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkFindMiss scans the whole set for an absent member of the same
// length and kind.
func BenchmarkFindMiss(b *testing.B) {
	for _, s := range benchSets() {
		lp := FromMembers(s.members)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if Find(lp, s.miss) >= 0 {
					b.Fatal("hit")
				}
			}
		})
	}
}

// BenchmarkDelete deletes the middle entry of a fresh copy (the op includes
// copying the blob into a reused buffer).
func BenchmarkDelete(b *testing.B) {
	for _, s := range benchSets() {
		lp := FromMembers(s.members)
		buf := make([]byte, len(lp))
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = buf[:len(lp)]
				copy(buf, lp)
				buf = Delete(buf, Seek(buf, len(s.members)/2))
			}
		})
	}
}

// BenchmarkIterate walks all entries with First/Next and decodes each
// with Get.
func BenchmarkIterate(b *testing.B) {
	for _, s := range benchSets() {
		lp := FromMembers(s.members)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for p := First(lp); p >= 0; p = Next(lp, p) {
					s, v, _ := Get(lp, p)
					n += len(s) + int(v)
				}
				if n == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}

func BenchmarkValidateSet(b *testing.B) {
	for _, s := range benchSets() {
		lp := FromMembers(s.members)
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ValidateSet(lp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
