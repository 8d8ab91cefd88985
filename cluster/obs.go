package cluster

import (
	"context"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/stats"
)

// Observability: follower lag as the leader sees it, leader changes,
// readiness, and the node's part of the metrics endpoint (NodeStats).
//
// Follower lag. hashicorp/raft keeps each follower's match index private,
// and its go-metrics only time the AppendEntries calls, so the leader
// asks each follower for its applied index the way WAIT does
// (raftset.applied), every lagPoll. Every replica applies the same entries
// at the same indexes, so lag in entries is the leader's applied index
// minus the follower's. Lag in time comes from a ring of (applied index,
// time) samples of the leader's own progress: a follower at index i is as
// far behind as the time since the leader first had applied past i. A
// follower that stops answering keeps its last index, so its lag keeps
// growing while writes go on; its time since contact grows regardless.

const (
	lagPoll    = 100 * time.Millisecond
	lagHistory = 600 // samples of the leader's progress: one minute
)

type progressSample struct {
	index uint64
	at    time.Time
}

type peerLag struct {
	applied  uint64
	contact  time.Time // last answer
	inFlight bool
}

// obsState is the observability state of a node.
type obsState struct {
	mu       sync.Mutex
	progress []progressSample // ring, oldest first
	peers    map[string]*peerLag

	leaderChanges atomic.Uint64
	// readyTarget is the commit index the node must apply before /readyz
	// says ready: the leader's commit index when this node first saw a
	// leader. 0 until then (readySet).
	readyTarget atomic.Uint64
	readySet    atomic.Bool
	batchOps    stats.Hist // ops per proposed entry (values are counts)
}

// leaderObservations registers an observer of leader changes (buffered,
// never blocking Raft: a full channel drops one); stop deregisters it.
func (n *Node) leaderObservations() (_ <-chan raft.Observation, stop func()) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	return ch, func() { n.raft.DeregisterObserver(obs) }
}

// runObs counts leader changes, finds the readiness target and, while this
// node leads, tracks how far each follower got.
func (n *Node) runObs() {
	defer n.wg.Done()
	ch, stop := n.leaderObservations()
	defer stop()
	t := time.NewTicker(lagPoll)
	defer t.Stop()
	var lastLeader raft.ServerID
	for {
		select {
		case <-n.stopCh:
			return
		case o := <-ch:
			if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != lastLeader {
				if lo.LeaderID != "" {
					n.obs.leaderChanges.Add(1)
				}
				lastLeader = lo.LeaderID
			}
		case now := <-t.C:
			if !n.obs.readySet.Load() {
				n.findReadyTarget()
			}
			if n.raft.State() == raft.Leader {
				n.sampleProgress(now)
				n.pollFollowers()
			} else {
				n.obs.mu.Lock()
				n.obs.progress = n.obs.progress[:0]
				clear(n.obs.peers)
				n.obs.mu.Unlock()
			}
		}
	}
}

// findReadyTarget records the leader's commit index once a leader is known.
func (n *Node) findReadyTarget() {
	if addr, _ := n.Leader(); addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, time.Second)
	defer cancel()
	var target uint64
	var errReply []byte
	if n.raft.State() == raft.Leader {
		target, errReply = n.readIndex(ctx)
	} else {
		target, errReply = n.followerReadIndex(ctx)
	}
	if errReply != nil {
		return // asked again at the next tick
	}
	n.obs.readyTarget.Store(target)
	n.obs.readySet.Store(true)
}

// Ready reports whether the node should take traffic (/readyz): it knows a
// leader, it has applied the commit index the leader had when this node
// first saw one, and it is not shutting down; else why not.
func (n *Node) Ready() (bool, string) {
	if n.isClosing() {
		return false, "shutting down"
	}
	if addr, _ := n.Leader(); addr == "" {
		return false, "no leader"
	}
	if !n.obs.readySet.Load() {
		return false, "waiting for the leader's commit index"
	}
	if applied, target := n.fsm.AppliedIndex(), n.obs.readyTarget.Load(); applied < target {
		return false, "catching up: applied " + itoa(applied) + " of " + itoa(target)
	}
	return true, "ok"
}

func (n *Node) sampleProgress(now time.Time) {
	applied := n.fsm.AppliedIndex()
	o := &n.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	if k := len(o.progress); k > 0 && o.progress[k-1].index == applied {
		return // no progress: the oldest sample past an index is what counts
	}
	if len(o.progress) == lagHistory {
		copy(o.progress, o.progress[1:])
		o.progress = o.progress[:lagHistory-1]
	}
	o.progress = append(o.progress, progressSample{applied, now})
}

