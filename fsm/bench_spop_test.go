package fsm

import (
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// BenchmarkApplySPop applies bench/rows.sh's spop-P10 load to the state
// machine alone: 200,000 keys named as redis-benchmark's __rand_int__ (12
// zero-padded digits) seeded with 500,000 random SADDs, then entries of 240
// SPOPs of random keys (a one-node group commit's size under 50 pipelining
// connections), each followed by an entry of 240 SADDs so that the sets
// neither drain nor grow while b.N runs. ns/cmd is per command of either.
func BenchmarkApplySPop(b *testing.B) {
	const keys, seed, perEntry = 200_000, 500_000, 240
	f := New(Config{})
	r := rand.New(rand.NewPCG(5, 6))
	randArg := func(arena []byte) ([]byte, []byte) {
		start := len(arena)
		arena = appendPadded(arena, r.IntN(keys))
		return arena, arena[start:len(arena):len(arena)]
	}
	index := uint64(0)
	apply := func(data []byte) {
		index++
		f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
	}
	build := func(name string, withMember bool) []byte {
		arena := make([]byte, 0, perEntry*24)
		ops := make([]command.Op, 0, perEntry)
		for range perEntry {
			var k, m []byte
			arena, k = randArg(arena)
			if withMember {
				arena, m = randArg(arena)
				ops = append(ops, command.Cmd([]byte(name), k, m))
			} else {
				ops = append(ops, command.Cmd([]byte(name), k))
			}
		}
		e := command.Entry{Type: command.TypeBatch, NowMs: 1_700_000_000_000, Ops: ops}
		return e.Encode(nil)
	}
	for range seed / perEntry {
		apply(build("sadd", true))
	}
	spops, sadds := make([][]byte, 64), make([][]byte, 64)
	for i := range spops {
		spops[i], sadds[i] = build("spop", false), build("sadd", true)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		apply(spops[i%64])
		apply(sadds[i%64])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*2*perEntry), "ns/cmd")
}
