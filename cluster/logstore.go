package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/segment"
)

// The Raft log lives in one of two stores; the stable store (term, vote) is
// always raft.db. bbolt commits an append with two fdatasyncs (data pages,
// then the meta page) and rewrites B-tree pages; raft-wal appends to a
// segment file and commits a batch with one fsync.
//
// A data directory holds its log in exactly one place, and which one is
// decided by the directory, not by the setting alone: a wal/ directory is
// the log whenever it exists (it only ever appears complete, by rename), and
// raft.db's log bucket is the log otherwise. Changing the setting migrates
// the log at start, crash-safely:
//
//   - bolt → wal: copy raft.db's entries into wal.tmp/, rename it to wal/,
//     then empty raft.db's log. A crash before the rename leaves raft.db the
//     log (wal.tmp/ is discarded); after it, wal/ is (raft.db's stale copy is
//     emptied on the next start).
//   - wal → bolt: empty raft.db's log, copy wal/'s entries into it, rename
//     wal/ to wal.old/ and remove that. A crash before the rename leaves wal/
//     the log, and the copy is redone from scratch.
const (
	// LogStoreBolt keeps the log in raft.db with the stable store.
	LogStoreBolt = "bolt"
	// LogStoreWAL keeps the log in raft-wal segment files under wal/.
	LogStoreWAL = "wal"

	walDir    = "wal"
	walTmpDir = "wal.tmp"
	walOldDir = "wal.old"
	// migrateBatchBytes groups copied entries into appends of about this
	// size: one fsync each.
	migrateBatchBytes = 4 << 20
)

// DefaultLogStore is the log store a node uses when Config.LogStore is empty.
const DefaultLogStore = LogStoreWAL

// openLogStore opens the Raft log of the data directory dir as kind (bolt or
// wal), migrating it from the other store first if that one holds it. bolt
// is the open raft.db. The closer closes what openLogStore opened beyond
// bolt (nil for bolt).
func openLogStore(dir, kind string, bolt *raftboltdb.BoltStore, logger hclog.Logger) (raft.LogStore, io.Closer, error) {
	if err := os.RemoveAll(filepath.Join(dir, walTmpDir)); err != nil {
		return nil, nil, fmt.Errorf("cluster: remove an unfinished migration: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, walOldDir)); err != nil {
		return nil, nil, fmt.Errorf("cluster: remove a migrated log: %w", err)
	}
	hasWAL, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		return nil, nil, err
	}
	switch kind {
	case "", LogStoreBolt:
		if hasWAL {
			if err := walToBolt(dir, bolt, logger); err != nil {
				return nil, nil, err
			}
		}
		return bolt, nil, nil
	case LogStoreWAL:
		if !hasWAL {
			if err := boltToWAL(dir, bolt, logger); err != nil {
				return nil, nil, err
			}
		}
		// After a migration (now, or one a crash interrupted after its
		// rename) raft.db still has its copy: wal/ is the log, drop it.
		if err := emptyLog(bolt); err != nil {
			return nil, nil, fmt.Errorf("cluster: empty raft.db's migrated log: %w", err)
		}
		w, err := openWAL(filepath.Join(dir, walDir), logger)
		if err != nil {
			return nil, nil, err
		}
		return w, w, nil
	}
	return nil, nil, fmt.Errorf("cluster: unknown log store %q (want %s or %s)", kind, LogStoreBolt, LogStoreWAL)
}

// logStoreOf is the store that holds dir's log: wal when wal/ exists.
func logStoreOf(dir string) (string, error) {
	has, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		return "", err
	}
	if has {
		return LogStoreWAL, nil
	}
	return LogStoreBolt, nil
}

// walStore is raft-wal with the entries that DeleteRange removed from the
// head really gone: raft-wal v0.4 looks an index up in the tail segment
// before checking the log's first index, so an entry compacted away but
// still in the tail segment is returned. Raft would then send a far-behind
// follower those entries instead of the snapshot that replaced them.
type walStore struct {
	*wal.WAL
	syncs  *syncStats   // its segment files' fsyncs (walsync.go)
	lead   *leaderSyncs // the leader's deferred fsyncs (leadersync.go)
	closed *atomic.Bool
}

