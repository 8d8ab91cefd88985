package setenc

import (
	"math/bits"

	"raftset/internal/setenc/intset"
	"raftset/internal/setenc/listpack"
)

// Source is the random generator behind SPOP and SRANDMEMBER. The caller seeds
// it (a replicated store from the log entry's index and term), so every
// replica draws the same numbers; math/rand/v2's PCG satisfies it, and its
// output is fixed by its specification, unlike the convenience methods of
// rand.Rand, which is why this package turns raw bits into picks itself.
type Source interface {
	Uint64() uint64
}

// Intn returns a uniform integer in [0, n) from src's bits (Lemire's
// multiply-and-reject), so that a pick depends on nothing but the source.
func Intn(src Source, n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(src.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), un)
		}
	}
	return int(hi)
}

// RandomMember returns a copy of one uniformly chosen member. The set must not
// be empty.
func (s *Set) RandomMember(src Source) []byte {
	return s.memberAt(nil, Intn(src, s.Len()))
}

// RandomMembersWithRepeats calls fn n times with independently chosen
// members (SRANDMEMBER with a negative count). The slice is valid only during
// the call.
func (s *Set) RandomMembersWithRepeats(src Source, n int, fn func(m []byte)) {
	var buf []byte
	size := s.Len()
	for range n {
		buf = s.memberAt(buf[:0], Intn(src, size))
		fn(buf)
	}
}

// RandomMembers returns count distinct members (SRANDMEMBER with a positive
// count). With count ≥ Len it returns the whole set in storage order; a
// listpack answers in listpack order, as Redis's single selection-sampling
// pass does.
func (s *Set) RandomMembers(src Source, count int) [][]byte {
	size := s.Len()
	if count >= size {
		return s.Members()
	}
	if count <= 0 {
		return nil
	}
	positions := s.pickPositions(src, count)
	out := make([][]byte, len(positions))
	for i, p := range positions {
		out[i] = s.memberAt(nil, p)
	}
	return out
}

// pickPositions chooses count distinct storage positions. For a listpack, or
// whenever count is a large share of the set, it is one pass of selection
// sampling (Knuth's algorithm S), giving positions in storage order; for a
// small share of a large set it draws until it has count distinct ones.
func (s *Set) pickPositions(src Source, count int) []int {
	size := s.Len()
	out := make([]int, 0, count)
	if s.kind() == Listpack || count*3 > size {
		need := count
		for i := 0; i < size && need > 0; i++ {
			if Intn(src, size-i) < need {
				out = append(out, i)
				need--
			}
		}
		return out
	}
	seen := make(map[int]struct{}, count)
	for len(out) < count {
		p := Intn(src, size)
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		out = append(out, p)
	}
	return out
}

// Pop removes and returns one uniformly chosen member (SPOP without count).
// The caller deletes the key if the set is now empty.
func (s *Set) Pop(src Source) []byte { return s.PopAppend(nil, src) }

// PopAppend is Pop that appends the member to dst (the same pick from the
// same source), so that a caller copying it elsewhere reuses one buffer.
func (s *Set) PopAppend(dst []byte, src Source) []byte {
	p := Intn(src, s.Len())
	dst = s.memberAt(dst, p)
	s.removeAt(p)
	return dst
}

// PopN removes and returns count members, 0 < count < Len (the caller handles
// count ≥ Len by taking the whole set and deleting the key). Like Redis it
// either pops count members one by one, or, when few members remain, keeps
// the remaining ones in a freshly built set (which may be a smaller encoding:
// one of the few downgrades Redis makes).
func (s *Set) PopN(src Source, count int, lim Limits) [][]byte {
	size := s.Len()
	remaining := size - count
	if remaining*5 > count {
		if s.kind() == Listpack {
			positions := s.pickPositions(src, count)
			out := make([][]byte, len(positions))
			for i, p := range positions {
				out[i] = s.memberAt(nil, p)
			}
			// Delete from the tail so earlier positions stay valid.
			for i := len(positions) - 1; i >= 0; i-- {
				s.setBlob(s.kind(), listpack.Delete(s.blob(), listpack.Seek(s.blob(), positions[i])))
			}
			return out
		}
		out := make([][]byte, count)
		for i := range out {
			out[i] = s.Pop(src)
		}
		return out
	}
	var kept *Set
	if s.kind() == Intset {
		kept = newIntset()
	} else {
		kept = newListpack()
	}
	for range remaining {
		p := Intn(src, s.Len())
		m := s.memberAt(nil, p)
		kept.Add(m, lim)
		s.removeAt(p)
	}
	out := s.Members()
	*s = *kept
	return out
}

// removeAt deletes the member at storage position p.
func (s *Set) removeAt(p int) {
	switch s.kind() {
	case Intset:
		b, _ := intset.Remove(s.blob(), intset.Get(s.blob(), p))
		s.setBlob(Intset, b)
	case Listpack:
		s.setBlob(s.kind(), listpack.Delete(s.blob(), listpack.Seek(s.blob(), p)))
	default:
		s.ht().RemoveAt(p)
	}
}
