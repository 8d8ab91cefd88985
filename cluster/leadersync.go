package cluster

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

// The leader's fsync overlaps replication.
//
// hashicorp/raft's leader stores a batch of new entries (write and fsync)
// and only then wakes its replicators (v1.7.3, dispatchLogs), so a write to
// three nodes waits for two fsyncs in a row: the leader's, then a
// follower's. Raft needs no such order (the Raft thesis, §10.2.1): an entry
// is committed once a majority holds it durably, and nothing requires the
// leader to be first. Here the leader's StoreLogs writes the entries and
// returns before their fsync, which a goroutine of the log (syncer) makes
// at once; the replicators send the entries meanwhile, and the followers'
// fsyncs run beside the leader's.
//
// What keeps this safe is the transport (guardedTransport.AppendEntries):
// a follower's successful reply to an AppendEntries that carried entries
// reaches Raft only once every batch the leader had written when the
// request was sent is durable here. Raft counts the leader itself at once
// (commitment.match in dispatchLogs), but in a configuration of two voters
// or more it needs a follower's reply too, and that reply waits for the
// leader's fsync: an entry is committed, applied and acknowledged only
// when the leader and a follower both hold it durably, as before. A
// leader that is the sole voter would commit on its own count, so it
// fsyncs before returning as upstream does; so does a batch carrying a
// configuration entry, which may make the leader the sole voter
// (appendConfigurationEntry switches the commitment to the new
// configuration right after storing it). Followers always fsync before
// they reply. Only the Raft port's transport holds replies back, so the
// fsync is deferred only when that transport is the node's
// (openNetworkTransport).
//
// The ordering on the disk is kept too: raft-wal's metadata (sealed
// segments, truncations) is committed only after every deferred fsync
// (flushingMeta), and a StoreLogs that syncs first makes any deferred
// fsync (a leader that became a follower).
//
// A failed deferred fsync is sticky (the data may be gone from the page
// cache, and a second fsync would report success): every later StoreLogs
// and every held reply fails, so this node neither commits nor stores
// again until it restarts and reads its log back.

// leaderSyncs is one log's deferred fsyncs.
type leaderSyncs struct {
	// deferring is set while a deferred StoreLogs runs: the segment
	// files' Sync then only marks the file dirty (syncFile.Sync).
	deferring atomic.Bool
	// policy says whether a batch may be stored with its fsync deferred
	// (Node.mayDeferSync); nil: never.
	policy atomic.Pointer[func([]*raft.Log) bool]

	mu sync.Mutex
	// onDurable is told how many deferred batches a round of fsyncs made
	// durable (the proposer's pacing counts stores: propose.go).
	onDurable func(batches uint64)
	changed   *sync.Cond // on mu: synced, err or closed changed
	dirty     []*syncFile
	written   uint64 // deferred batches written
	synced    uint64 // deferred batches durable
	err       error  // sticky: a deferred fsync failed
	closed    bool
	waiting   int // replies held (tests watch it)

	// round serializes rounds of fsyncs, so that a round's count of
	// durable batches is never ahead of its fsyncs.
	round    sync.Mutex
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	deferred atomic.Uint64 // batches stored with a deferred fsync (INFO)

	// beforeRound, when set (tests), runs before each round's fsyncs.
	beforeRound atomic.Pointer[func()]
}

var errLogClosed = errors.New("the log is closed")

