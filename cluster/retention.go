package cluster

import (
	"errors"
	"math"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Log retention by size. Raft snapshots after SnapshotThreshold entries and
// keeps TrailingLogs entries, but a group-commit entry holds anything from
// one command to thousands: after the seed's 10M SADDs (about 40k entries)
// raft.db had grown to 386 MB with no snapshot taken, and bbolt never gives
// file space back, so the file — and the pages of it the node has mapped,
// which count in its RSS — stay at that high-water mark. Counting bytes
// bounds both: a snapshot once SnapshotLogBytes were stored since the last
// one (or, once the data is larger, SnapshotLogPercent of the latest
// snapshot's size), and TrailingLogs lowered so the kept tail is about
// TrailingLogBytes.

const (
	retentionPeriod = 250 * time.Millisecond
	minTrailingLogs = 64
)

func (n *Node) runLogRetention() {
	defer n.wg.Done()
	// The loop also empties the idle log cache (logcache.go). It runs even
	// with every bound off, which CONFIG SET may turn on.
	t := time.NewTicker(retentionPeriod)
	defer t.Stop()
	// Bytes and entries stored up to the last snapshot this loop knows of.
	baseBytes, baseEntries := n.stores.bytes.Load(), n.stores.entries.Load()
	lastSnap, snapSize := n.lastSnapshotIndex(), n.latestSnapshotSize()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		if n.cache != nil && n.cache.dropIfIdle(logCacheIdle) {
			// The log went quiet: its file's pages go too (logpages_linux.go).
			path := filepath.Join(n.cfg.DataDir, raftDBFile)
			if _, err := releaseFilePages(path); err != nil {
				n.log.Debug("release log file pages", "error", err)
			}
			// The entries the cache dropped (up to logCacheBytes) were live
			// at the last collection, so the idle node's return (defrag.go)
			// does not count them as garbage, and an idle heap is collected
			// only every two minutes: after 1,000,000 keys expired they were
			// half of used_memory 10 s later. The node has been quiet for
			// logCacheIdle, so a collection now costs nobody a wait.
			debug.FreeOSMemory()
		}
		if idx := n.lastSnapshotIndex(); idx != lastSnap {
			// Raft took one (entry threshold, SAVE, catch-up install).
			lastSnap = idx
			baseBytes, baseEntries = n.stores.bytes.Load(), n.stores.entries.Load()
			snapSize = n.latestSnapshotSize()
		}
		bytes, entries := n.stores.bytes.Load()-baseBytes, n.stores.entries.Load()-baseEntries
		n.st.retentionRounds.Add(1)
		if entries >= 16 {
			n.fitTrailingLogs(bytes / entries)
		}
		bound := snapshotLogBound(n.snapLogBytes.Load(), int(n.snapLogPercent.Load()), snapSize)
		if bound == 0 || bytes < bound {
			continue
		}
		markBytes, markEntries := n.stores.bytes.Load(), n.stores.entries.Load()
		start := time.Now()
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.st.logSizeSnapshots.Add(1)
			n.log.Debug("snapshot for log size", "log_bytes", bytes, "entries", entries, "took", time.Since(start))
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			n.log.Warn("snapshot for log size failed; retrying", "log_bytes", bytes, "error", err)
			continue
		}
		baseBytes, baseEntries = markBytes, markEntries
		lastSnap, snapSize = n.lastSnapshotIndex(), n.latestSnapshotSize()
	}
}

// snapshotLogBound is how many bytes of log since the latest snapshot call
// for the next one: fixed, or percent of the latest snapshot's size when
// that is more (0: never, fixed is negative). Writing a snapshot costs in
// proportion to the data while the log grows with the writes, so a bound in
// proportion to the snapshot keeps the snapshots' share of the work
// constant as the data grows, where a fixed one had a node of a few GB
// writing it out again every few seconds of writes.
func snapshotLogBound(fixed int64, percent int, snapSize int64) uint64 {
	if fixed < 0 {
		return 0
	}
	b := uint64(fixed)
	if unit := uint64(max(snapSize, 0)) / 100; percent > 0 && unit > 0 {
		if uint64(percent) > math.MaxUint64/unit {
			return math.MaxUint64
		}
		b = max(b, unit*uint64(percent))
	}
	return b
}

// latestSnapshotSize is the size in bytes of the newest snapshot this node
// keeps, 0 when it has none or cannot tell: the size of the last one this
// process wrote (taken or installed), else the newest on disk. The
// in-memory store is not listed: its List hands out the meta of a snapshot
// still being written, which its sink updates without a lock.
func (n *Node) latestSnapshotSize() int64 {
	if s := n.sized.latest.Load(); s > 0 || n.cfg.InMemory {
		return s
	}
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0
	}
	return metas[0].Size
}

// sizedSnapshots notes the size of every snapshot written through it that
// closed without error.
type sizedSnapshots struct {
	raft.SnapshotStore
	latest atomic.Int64
}

func (s *sizedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &sizedSink{SnapshotSink: sink, store: s}, nil
}

type sizedSink struct {
	raft.SnapshotSink
	store *sizedSnapshots
	n     int64
}

func (s *sizedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.n += int64(n)
	return n, err
}

func (s *sizedSink) Close() error {
	err := s.SnapshotSink.Close()
	if err == nil {
		s.store.latest.Store(s.n)
	}
	return err
}

// fitTrailingLogs sets Raft's TrailingLogs to TrailingLogBytes' worth of
// entries of avg bytes, within [minTrailingLogs, cfg.TrailingLogs]; it only
// reloads Raft's config when the value moves by more than a quarter.
func (n *Node) fitTrailingLogs(avg uint64) {
	if n.cfg.TrailingLogBytes < 0 {
		return
	}
	want := min(max(uint64(n.cfg.TrailingLogBytes)/max(avg, 1), minTrailingLogs), n.cfg.TrailingLogs)
	rc := n.raft.ReloadableConfig()
	if have := rc.TrailingLogs; want*4 >= have*3 && want*4 <= have*5 {
		return
	}
	rc.TrailingLogs = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("set trailing logs", "entries", want, "error", err)
	}
}

func (n *Node) lastSnapshotIndex() uint64 {
	v, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return v
}
