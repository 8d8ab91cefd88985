package fsm

import (
	"sync/atomic"

	"raftset/internal/command"
)

// warmSink keeps the loads of warm (their values are otherwise unused).
var warmSink atomic.Uint64

// warmMin is the fewest ops an entry needs for warm to pay: with fewer
// there are few misses to overlap, and each key is hashed twice.
var warmMin = 8 // a variable only for tests, which turn warming off

// warm loads, before an entry's ops run, the cache lines they will read for
// their keys, all keys' lines of one kind before the next kind
// (hashtable.Table.Warm: the key's index slot, dense offset and bytes; then
// the value cell, kind, deadline and version, the accounting, and the set's
// storage). Applying a pipelined entry of writes to keys spread over a
// keyspace larger than the caches was mostly cache misses taken one after
// another (the lookup, the set, the accounting: about 60% of a follower's
// apply under SADD -P10); loaded this way, their misses overlap. It is only
// a hint: nothing here changes state or decides a reply, and a key that is
// absent, or an op whose second argument is not a key, costs a wasted load.
func (f *FSM) warm(ops []command.Op) {
	if len(ops) < warmMin {
		return
	}
	ks := f.ks
	keys := f.warmKeys[:0]
	for i := range ops {
		if op := &ops[i]; op.Kind == command.OpCommand && len(op.Args) >= 2 {
			keys = append(keys, op.Args[1])
		}
	}
	pos := ks.keys.Warm(keys, f.warmPos[:0])
	clear(keys)
	f.warmKeys, f.warmPos = keys[:0], pos[:0]
	var sink uint64
	for _, p := range pos {
		if p < 0 || p >= ks.n {
			continue
		}
		c, i := ks.cell(p)
		sink += uint64(c.kinds[i]) + uint64(c.exps[i]) + c.vers[i]
		if p < len(ks.acct.sz) {
			sink += uint64(ks.acct.sz[p])
		}
	}
	for _, p := range pos {
		if p >= 0 && p < ks.n && ks.isSet(p) {
			c, i := ks.cell(p)
			sink += uint64(c.vals[i].Warm())
		}
	}
	warmSink.Add(sink)
}