func (w walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

func openWAL(path string, logger hclog.Logger) (walStore, error) {
	return openWALOn(path, logger, newSyncFS(&syncStats{}))
}

func openWALOn(path string, logger hclog.Logger, vfs syncFS) (walStore, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return walStore{}, fmt.Errorf("cluster: create %s: %w", path, err)
	}
	vfs.lead = newLeaderSyncs()
	openLogs.Add(1)
	w, err := wal.Open(path, wal.WithLogger(logger.Named("wal")), wal.WithSegmentFiler(segment.NewFiler(path, vfs)),
		wal.WithMetaStore(flushingMeta{MetaStore: &metadb.BoltMetaDB{}, syncs: vfs.lead}))
	if err != nil {
		openLogs.Add(-1)
		_ = vfs.lead.close()
		return walStore{}, fmt.Errorf("cluster: open log %s: %w", path, err)
	}
	return walStore{WAL: w, syncs: vfs.stats, lead: vfs.lead, closed: new(atomic.Bool)}, nil
}

// Close closes the log, once, after its deferred fsyncs.
func (w walStore) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	openLogs.Add(-1)
	serr := w.lead.close()
	if err := w.WAL.Close(); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("cluster: close log: %w", serr)
	}
	return nil
}

func boltToWAL(dir string, bolt *raftboltdb.BoltStore, logger hclog.Logger) error {
	first, last, err := bounds(bolt)
	if err != nil {
		return fmt.Errorf("cluster: read raft.db's log: %w", err)
	}
	tmp := filepath.Join(dir, walTmpDir)
	w, err := openWAL(tmp, logger)
	if err != nil {
		return err
	}
	if last > 0 {
		logger.Info("migrating the Raft log from raft.db to wal/", "first", first, "last", last)
		if err := migrate.CopyLogs(context.Background(), w, bolt, migrateBatchBytes, nil); err != nil {
			w.Close()
			return fmt.Errorf("cluster: copy the log from raft.db to %s: %w", walDir, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("cluster: close %s: %w", tmp, err)
	}
	return renameDurably(dir, walTmpDir, walDir)
}

func walToBolt(dir string, bolt *raftboltdb.BoltStore, logger hclog.Logger) error {
	w, err := openWAL(filepath.Join(dir, walDir), logger)
	if err != nil {
		return err
	}
	defer w.Close()
	first, last, err := bounds(w)
	if err != nil {
		return fmt.Errorf("cluster: read %s: %w", walDir, err)
	}
	// An earlier copy that a crash interrupted left part of the log here.
	if err := emptyLog(bolt); err != nil {
		return fmt.Errorf("cluster: empty raft.db's log before the copy: %w", err)
	}
	if last > 0 {
		logger.Info("migrating the Raft log from wal/ to raft.db", "first", first, "last", last)
		if err := migrate.CopyLogs(context.Background(), bolt, w, migrateBatchBytes, nil); err != nil {
			return fmt.Errorf("cluster: copy the log from %s to raft.db: %w", walDir, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("cluster: close %s: %w", walDir, err)
	}
	if err := renameDurably(dir, walDir, walOldDir); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, walOldDir)); err != nil {
		return fmt.Errorf("cluster: remove the migrated log: %w", err)
	}
	return nil
}

func bounds(s raft.LogStore) (first, last uint64, err error) {
	if first, err = s.FirstIndex(); err != nil {
		return 0, 0, err
	}
	last, err = s.LastIndex()
	return first, last, err
}

// emptyLog deletes every entry of s.
func emptyLog(s raft.LogStore) error {
	first, last, err := bounds(s)
	if err != nil || last == 0 {
		return err
	}
	return s.DeleteRange(first, last)
}

// renameDurably renames dir/from to dir/to and syncs dir, so that the
// rename, which decides where the log is, survives a crash.
func renameDurably(dir, from, to string) error {
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cluster: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cluster: sync %s: %w", dir, err)
	}
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("cluster: %w", err)
}
