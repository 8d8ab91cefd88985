package cluster

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// With one P (GOMAXPROCS=1: a process pinned to one CPU, or a container
// limited to one), an fsync made the usual way costs far more CPU than the
// fsync itself. The Go runtime sees a P in a system call; after one sysmon
// tick (20 µs) sysmon hands the P to another thread, and the thread back
// from the fsync must find it again; and every such hand-off resets sysmon
// to polling every 20 µs, so with an fsync per Raft entry sysmon never
// sleeps longer: 13% of a one-node server's CPU under SADD -P1, on top of
// the hand-offs' futex wake-ups. A raw system call keeps the P through the
// fsync, so the runtime sees nothing to hand off: a SADD -P1 then cost 0.80×
// the CPU and the rate rose 1.20× (docs/benchmarks.md, "An fsync that holds
// the CPU").
//
// The price is that with one P nothing else in the process runs during the
// fsync: reads and the parsing of the next requests wait for it, where the
// hand-off would have let them run. That is a loss when an fsync is slow
// (the CPU idles for its whole length, where the hand-off costs a bounded
// amount), so the raw call is used only while the log's fsyncs are quick:
// an average under quickSyncBelow. Redis's appendfsync always makes the same
// choice on every disk: its one thread blocks in fdatasync.
const quickSyncBelow = 500 * time.Microsecond

// syncStats is what one log's segment files share: the running average of
// their fsyncs (an exponentially weighted mean, 1/8 per sample) and counts
// for INFO.
type syncStats struct {
	avg   atomic.Int64 // ns
	syncs atomic.Uint64
	held  atomic.Uint64 // syncs made holding the P
}

func (s *syncStats) add(d time.Duration, held bool) {
	// raft-wal syncs only its tail segment, under its writer lock: one
	// writer, so a load and a store are enough.
	old := s.avg.Load()
	if old == 0 {
		s.avg.Store(int64(d))
	} else {
		s.avg.Store(old + (int64(d)-old)/8)
	}
	s.syncs.Add(1)
	if held {
		s.held.Add(1)
	}
}

// holdP reports whether the next fsync should hold the P: with procs Ps,
// after a first fsync through the file's own Sync, while fsyncs average
// under quickSyncBelow.
func (s *syncStats) holdP(procs int, firstDone bool) bool {
	return procs == 1 && firstDone && time.Duration(s.avg.Load()) < quickSyncBelow
}

// syncFS is raft-wal's file system with segment files whose Sync may hold
// the P. procs reports GOMAXPROCS (tests replace it).
type syncFS struct {
	types.VFS
	stats *syncStats
	procs func() int
}

func newSyncFS(stats *syncStats) syncFS {
	return syncFS{VFS: fs.New(), stats: stats, procs: func() int { return runtime.GOMAXPROCS(0) }}
}

func (v syncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &syncFile{WritableFile: f, fs: v}, nil
}

func (v syncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &syncFile{WritableFile: f, fs: v}, nil
}

type syncFile struct {
	types.WritableFile
	fs syncFS
	// firstDone: a file's first Sync goes through its own, which for a new
	// segment also fsyncs the directory that holds it.
	firstDone bool
}

func (f *syncFile) Sync() error {
	start := time.Now()
	held := f.fs.stats.holdP(f.fs.procs(), f.firstDone)
	var err error
	if held {
		held, err = fsyncHoldingP(f.WritableFile)
	}
	if !held {
		err = f.WritableFile.Sync()
		f.firstDone = f.firstDone || err == nil
	}
	f.fs.stats.add(time.Since(start), held)
	return err
}
