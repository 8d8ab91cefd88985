package hashtable

import (
	"hash/maphash"
	"sync/atomic"
)

// warmSink takes a sum of what Warm loads, so that the compiler keeps the
// loads (their values are otherwise unused).
var warmSink atomic.Uint32

// Warm prepares lookups of ms. A lookup in a table bigger than the caches
// is a chain of misses (the index slot and its tag, then the member's dense
// offset, then its bytes), each waiting for the one before, and a batch of
// lookups is those chains one after another. Warm runs the batch stage by
// stage instead: every member's index slot, then every dense offset, then
// every member's first bytes, so that the loads of one stage are
// independent and the processor overlaps their misses; the lookups that
// follow find the lines in the cache. It changes nothing.
//
// pos receives, per member, the position its home slot holds when the tag
// matches (the member's own, unless it is absent or displaced), or -1, for
// the caller to warm what it keeps per position. Warm returns pos.
func (t *Table) Warm(ms [][]byte, pos []int) []int {
	pos = pos[:0]
	if len(t.index) == 0 {
		for range ms {
			pos = append(pos, -1)
		}
		return pos
	}
	var sink uint32
	for _, m := range ms {
		h := maphash.Bytes(seed, m)
		i := t.home(h)
		sink += t.index[i] + uint32(t.tags[i])
		pos = append(pos, i<<8|int(tagOf(h)))
	}
	for j, s := range pos {
		i, tag := s>>8, uint8(s)
		v := t.index[i]
		if v == 0 || t.tags[i] != tag || int(v) > len(t.dense) {
			pos[j] = -1
			continue
		}
		pos[j] = int(v - 1)
		sink += t.dense[v-1]
	}
	for _, p := range pos {
		if p >= 0 {
			if off := int(t.dense[p]); off < len(t.arena) {
				sink += uint32(t.arena[off])
			}
		}
	}
	warmSink.Add(sink)
	return pos
}