// pollFollowers asks every follower not already being asked for its
// applied index.
func (n *Node) pollFollowers() {
	o := &n.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.peers == nil {
		o.peers = make(map[string]*peerLag)
	}
	seen := map[string]bool{}
	for _, s := range n.otherServers() {
		id := string(s.ID)
		seen[id] = true
		p := o.peers[id]
		if p == nil {
			p = &peerLag{}
			o.peers[id] = p
		}
		addr := n.ClientAddr(id)
		if p.inFlight || addr == "" {
			continue
		}
		p.inFlight = true
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, appliedQueryTimeout)
			applied, err := n.askApplied(ctx, addr)
			cancel()
			o.mu.Lock()
			p.inFlight = false
			if err == nil {
				p.applied, p.contact = applied, time.Now()
			}
			o.mu.Unlock()
		}()
	}
	for id := range o.peers {
		if !seen[id] {
			delete(o.peers, id)
		}
	}
}

// followers returns the leader's view of each follower, sorted by id; nil
// on a follower.
func (n *Node) followers() []stats.Follower {
	if n.raft.State() != raft.Leader {
		return nil
	}
	applied := n.fsm.AppliedIndex()
	now := time.Now()
	o := &n.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []stats.Follower
	for _, s := range n.otherServers() {
		id := string(s.ID)
		f := stats.Follower{ID: id, SinceContact: -1}
		p := o.peers[id]
		if p != nil && !p.contact.IsZero() {
			f.Applied = p.applied
			f.SinceContact = now.Sub(p.contact)
			if applied > p.applied {
				f.LagEntries = applied - p.applied
			}
		}
		// A follower not heard from yet (this node just became leader) has
		// no lag to report; SinceContact -1 says so.
		if f.LagEntries > 0 {
			// The oldest sample past the follower's index: the leader had
			// applied an entry the follower lacks since then.
			f.Lag = now.Sub(o.oldestPast(f.Applied, now))
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b stats.Follower) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// oldestPast returns when the leader first had applied past index, as far
// as the ring remembers (its oldest sample otherwise); now if no sample is.
func (o *obsState) oldestPast(index uint64, now time.Time) time.Time {
	for _, s := range o.progress {
		if s.index > index {
			return s.at
		}
	}
	return now
}

// NodeStats is this replica's part of the metrics endpoint.
func (n *Node) NodeStats() stats.Node {
	rs := n.raft.Stats()
	keys, expires := n.fsm.KeyspaceCounts()
	addr, _ := n.Leader()
	st := stats.Node{
		Shard:             n.cfg.Shard,
		State:             strings.ToLower(rs["state"]),
		Term:              parseU(rs["term"]),
		CommitIndex:       parseU(rs["commit_index"]),
		AppliedIndex:      n.fsm.AppliedIndex(),
		LastLogIndex:      parseU(rs["last_log_index"]),
		LastSnapshotIndex: parseU(rs["last_snapshot_index"]),
		HasLeader:         addr != "",
		LeaderChanges:     n.obs.leaderChanges.Load(),
		Followers:         n.followers(),
		EntriesProposed:   n.st.entries.Load(),
		OpsProposed:       n.st.ops.Load(),
		ForwardedOps:      n.st.forwarded.Load(),
		ReadIndexRounds:   n.st.readBarriers.Load(),
		ReadStallRefusals: n.stall.refused.Load(),
		ReadStaleAcks:     n.staleAckRefusals(),
		LinearizableReads: n.st.reads.Load(),
		ExpiredProposed:   n.st.expired.Load(),
		Keys:              uint64(keys),
		KeysWithExpiry:    uint64(expires),
	}
	if ev := n.evictor(); ev != nil {
		// The state machine's own accounting, as INFO's
		// used_memory_dataset: the heap is the process's, shared by
		// every replica it holds.
		st.DatasetBytes = uint64(max(ev.UsedMemory(), 0))
		st.EvictedKeys = ev.Counters().Evicted
	}
	if list, err := n.snaps.List(); err == nil && len(list) > 0 {
		st.LastSnapshotSize = list[0].Size
	}
	snap := n.obs.batchOps.Snapshot()
	st.BatchOps = &snap
	return st
}

// ShardStats is the metrics' view of a node without shard-map: its one
// group, as shard 0.
func (n *Node) ShardStats() []stats.Node { return []stats.Node{n.NodeStats()} }

// ProcessStats are the process's memory figures (metrics.Node).
func (n *Node) ProcessStats() stats.Process { return processStats() }

// MetaStats: a node without shard-map has no metadata group (metrics.Node).
func (n *Node) MetaStats() (stats.Meta, bool) { return stats.Meta{}, false }

// isVoter reports whether this node is a voter in the latest configuration
// its log holds (committed or not, as Raft itself acts on it).
func (n *Node) isVoter() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

func processStats() stats.Process {
	return stats.Process{HeapBytes: heapAlloc(), RSSBytes: rssBytes()}
}

// heapAlloc is MemStats.HeapAlloc read through runtime/metrics, which does
// not stop the world as runtime.ReadMemStats does: a scrape every few
// seconds should not pause every goroutine serving clients.
func heapAlloc() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
