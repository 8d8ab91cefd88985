package fsm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// seedOps is the seed benchmark's write load (docs/benchmarks.md):
// 10,000,000 "SADD __rand_int__ __rand_int__", key and member each a
// 12-digit zero-padded decimal below 200,000, which leaves 200,000 listpack
// sets of about 50 members. The generator and its seed are those of
// internal/setenc's BenchmarkSeedMemory, so the two build the same sets and
// their bytes per key can be compared.
const (
	seedKeys  = 200_000
	seedSAdds = 10_000_000
	seedBatch = 1000 // SADDs per log entry (group commit)
)

func appendPadded(dst []byte, v int) []byte {
	var buf [12]byte
	for i := len(buf) - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:]...)
}

// buildSeed applies the seed load to f through Apply, in entries of
// seedBatch SADDs, and returns the number of log entries.
func buildSeed(f *FSM) int {
	r := rand.New(rand.NewPCG(1, 2))
	sadd := []byte("sadd")
	ops := make([]command.Op, 0, seedBatch)
	var data []byte
	index := 0
	for n := 0; n < seedSAdds; n += seedBatch {
		ops = ops[:0]
		arena := make([]byte, 0, seedBatch*24)
		for range seedBatch {
			start := len(arena)
			arena = appendPadded(arena, r.IntN(seedKeys))
			arena = appendPadded(arena, r.IntN(seedKeys))
			ops = append(ops, command.Cmd(sadd, arena[start:start+12], arena[start+12:start+24]))
		}
		e := command.Entry{Type: command.TypeBatch, NowMs: int64(1_700_000_000_000 + n), Ops: ops}
		data = e.Encode(data[:0])
		index++
		f.Apply(&raft.Log{Index: uint64(index), Term: 1, Type: raft.LogCommand, Data: data})
	}
	return index
}

// BenchmarkSeedMemory reports the live heap per key of the seed dataset
// (target: at most 840 bytes; Redis 7.2 uses about 800), measured as
// runtime.MemStats.HeapAlloc after a GC, everything the FSM holds included.
// Run it with -benchtime 1x (one build takes about a minute).
func BenchmarkSeedMemory(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := New(Config{})
		start := time.Now()
		buildSeed(f)
		build := time.Since(start)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := f.Stats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Keys), "bytes/key")
		b.ReportMetric(float64(st.MemoryBytes)/float64(st.Keys), "stats-bytes/key")
		b.ReportMetric(float64(build.Nanoseconds())/seedSAdds, "ns/sadd")
		if st.Listpacks != st.Keys {
			b.Fatalf("seed dataset: %+v, want only listpacks", st)
		}
		runtime.KeepAlive(f)
	}
}

// BenchmarkSnapshotCapture reports how long Snapshot() holds the apply lock
// on the seed dataset (target: under 50 ms), and how long Release() holds it
// to clear the shared flags.
func BenchmarkSnapshotCapture(b *testing.B) {
	f := New(Config{})
	buildSeed(f)
	runtime.GC() // measure the steady state, not the build's garbage collection
	var capture, release time.Duration
	for b.Loop() {
		start := time.Now()
		s, err := f.Snapshot()
		capture += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		s.Release()
		release += time.Since(start)
	}
	b.ReportMetric(float64(capture.Microseconds())/1000/float64(b.N), "ms/capture")
	b.ReportMetric(float64(release.Microseconds())/1000/float64(b.N), "ms/release")
}

// BenchmarkSnapshotPersist writes the seed dataset's snapshot.
func BenchmarkSnapshotPersist(b *testing.B) {
	f := New(Config{})
	buildSeed(f)
	for b.Loop() {
		sink := &memSink{}
		s, _ := f.Snapshot()
		if err := s.Persist(sink); err != nil {
			b.Fatal(err)
		}
		s.Release()
		b.ReportMetric(float64(sink.Len())/seedKeys, "file-bytes/key")
	}
}