func newLeaderSyncs() *leaderSyncs {
	l := &leaderSyncs{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	l.changed = sync.NewCond(&l.mu)
	go l.run()
	return l
}

// run is the syncer: a round of fsyncs whenever a deferred batch was
// written.
func (l *leaderSyncs) run() {
	defer close(l.done)
	for {
		select {
		case <-l.kick:
			l.syncRound()
		case <-l.stop:
			return
		}
	}
}

// store stores logs in inner, with the fsync deferred when the policy
// allows it; otherwise it first makes every deferred fsync (a batch synced
// now must not be durable before earlier ones), then stores as usual. It
// reports whether the fsync was deferred.
func (l *leaderSyncs) store(inner raft.LogStore, logs []*raft.Log) (deferred bool, err error) {
	if err := l.failed(); err != nil {
		return false, err
	}
	p := l.policy.Load()
	if p == nil || !(*p)(logs) {
		if err := l.syncRound(); err != nil {
			return false, err
		}
		return false, inner.StoreLogs(logs)
	}
	l.deferring.Store(true)
	err = inner.StoreLogs(logs)
	l.deferring.Store(false)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.written++
	l.mu.Unlock()
	l.deferred.Add(1)
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return true, nil
}

// markDirty records a segment file whose fsync was deferred.
func (l *leaderSyncs) markDirty(f *syncFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.dirty {
		if d == f {
			return
		}
	}
	l.dirty = append(l.dirty, f)
}

// syncRound fsyncs the files dirty now and counts the batches written by
// then as durable.
func (l *leaderSyncs) syncRound() error {
	l.round.Lock()
	defer l.round.Unlock()
	if f := l.beforeRound.Load(); f != nil {
		(*f)()
	}
	l.mu.Lock()
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	files, written, before, onDurable := l.dirty, l.written, l.synced, l.onDurable
	l.dirty = nil
	l.mu.Unlock()
	var err error
	for _, f := range files {
		if e := f.syncDeferred(); e != nil && err == nil {
			err = fmt.Errorf("deferred fsync of a log segment: %w", e)
		}
	}
	l.mu.Lock()
	if err != nil {
		l.err = err
	} else {
		l.synced = written
	}
	l.changed.Broadcast()
	l.mu.Unlock()
	if err == nil && written > before && onDurable != nil {
		onDurable(written - before)
	}
	return err
}

// enable lets batches be stored with their fsync deferred when policy
// says so, telling onDurable as they become durable.
func (l *leaderSyncs) enable(policy func([]*raft.Log) bool, onDurable func(batches uint64)) {
	l.mu.Lock()
	l.onDurable = onDurable
	l.mu.Unlock()
	l.policy.Store(&policy)
}

func (l *leaderSyncs) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLogClosed
	}
	return l.err
}

// writtenMark is the count of deferred batches written so far: a reply to
// a request sent now may count once that many are durable.
func (l *leaderSyncs) writtenMark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

// waitDurable returns once mark deferred batches are durable, or with the
// error that keeps them from becoming so.
func (l *leaderSyncs) waitDurable(mark uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting++
	defer func() { l.waiting-- }()
	for l.synced < mark && l.err == nil && !l.closed {
		l.changed.Wait()
	}
	switch {
	case l.synced >= mark:
		return nil
	case l.err != nil:
		return l.err
	}
	return errLogClosed
}

// close makes the last deferred fsyncs and stops the syncer; held replies
// are released (with an error if their batches did not become durable).
func (l *leaderSyncs) close() error {
	err := l.syncRound()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	l.closed = true
	l.changed.Broadcast()
	l.mu.Unlock()
	return err
}

// flushingMeta is raft-wal's metadata store, committing a new state only
// after every deferred fsync: a segment sealed or truncated in the
// metadata must already hold what the metadata says it holds.
type flushingMeta struct {
	types.MetaStore
	syncs *leaderSyncs
}

func (m flushingMeta) CommitState(s types.PersistentState) error {
	if err := m.syncs.syncRound(); err != nil {
		return err
	}
	return m.MetaStore.CommitState(s)
}

// mayDeferSync is the node's policy: a leader defers its fsync unless its
// commitment could count on it alone (a sole voter) or the batch carries a
// configuration entry. Raft's own goroutine calls it from StoreLogs.
func (n *Node) mayDeferSync(logs []*raft.Log) bool {
	if !n.raftStarted.Load() || n.raft.State() != raft.Leader {
		return false
	}
	for _, l := range logs {
		if l.Type == raft.LogConfiguration {
			return false
		}
	}
	return len(n.voters()) >= 2
}

// walDeferred is the count of batches this node stored as leader with the
// fsync deferred (INFO raft_log_syncs_deferred); 0 without raft-wal.
func (n *Node) walDeferred() uint64 {
	if w, ok := n.walLog.(walStore); ok {
		return w.lead.deferred.Load()
	}
	return 0
}
