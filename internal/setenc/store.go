package setenc

import (
	"slices"

	"raftset/internal/setenc/intset"
)

// These constructors build the results of SINTER(STORE), SUNION(STORE) and
// SDIFF(STORE) in the encoding Redis 7.2 gives them (src/t_set.c
// sinterGenericCommand and sunionDiffGenericCommand). The caller treats a
// missing key as an empty set for union and difference, and answers an
// intersection with a missing key as empty without calling Inter.

// Inter returns the intersection of sets. The result starts as an intset if
// the smallest input is one and as a listpack otherwise, grows by the normal
// rules, and ends as an intset whenever all its members are integers and fit,
// whatever the inputs were.
func Inter(sets []*Set, lim Limits) *Set {
	sorted := slices.Clone(sets)
	slices.SortStableFunc(sorted, func(a, b *Set) int { return a.Len() - b.Len() })
	var dst *Set
	if sorted[0].kind() == Intset {
		dst = newIntset()
	} else {
		dst = newListpack()
	}
	sorted[0].Iterate(func(m []byte) bool {
		for _, o := range sorted[1:] {
			if o != sorted[0] && !o.Contains(m) {
				return true
			}
		}
		dst.Add(m, lim)
		return true
	})
	if dst.kind() != Intset && dst.Len() <= lim.maxIntset() {
		dst.tryIntset()
	}
	return dst
}

// tryIntset converts the set to an intset if every member is an integer.
func (s *Set) tryIntset() {
	vals := make([]int64, 0, s.Len())
	ok := true
	s.Iterate(func(m []byte) bool {
		v, isInt := parseInt(m)
		if !isInt {
			ok = false
			return false
		}
		vals = append(vals, v)
		return true
	})
	if !ok || len(vals) == 0 {
		return
	}
	slices.Sort(vals)
	*s = *blobSet(Intset, intset.FromSorted(vals))
}

// Union returns the union of sets, built from an empty intset by adding the
// members of each set in turn.
func Union(sets []*Set, lim Limits) *Set {
	dst := newIntset()
	for _, s := range sets {
		if s == nil {
			continue
		}
		s.Iterate(func(m []byte) bool { dst.Add(m, lim); return true })
	}
	return dst
}

// Diff returns the members of sets[0] that are in none of the others; a nil
// entry is a missing key. Like Redis it picks the cheaper of two algorithms
// (which can change the order members arrive in, and so the encoding), and a
// later argument that is the very same set as the first empties the result.
func Diff(sets []*Set, lim Limits) *Set {
	dst := newIntset()
	first := sets[0]
	if first == nil {
		return dst
	}
	for _, s := range sets[1:] {
		if s == first {
			return dst
		}
	}
	oneWork, twoWork := 0, 0
	for _, s := range sets {
		if s == nil {
			continue
		}
		oneWork += first.Len()
		twoWork += s.Len()
	}
	oneWork /= 2
	if oneWork <= twoWork {
		others := slices.Clone(sets[1:])
		// Largest first: a member is most likely found in a big set.
		slices.SortStableFunc(others, func(a, b *Set) int { return setLen(b) - setLen(a) })
		first.Iterate(func(m []byte) bool {
			for _, o := range others {
				if o != nil && o.Contains(m) {
					return true
				}
			}
			dst.Add(m, lim)
			return true
		})
		return dst
	}
	first.Iterate(func(m []byte) bool { dst.Add(m, lim); return true })
	for _, s := range sets[1:] {
		if s == nil {
			continue
		}
		s.Iterate(func(m []byte) bool { dst.Remove(m); return dst.Len() > 0 })
		if dst.Len() == 0 {
			break
		}
	}
	return dst
}

func setLen(s *Set) int {
	if s == nil {
		return 0
	}
	return s.Len()
}