// BenchmarkApply measures Apply of entries of 100 commands (decoding
// included) on a keyspace of 10,000 listpack sets of 20 members.
func BenchmarkApply(b *testing.B) {
	for _, cmd := range []string{"sadd", "sismember", "srem", "set", "get"} {
		b.Run(cmd, func(b *testing.B) {
			f := New(Config{})
			var ops []command.Op
			for i := range 10_000 {
				for j := range 20 {
					ops = append(ops, command.Cmd(toArgs("sadd", fmt.Sprintf("key:%06d", i), fmt.Sprintf("member:%06d", j))...))
				}
			}
			e := command.Entry{Type: command.TypeBatch, Ops: ops}
			f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: e.Encode(nil)})
			r := rand.New(rand.NewPCG(3, 4))
			entries := make([][]byte, 64)
			for i := range entries {
				ops = ops[:0]
				for range 100 {
					k, m := fmt.Sprintf("key:%06d", r.IntN(10_000)), fmt.Sprintf("member:%06d", r.IntN(40))
					if cmd == "get" {
						ops = append(ops, command.Cmd(toArgs(cmd, k)...))
					} else {
						ops = append(ops, command.Cmd(toArgs(cmd, k, m)...))
					}
				}
				e := command.Entry{Type: command.TypeBatch, Ops: ops}
				entries[i] = e.Encode(nil)
			}
			index := uint64(1)
			b.ReportAllocs()
			for b.Loop() {
				index++
				f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: entries[index%64]})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/cmd")
		})
	}
}

// BenchmarkStringMemory reports the live heap per key of 200,000 string
// keys ("k:" and a 12-digit number) set 3,000,000 times at random, as the
// issue's redis-benchmark reproduction does, before and after the
// defragmenter packed the values (bench/strings.sh measures the server
// next to redis-server). Values: 32 bytes, or integers.
// Run it with -benchtime 1x.
func BenchmarkStringMemory(b *testing.B) {
	for _, tc := range []struct {
		name string
		val  func(r *rand.Rand) []byte
	}{
		{"32B", func(*rand.Rand) []byte { return []byte("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") }},
		{"int", func(r *rand.Rand) []byte { return fmt.Appendf(nil, "%d", r.IntN(1_000_000_000)) }},
		{"32B-ttl", func(*rand.Rand) []byte { return []byte("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				var before, after, packed runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				f := New(Config{})
				r := rand.New(rand.NewPCG(1, 2))
				set, px := []byte("set"), []byte("pxat")
				never := []byte("4000000000000")
				ops := make([]command.Op, 0, seedBatch)
				var data []byte
				index := 0
				for n := 0; n < 3_000_000; n += seedBatch {
					ops = ops[:0]
					for range seedBatch {
						k := appendPadded([]byte("k:"), r.IntN(seedKeys))
						if tc.name == "32B-ttl" {
							ops = append(ops, command.Cmd(set, k, tc.val(r), px, never))
						} else {
							ops = append(ops, command.Cmd(set, k, tc.val(r)))
						}
					}
					e := command.Entry{Type: command.TypeBatch, NowMs: int64(1_700_000_000_000 + n), Ops: ops}
					data = e.Encode(data[:0])
					index++
					f.Apply(&raft.Log{Index: uint64(index), Term: 1, Type: raft.LogCommand, Data: data})
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&after)
				for range 4 { // the values become stable, then move
					for !f.Defrag(1 << 20).CycleDone {
					}
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&packed)
				keys := float64(f.Stats().Keys)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
				b.ReportMetric(float64(packed.HeapAlloc-before.HeapAlloc)/keys, "packed-bytes/key")
				b.ReportMetric(float64(packed.HeapInuse-before.HeapInuse)/keys, "packed-inuse/key")
				runtime.KeepAlive(f)
			}
		})
	}
}

