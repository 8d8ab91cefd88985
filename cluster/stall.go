package cluster

import (
	"sync/atomic"
	"time"
)

// stallWatch notices when this process did not run for a while (SIGSTOP,
// a frozen VM), for the read path's leadership check (read.go, confirm).
//
// hashicorp/raft's VerifyLeader counts a follower's reply to a heartbeat or
// an AppendEntries for every verification waiting when the reply is
// processed (v1.7.3, followerReplication.notifyAll), whether or not the
// verification began before the request was sent. A leader stopped with
// such replies in its socket buffers processes them when it resumes and may
// confirm a round that began after the resume with them: from replies
// given before the stall, during which another leader was elected. Jepsen's
// cas-3 (seed 39, docs/jepsen.md Findings) caught a leader resumed from
// SIGSTOP answering a read from its state of before the pause, 6 ms before
// it stepped down. A reply can mislead only if the leader did not run for
// about a heartbeat timeout (the followers must time out and elect), so a
// round is trusted only if no stall of half that ended shortly before the
// round began, and none is under way unnoticed.
type stallWatch struct {
	origin time.Time
	gap    time.Duration // a pause longer than this is a stall
	last   atomic.Int64  // ns since origin: the latest tick
	ended  atomic.Int64  // ns since origin: when the latest stall was noticed; 0 none
	// refused counts the read rounds confirm refused because trusted
	// said no (INFO raft_read_stall_refusals).
	refused atomic.Uint64
}

func newStallWatch(gap time.Duration) *stallWatch {
	s := &stallWatch{origin: time.Now(), gap: gap}
	s.last.Store(s.now())
	return s
}

func (s *stallWatch) now() int64 { return int64(time.Since(s.origin)) }

// tick records that the process runs; the ticker calls it every gap/8.
func (s *stallWatch) tick() {
	now := s.now()
	if time.Duration(now-s.last.Load()) > s.gap {
		s.ended.Store(now)
	}
	s.last.Store(now)
}

// trusted reports whether a leadership round that began at start (s.now()
// then) can be trusted: the process has ticked within gap, and no stall
// was noticed later than gap before start (replies buffered during a stall
// are processed within moments of the resume).
func (s *stallWatch) trusted(start int64) bool {
	if time.Duration(s.now()-s.last.Load()) > s.gap {
		return false // stalled, and the ticker has not run since
	}
	e := s.ended.Load()
	return e == 0 || start > e+int64(s.gap)
}

// runStallWatch ticks the node's stall watch until the node stops.
func (n *Node) runStallWatch() {
	defer n.wg.Done()
	// The time between NewNode and here (opening the log, replaying
	// snapshots) is no stall.
	n.stall.last.Store(n.stall.now())
	t := time.NewTicker(n.stall.gap / 8)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.stall.tick()
		case <-n.stopCh:
			return
		}
	}
}
