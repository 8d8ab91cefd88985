package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"raftset/fsm"
)

// ReplayOptions say which state Replay rebuilds.
type ReplayOptions struct {
	// DataDir is a stopped node's directory.
	DataDir string
	// Index is the log index whose state is wanted; 0 means the last entry
	// of the node's log.
	Index uint64
	// FSM is a new state machine that receives the snapshot and the entries.
	FSM    *fsm.FSM
	Logger hclog.Logger
}

// ReplayResult says what Replay applied.
type ReplayResult struct {
	// Index and Term are those of the entry the state is at.
	Index, Term uint64
	// SnapshotIndex is the index of the snapshot the replay started from (0:
	// none, the log from its first entry).
	SnapshotIndex uint64
	// Entries is the number of log entries read after the snapshot.
	Entries int
	// FirstIndex and LastIndex bound the node's log.
	FirstIndex, LastIndex uint64
}

// replayBatch is how many entries one ApplyBatch gets, as a follower
// receives them (raft-max-append-entries' default): the state does not
// depend on it, the state machine being deterministic.
const replayBatch = 64

// Replay rebuilds the state a stopped node had at log index opts.Index, as
// the node itself would: the newest snapshot at or before the index is
// restored, then the log entries after it are applied through the same
// batch path Raft uses (commands and configurations). Nothing in the
// directory changes. It lets an operator check a backup offline, and tests
// compare a backup with the state at exactly the index it reports.
//
// The log's tail may hold entries that were never committed (a node cannot
// know, stopped): an index the cluster acknowledged, such as a backup's, is
// always committed.
func Replay(opts ReplayOptions) (res ReplayResult, err error) {
	if opts.FSM == nil {
		return res, errors.New("replay: a state machine is needed")
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	db := filepath.Join(opts.DataDir, raftDBFile)
	if _, err := os.Stat(db); err != nil {
		return res, fmt.Errorf("replay: %s: %w (is --dir a node's data directory?)", db, err)
	}
	// raft.db's lock tells a running node apart (a read-only open takes a
	// shared lock, which the node's exclusive one refuses): its WAL has no
	// lock of its own, and reading one that is being written could see a
	// torn tail. Read-only also skips the bucket set-up, a write.
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        db,
		BoltOptions: &bbolt.Options{Timeout: time.Second, ReadOnly: true},
	})
	if err != nil {
		return res, fmt.Errorf("replay: open %s: %w (stop the node first)", db, err)
	}
	defer bolt.Close()
	kind, err := logStoreOf(opts.DataDir)
	if err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	// Not openLogStore: it would migrate or clean up, and a replay must
	// leave the directory as it found it.
	var logs raft.LogStore = bolt
	if kind == LogStoreWAL {
		w, err := openWAL(filepath.Join(opts.DataDir, walDir), logger)
		if err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
		defer w.Close()
		logs = w
	}
	if res.FirstIndex, res.LastIndex, err = bounds(logs); err != nil {
		return res, fmt.Errorf("replay: read the log's bounds: %w", err)
	}
	target := opts.Index
	if target == 0 {
		target = res.LastIndex
	}

	snaps, err := raft.NewFileSnapshotStoreWithLogger(opts.DataDir, 2, logger.Named("snapshot"))
	if err != nil {
		return res, fmt.Errorf("replay: snapshot store: %w", err)
	}
	metas, err := snaps.List()
	if err != nil {
		return res, fmt.Errorf("replay: list snapshots: %w", err)
	}
	var base *raft.SnapshotMeta
	for _, m := range metas { // newest first
		if m.Index <= target {
			base = m
			break
		}
	}
	if target == 0 && len(metas) > 0 {
		base = metas[0] // an empty log: the state is the newest snapshot's
		target = base.Index
	}
	if target > res.LastIndex && (base == nil || target > base.Index) {
		return res, fmt.Errorf("replay: index %d is past the node's log (entries %d to %d)", target, res.FirstIndex, res.LastIndex)
	}
	from := uint64(1)
	if base != nil {
		from = base.Index + 1
		res.SnapshotIndex, res.Index, res.Term = base.Index, base.Index, base.Term
	}
	if from <= target && (res.LastIndex == 0 || from < res.FirstIndex) {
		oldest := "none"
		if len(metas) > 0 {
			oldest = fmt.Sprint(metas[len(metas)-1].Index)
		}
		return res, fmt.Errorf("replay: the node no longer holds index %d's history: its log starts at %d and its oldest snapshot is at %s (raise snapshot-threshold and trailing-logs to keep more)",
			target, res.FirstIndex, oldest)
	}

	meta := newMetaFSM(opts.FSM)
	if base != nil {
		_, rc, err := snaps.Open(base.ID)
		if err != nil {
			return res, fmt.Errorf("replay: open snapshot %s: %w", base.ID, err)
		}
		err = meta.Restore(rc)
		rc.Close()
		if err != nil {
			return res, fmt.Errorf("replay: restore snapshot %s: %w", base.ID, err)
		}
	}
	batch := make([]*raft.Log, 0, replayBatch)
	apply := func() error {
		if len(batch) > 0 {
			meta.ApplyBatch(batch)
			batch = batch[:0]
		}
		if err := opts.FSM.HaltErr(); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		return nil
	}
	for i := from; i <= target; i++ {
		l := new(raft.Log)
		if err := logs.GetLog(i, l); err != nil {
			return res, fmt.Errorf("replay: read entry %d: %w", i, err)
		}
		res.Entries++
		res.Index, res.Term = l.Index, l.Term
		// What Raft's FSM loop hands a batching state machine; noops and
		// barriers never reach it.
		if l.Type != raft.LogCommand && l.Type != raft.LogConfiguration {
			continue
		}
		if batch = append(batch, l); len(batch) == replayBatch {
			if err := apply(); err != nil {
				return res, err
			}
		}
	}
	return res, apply()
}
