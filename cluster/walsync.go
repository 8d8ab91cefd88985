package cluster

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// With one P (GOMAXPROCS=1: a process pinned to one CPU by taskset, docker
// --cpuset-cpus or Kubernetes' static CPU manager, or GOMAXPROCS=1 set; a
// CPU quota below 2 still gives two Ps), an fsync made the usual way costs
// far more CPU than the fsync itself. The Go runtime sees a P in a system
// call; after a sysmon tick or two (20 µs each) sysmon hands the P to
// another thread, and the thread back from the fsync must find it again;
// and every such hand-off resets sysmon to polling every 20 µs, so with an
// fsync per Raft entry sysmon never sleeps longer: 13% of a one-node
// server's CPU under SADD -P1, on top of the hand-offs' futex wake-ups. A
// raw system call keeps the P through the fsync, so the runtime sees
// nothing to hand off: a SADD -P1 then cost 0.80× the CPU and the rate rose
// 1.20× (docs/benchmarks.md, "An fsync that holds the CPU").
//
// The price: with one P the whole process is frozen during the fsync, as
// Redis's one thread is in its appendfsync always. Reads, the parsing of
// the next requests, Raft's heartbeats all wait for it, where the hand-off
// would have let them run. That is a loss when fsyncs are slow (the CPU
// idles for the fsync's whole length, where the hand-off costs a bounded
// amount), so the raw call is used only while the held fsyncs average
// under quickSyncBelow; once they do not, one fsync in probeEvery is still
// held, to notice when the disk is quick again. And it is used only while
// the process has one log open: with several (a host of several shards)
// one log's held fsync would keep the others from starting theirs.
const (
	quickSyncBelow = 500 * time.Microsecond
	probeEvery     = 64
)

// openLogs counts the raft-wal logs open in the process.
var openLogs atomic.Int32

// syncStats is what one log's segment files share: the running average of
// their held fsyncs (an exponentially weighted mean, 1/8 per sample, each
// at most twice quickSyncBelow; the usual path's times are not samples, as
// they include the wait for the P to come back) and counts for INFO.
type syncStats struct {
	avg   atomic.Int64 // ns; 0 until the first held fsync
	syncs atomic.Uint64
	held  atomic.Uint64 // syncs made holding the P
}

// holdP reports whether the next fsync, the syncs-th, should hold the P.
func (s *syncStats) holdP(alone bool, quickBelow time.Duration) bool {
	if !alone {
		return false
	}
	return time.Duration(s.avg.Load()) < quickBelow || s.syncs.Load()%probeEvery == 0
}

func (s *syncStats) add(held bool, d time.Duration) {
	// raft-wal syncs only its tail segment, under its writer lock: one
	// writer, so a load and a store are enough.
	if held {
		old := s.avg.Load()
		if old == 0 {
			s.avg.Store(int64(d))
		} else {
			s.avg.Store(old + (int64(d)-old)/8)
		}
		s.held.Add(1)
	}
	s.syncs.Add(1)
}

// syncFS is raft-wal's file system with segment files whose Sync may hold
// the P. alone reports whether the process runs one P and this one log;
// quickBelow is quickSyncBelow (tests replace both).
type syncFS struct {
	types.VFS
	stats      *syncStats
	alone      func() bool
	quickBelow time.Duration
	// lead defers the fsyncs of a leader's batches (leadersync.go); nil
	// for a log that never defers (a migration's copy).
	lead *leaderSyncs
}

func newSyncFS(stats *syncStats) syncFS {
	return syncFS{
		VFS:        fs.New(),
		stats:      stats,
		alone:      func() bool { return runtime.GOMAXPROCS(0) == 1 && openLogs.Load() == 1 },
		quickBelow: quickSyncBelow,
	}
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
	if f.firstDone && f.fs.lead != nil && f.fs.lead.deferring.Load() {
		f.fs.lead.markDirty(f)
		return nil
	}
	if f.firstDone && f.fs.stats.holdP(f.fs.alone(), f.fs.quickBelow) {
		start := time.Now()
		if held, err := fsyncHoldingP(f.WritableFile); held {
			// A sample counts for at most twice the line: one fsync
			// the disk stalled for milliseconds would otherwise keep
			// the average over it for hundreds of quick ones.
			f.fs.stats.add(true, min(time.Since(start), 2*f.fs.quickBelow))
			return err
		}
	}
	err := f.WritableFile.Sync()
	f.firstDone = f.firstDone || err == nil
	f.fs.stats.add(false, 0)
	return err
}

// syncDeferred is the syncer's fsync of a file whose Sync was deferred. It
// never holds the P: the point of deferring is that the leader's loop and
// its replicators run during the fsync.
func (f *syncFile) syncDeferred() error {
	err := f.WritableFile.Sync()
	f.fs.stats.add(false, 0)
	return err
}
