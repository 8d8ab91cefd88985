package cluster

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/memlimit"
)

// persistProbe's snapshots record whether the heap was marked transient
// (internal/memlimit) while Raft persisted them.
type persistProbe struct {
	*fakeFSM
	during atomic.Bool
	ran    atomic.Bool
}

func (p *persistProbe) Snapshot() (raft.FSMSnapshot, error) {
	s, err := p.fakeFSM.Snapshot()
	return &probeSnapshot{FSMSnapshot: s, p: p}, err
}

type probeSnapshot struct {
	raft.FSMSnapshot
	p *persistProbe
}

func (s *probeSnapshot) Persist(sink raft.SnapshotSink) error {
	s.p.during.Store(memlimit.InTransient())
	s.p.ran.Store(true)
	return s.FSMSnapshot.Persist(sink)
}

// A Raft snapshot's copies do not raise the soft memory limit: the heap is
// marked transient while Raft persists it. (The mark is process-wide, so
// the test does not assert its absence: nodes of other tests may be
// snapshotting; that it ends with Release is internal/memlimit's
// TestTransient and the wrapper's Release.)
func TestRaftSnapshotIsTransient(t *testing.T) {
	cfg := fastConfig(t, "n1")
	cfg.SnapshotLogBytes, cfg.TrailingLogBytes = -1, -1
	p := &persistProbe{fakeFSM: newFakeFSM()}
	n := mustNode(t, cfg, p, true)
	if got := n.Write(context.Background(), []command.Op{cmd("sadd", "k", "m")}); string(got[0]) != ":1\r\n" {
		t.Fatalf("SADD: %q", got[0])
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if !p.ran.Load() || !p.during.Load() {
		t.Errorf("persisted %v, transient while persisting %v; want both", p.ran.Load(), p.during.Load())
	}
}
