package cluster

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Stale snapshot installs (found by the Jepsen suite, remove-isolated-
// snapshot-5). hashicorp/raft's follower installs whatever InstallSnapshot
// a leader of the current term sends, even one older than what it has
// applied: a leader's replication goroutine that was sending a snapshot
// when the node was removed, and is still at it after the node was added
// back under the same id, delivers one. Raft then restores the state machine
// to that older index, sets its applied index back, and compacts; the next
// commit asks the log for the entry after the old snapshot, which the node's
// own later snapshot had already compacted away, and Raft panics ("log not
// found").
//
// Raft passes FSM.Restore only the snapshot's contents, so the node notes
// the index of every snapshot its store opens (Raft opens the snapshot right
// before restoring it) and refuses the restore when that index is below the
// index Raft has applied. The install then fails and the node keeps its
// state; the leader's current replication goes on from the node's real log.

// ErrStaleSnapshot refuses a restore that would take the state back.
var ErrStaleSnapshot = errors.New("cluster: snapshot older than the applied state")

// openedSnapshots remembers the index of the snapshot opened last.
type openedSnapshots struct {
	raft.SnapshotStore
	index atomic.Uint64
}

func (s *openedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.index.Store(meta.Index)
	}
	return meta, rc, err
}

// metaFSM is the state machine as Raft sees it: the same, except that
// Restore first asks checkRestore (refuseStaleRestore). It keeps the state
// machine's batching (raft.BatchingFSM).
type metaFSM struct {
	stateMachine

	// checkRestore, when set, may refuse a restore before it starts.
	checkRestore func() error
	// observe, when set, runs after every apply and restore (the cluster
	// clock learns the state's time: clock.go).
	observe func()
}

func newMetaFSM(f stateMachine) *metaFSM { return &metaFSM{stateMachine: f} }

func (m *metaFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if m.observe != nil {
		defer m.observe()
	}
	if b, ok := m.stateMachine.(raft.BatchingFSM); ok {
		return b.ApplyBatch(logs)
	}
	// As Raft does for a state machine without ApplyBatch: commands only.
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = m.stateMachine.Apply(l)
		}
	}
	return out
}

func (m *metaFSM) Restore(rc io.ReadCloser) error {
	if m.checkRestore != nil {
		if err := m.checkRestore(); err != nil {
			rc.Close()
			return err
		}
	}
	err := m.stateMachine.Restore(rc)
	if err == nil && m.observe != nil {
		m.observe()
	}
	return err
}

// refuseStaleRestore is the metaFSM's restore check.
func (n *Node) refuseStaleRestore() error {
	if !n.raftStarted.Load() { // the node's own restore at start-up (restoreLatest)
		return nil
	}
	snap, applied := n.opened.index.Load(), n.raft.AppliedIndex()
	if snap >= applied {
		return nil
	}
	n.log.Warn("refused to restore a snapshot older than the applied state", "snapshot_index", snap, "applied_index", applied)
	return fmt.Errorf("%w: snapshot at index %d, applied %d", ErrStaleSnapshot, snap, applied)
}