// BenchmarkGetTTL compares GET on keys with a deadline with GET on keys
// without one (invariants §4: the deadline lives with the key, so a read of
// a key with a TTL costs no second lookup). 100,000 keys of 32-byte values,
// as bench/strings.sh, read in pipelined runs of 50 through ReadBatch, as
// resp hands them over; ns/op and cpu-ns/op (the process's CPU time, which
// the scheduler of a shared machine disturbs less) are per GET.
//
//	go test -run '^$' -bench GetTTL -count 3 ./fsm/
func BenchmarkGetTTL(b *testing.B) {
	const keys, pipeline = 100_000, 50
	for _, ttl := range []bool{false, true} {
		name := "plain"
		if ttl {
			name = "ttl"
		}
		b.Run(name, func(b *testing.B) {
			f := New(Config{})
			const now = int64(1_700_000_000_000)
			val, deadline := []byte("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), []byte(fmt.Sprint(now+100_000_000))
			ops := make([]command.Op, 0, 1000)
			var data []byte
			for i := 0; i < keys; i += 1000 {
				ops = ops[:0]
				for j := i; j < i+1000; j++ {
					a := [][]byte{[]byte("set"), appendPadded([]byte("k:"), j), val}
					if ttl {
						a = append(a, []byte("pxat"), deadline)
					}
					ops = append(ops, command.Cmd(a...))
				}
				e := command.Entry{Type: command.TypeBatch, NowMs: now, Ops: ops}
				data = e.Encode(data[:0])
				f.Apply(&raft.Log{Index: uint64(i/1000 + 1), Term: 1, Type: raft.LogCommand, Data: data})
			}
			if _, exp := f.KeyspaceCounts(); (exp == keys) != ttl {
				b.Fatalf("%d keys with a deadline", exp)
			}
			r := rand.New(rand.NewPCG(3, 4))
			batches := make([][][][]byte, 64)
			for i := range batches {
				for range pipeline {
					batches[i] = append(batches[i], [][]byte{[]byte("get"), appendPadded([]byte("k:"), r.IntN(keys))})
				}
			}
			out := make([][]byte, pipeline)
			runtime.GC()
			b.ResetTimer()
			cpu := processCPU()
			for i := 0; i < b.N; i += pipeline {
				f.ReadBatch(batches[i/pipeline%len(batches)], now+1000, nil, out)
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			if len(out[0]) != len("$32\r\n")+32+2 {
				b.Fatalf("GET = %q", out[0])
			}
		})
	}
}

// BenchmarkSlotIndexMemory reports what the per-slot key index costs: the
// live heap per key of 1,000,000 string keys ("key:N" = "value:N", what
// Redis's DEBUG POPULATE writes) without the index and once it is built,
// after a collection, and the time to build it for all of them.
// Run it with -benchtime 1x.
//
//	go test -run '^$' -bench SlotIndexMemory -benchtime 1x -count 3 ./fsm/
func BenchmarkSlotIndexMemory(b *testing.B) {
	const keys = 1_000_000
	for b.Loop() {
		var before, plain, indexed runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := New(Config{})
		set := []byte("set")
		ops := make([]command.Op, 0, seedBatch)
		var data []byte
		for n := 0; n < keys; n += seedBatch {
			ops = ops[:0]
			for i := n; i < n+seedBatch; i++ {
				ops = append(ops, command.Cmd(set, fmt.Appendf(nil, "key:%d", i), fmt.Appendf(nil, "value:%d", i)))
			}
			e := command.Entry{Type: command.TypeBatch, NowMs: 1_700_000_000_000, Ops: ops}
			data = e.Encode(data[:0])
			f.Apply(&raft.Log{Index: uint64(n/seedBatch + 1), Term: 1, Type: raft.LogCommand, Data: data})
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&plain)
		start := time.Now()
		f.EnableSlotIndex()
		build := time.Since(start)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&indexed)
		b.ReportMetric(float64(plain.HeapAlloc-before.HeapAlloc)/keys, "bytes/key")
		b.ReportMetric(float64(indexed.HeapAlloc-before.HeapAlloc)/keys, "indexed-bytes/key")
		b.ReportMetric(float64(indexed.HeapAlloc-plain.HeapAlloc)/keys, "index-bytes/key")
		b.ReportMetric(float64(build.Milliseconds()), "build-ms")
		if f.CountKeysInSlot(0) == 0 {
			b.Fatal("no key in slot 0")
		}
		runtime.KeepAlive(f)
	}
}

// BenchmarkKeyChurn measures what the slot index adds to the writes that
// create and delete keys (the only ones it touches): entries of 100
// commands, SET of a new key and DEL of the oldest, on a keyspace of
// 100,000 keys, without and with the index. cpu-ns/cmd is the process's
// CPU time inside Apply (getrusage), steadier than wall time on a shared
// machine.
//
//	go test -run '^$' -bench KeyChurn -count 1 ./fsm/    # 5 times: plain and indexed alternate
func BenchmarkKeyChurn(b *testing.B) {
	for _, indexed := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "indexed"}[indexed], func(b *testing.B) {
			f := New(Config{})
			const live = 100_000
			var ops []command.Op
			for i := range live {
				ops = append(ops, command.Cmd(toArgs("set", fmt.Sprintf("key:%d", i), "v")...))
			}
			e := command.Entry{Type: command.TypeBatch, Ops: ops}
			f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: e.Encode(nil)})
			if indexed {
				f.EnableSlotIndex()
			}
			next, index := live, uint64(1)
			var data []byte
			var cpu time.Duration // of Apply alone: building the entries costs more than applying them
			for b.Loop() {
				b.StopTimer()
				ops = ops[:0]
				for range 50 {
					ops = append(ops, command.Cmd(toArgs("set", fmt.Sprintf("key:%d", next), "v")...),
						command.Cmd(toArgs("del", fmt.Sprintf("key:%d", next-live))...))
					next++
				}
				e := command.Entry{Type: command.TypeBatch, Ops: ops}
				data = e.Encode(data[:0])
				index++
				b.StartTimer()
				c0 := processCPU()
				f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
				cpu += processCPU() - c0
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/cmd")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*100), "cpu-ns/cmd")
		})
	}
}
