package fsm

// KeysWhere counts the keys for which match is true, logically expired ones
// included (as DBSIZE and Redis's CLUSTER COUNTKEYSINSLOT count them), and
// returns copies of the first limit of them. It walks the whole keyspace
// under the read lock: the state keeps no index by hash slot (the state
// machine knows nothing of slots), so CLUSTER COUNTKEYSINSLOT and
// GETKEYSINSLOT cost O(keys) here where Redis's cost O(1) and O(count). A
// per-slot index belongs with slot migration, which needs one anyway
// (docs/sharding.md).
func (f *FSM) KeysWhere(match func(key []byte) bool, limit int) (count int, keys [][]byte) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	for pos := range ks.Len() {
		k := ks.keys.At(pos)
		if !match(k) {
			continue
		}
		count++
		if len(keys) < limit {
			keys = append(keys, append([]byte(nil), k...))
		}
	}
	return count, keys
}
