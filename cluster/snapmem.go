package cluster

import (
	"github.com/hashicorp/raft"

	"raftset/internal/memlimit"
)

// Snapshot captures the state for Raft and marks the heap transient until
// Release: the copies the state machine makes of what the snapshot has yet
// to write are garbage once it is written, and must not raise the soft
// memory limit that follows the live heap (internal/memlimit).
func (m *metaFSM) Snapshot() (raft.FSMSnapshot, error) {
	end := memlimit.Transient()
	s, err := m.stateMachine.Snapshot()
	if err != nil {
		end()
		return nil, err
	}
	return &transientSnapshot{FSMSnapshot: s, end: end}, nil
}

// transientSnapshot ends the transient stretch when Raft releases it.
type transientSnapshot struct {
	raft.FSMSnapshot
	end func()
}

func (s *transientSnapshot) Release() {
	s.FSMSnapshot.Release()
	s.end()
}
