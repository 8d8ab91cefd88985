package cluster

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// BenchmarkWriteParallel measures SADD throughput through Write on one node
// with a real raft-boltdb log (fsync per Raft batch). "pipeline" is how many
// ops each Write carries, as resp batches a connection's pipelined writes;
// conns is the number of concurrent writers.
//
//	go test -run '^$' -bench WriteParallel -benchtime 200000x ./cluster/
func BenchmarkWriteParallel(b *testing.B) {
	benchWrites(b, 0, "")
}

// BenchmarkWriteParallelWAL is BenchmarkWriteParallel with the log in
// raft-wal (raft-log-store wal).
func BenchmarkWriteParallelWAL(b *testing.B) {
	benchWrites(b, 0, LogStoreWAL)
}

// BenchmarkWriteSimulatedDisk is BenchmarkWriteParallel on an in-memory log
// whose every write takes at least 1ms (a slow fsync; Go's timers round it
// up), to compare batching changes without the noise of a shared disk.
func BenchmarkWriteSimulatedDisk(b *testing.B) {
	benchWrites(b, time.Millisecond, "")
}

func benchWrites(b *testing.B, simulated time.Duration, logStore string) {
	for _, bc := range []struct{ conns, pipeline int }{{50, 1}, {50, 10}} {
		b.Run("conns="+strconv.Itoa(bc.conns)+"/pipeline="+strconv.Itoa(bc.pipeline), func(b *testing.B) {
			cfg := diskConfig(b, b.TempDir())
			cfg.LogStore = logStore
			if simulated > 0 {
				cfg = fastConfig(b, "n1")
				cfg.wrapLogStore = func(s raft.LogStore) raft.LogStore { return slowLogStore{s, simulated} }
			}
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
			cfg.LeaderLeaseTimeout = 100 * time.Millisecond
			n := mustNode(b, cfg, newBenchFSM(b), true)
			ctx := context.Background()
			var seq atomic.Int64
			entries0, ops0 := n.st.entries.Load(), n.st.ops.Load()
			b.SetParallelism((bc.conns + 1) / 2) // RunParallel runs GOMAXPROCS × this
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				key := []byte("key:" + strconv.FormatInt(seq.Add(1), 10))
				ops := make([]command.Op, 0, bc.pipeline)
				for pb.Next() {
					ops = append(ops, command.Cmd([]byte("SADD"), key, strconv.AppendInt(nil, seq.Add(1), 10)))
					if len(ops) < bc.pipeline {
						continue
					}
					for _, r := range n.Write(ctx, ops) {
						if command.IsError(r) {
							b.Errorf("SADD: %q", r)
							return
						}
					}
					ops = ops[:0]
				}
				if len(ops) > 0 {
					n.Write(ctx, ops)
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			entries, ops := n.st.entries.Load()-entries0, n.st.ops.Load()-ops0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
			if entries > 0 {
				b.ReportMetric(float64(ops)/float64(entries), "ops/entry")
			}
		})
	}
}

// BenchmarkReadBatch measures a connection's pipelined run of reads on one
// leader, as resp hands it over: ten SISMEMBERs behind one barrier per
// ReadBatch call. ns/op and allocs/op are per call of ten (the commands
// are built beforehand).
//
//	go test -run '^$' -bench ReadBatch -benchmem -cpuprofile cpu.out ./cluster/
func BenchmarkReadBatch(b *testing.B) {
	cfg := fastConfig(b, "n1")
	n := mustNode(b, cfg, newBenchFSM(b), true)
	ctx := context.Background()
	const keys = 1000
	for k := range keys {
		ops := make([]command.Op, 0, 20)
		for m := range 20 {
			ops = append(ops, command.Cmd([]byte("SADD"), []byte("key:"+strconv.Itoa(k)), []byte(strconv.Itoa(m))))
		}
		n.Write(ctx, ops)
	}
	const pipeline, batches = 10, 1024
	pool := make([][][][]byte, batches)
	for i := range pool {
		pool[i] = make([][][]byte, pipeline)
		for j := range pipeline {
			k := i*pipeline + j
			pool[i][j] = [][]byte{[]byte("SISMEMBER"), []byte("key:" + strconv.Itoa(k*7919%keys)), []byte(strconv.Itoa(k % 40))}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var seq atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 331
		for pb.Next() {
			i++
			for _, r := range n.ReadBatch(ctx, pool[i%batches], false) {
				if r[0] != ':' {
					b.Errorf("SISMEMBER: %q", r)
					return
				}
			}
		}
	})
}
