package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// newDiskCluster starts size voters with their logs in raft-wal under a
// temporary directory, talking over real Raft ports on loopback: the
// configuration in which a leader defers its fsync (leadersync.go).
func newDiskCluster(t *testing.T, size int) []*Node {
	t.Helper()
	root := t.TempDir()
	var peers []Peer
	for i := range size {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	}
	var nodes []*Node
	for _, p := range peers {
		cfg := clusterConfig(t, p.ID)
		cfg.InMemory = false
		cfg.DataDir = filepath.Join(root, p.ID)
		cfg.RaftBind = p.Addr
		cfg.LogStore = LogStoreWAL
		cfg.Peers = peers
		nodes = append(nodes, mustNode(t, cfg, newFakeFSM(), false))
	}
	return nodes
}

func diskLeader(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var l *Node
	testutil.WaitFor(t, 20*time.Second, "a leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func leadSyncs(t *testing.T, n *Node) *leaderSyncs {
	t.Helper()
	w, ok := n.walLog.(walStore)
	if !ok {
		t.Fatalf("%s: the log is not raft-wal", n.cfg.NodeID)
	}
	return w.lead
}

func commitIndex(n *Node) uint64 {
	c, _ := strconv.ParseUint(n.raft.Stats()["commit_index"], 10, 64)
	return c
}

// TestLeaderFsyncOverlapsReplication: with the leader's fsync held, both
// followers store a new entry (replication did not wait for the leader's
// disk), yet the entry is neither committed nor acknowledged until the
// leader's own fsync is done: a follower's reply is held, not counted.
func TestLeaderFsyncOverlapsReplication(t *testing.T) {
	nodes := newDiskCluster(t, 3)
	ctx := context.Background()
	leader := diskLeader(t, nodes)
	if got := string(leader.Write(ctx, []command.Op{cmd("sadd", "s", "warm")})[0]); got != ":1\r\n" {
		t.Fatalf("first write: %q", got)
	}
	syncs := leadSyncs(t, leader)
	if d, err := strconv.Atoi(infoField(leader, "Raft", "raft_log_syncs_deferred")); err != nil || d < 1 {
		t.Fatalf("INFO raft_log_syncs_deferred = %d (%v) on the leader after a write, want at least 1", d, err)
	}

	hold := make(chan struct{})
	var released atomic.Bool
	release := func() {
		if !released.Swap(true) {
			close(hold)
		}
	}
	t.Cleanup(release)
	wait := func() { <-hold }
	syncs.beforeRound.Store(&wait)
	defer syncs.beforeRound.Store(nil)

	before := leader.raft.LastIndex()
	reply := make(chan string, 1)
	go func() { reply <- string(leader.Write(ctx, []command.Op{cmd("sadd", "s", "held")})[0]) }()

	var entry uint64
	testutil.WaitFor(t, 10*time.Second, "the leader to write the entry", func() bool {
		entry = leader.raft.LastIndex()
		return entry > before
	})
	for _, n := range nodes {
		if n == leader {
			continue
		}
		testutil.WaitFor(t, 10*time.Second, n.cfg.NodeID+" to store the entry", func() bool {
			return n.raft.LastIndex() >= entry
		})
	}
	// Both followers' replies held, or (the bug this guards against) the
	// entry committed without the leader's fsync.
	testutil.WaitFor(t, 10*time.Second, "both followers' replies to be held", func() bool {
		syncs.mu.Lock()
		defer syncs.mu.Unlock()
		return syncs.waiting == 2 || commitIndex(leader) >= entry
	})
	if c := commitIndex(leader); c >= entry {
		t.Fatalf("commit index %d reached the entry %d while the leader's fsync is held", c, entry)
	}
	select {
	case r := <-reply:
		t.Fatalf("the write was answered %q while the leader's fsync is held", r)
	default:
	}

	release()
	select {
	case r := <-reply:
		if r != ":1\r\n" {
			t.Fatalf("write after the release: %q, want :1", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not answered after the leader's fsync")
	}
	if c := commitIndex(leader); c < entry {
		t.Fatalf("commit index %d, want ≥ %d after the write's reply", c, entry)
	}
}

// TestSoleVoterSyncsBeforeReturning: a one-voter leader commits on its own
// count, so it never defers its fsync.
func TestSoleVoterSyncsBeforeReturning(t *testing.T) {
	nodes := newDiskCluster(t, 1)
	leader := diskLeader(t, nodes)
	for i := range 20 {
		if got := string(leader.Write(context.Background(), []command.Op{cmd("sadd", "s", strconv.Itoa(i))})[0]); got != ":1\r\n" {
			t.Fatalf("write %d: %q", i, got)
		}
	}
	if d := infoField(leader, "Raft", "raft_log_syncs_deferred"); d != "0" {
		t.Fatalf("INFO raft_log_syncs_deferred = %s on a sole voter, want 0", d)
	}
}

// fakeSegment counts its fsyncs and fails them with fail when set.
type fakeSegment struct {
	types.WritableFile
	syncs atomic.Int32
	fail  error
}

func (f *fakeSegment) Sync() error {
	f.syncs.Add(1)
	return f.fail
}

// syncingStore stands in for raft-wal: its StoreLogs syncs the segment.
type syncingStore struct {
	raft.LogStore
	seg *syncFile
}

func (s syncingStore) StoreLogs([]*raft.Log) error { return s.seg.Sync() }

func newDeferringLog(t *testing.T, fail error) (*leaderSyncs, *fakeSegment, syncingStore) {
	t.Helper()
	l := newLeaderSyncs()
	t.Cleanup(func() { l.close() })
	l.enable(func([]*raft.Log) bool { return true }, nil)
	seg := &fakeSegment{fail: fail}
	sf := &syncFile{WritableFile: seg, fs: syncFS{stats: &syncStats{}, alone: func() bool { return false }, lead: l}, firstDone: true}
	return l, seg, syncingStore{seg: sf}
}

// TestDeferredFsyncFailureIsSticky: a deferred fsync that fails releases
// the held replies with its error, and every later store fails too (a
// second fsync could report success for data the page cache dropped).
func TestDeferredFsyncFailureIsSticky(t *testing.T) {
	eio := errors.New("input/output error")
	l, _, store := newDeferringLog(t, eio)
	deferred, err := l.store(store, []*raft.Log{{Index: 1}})
	if err != nil || !deferred {
		t.Fatalf("store: deferred %v, %v", deferred, err)
	}
	if err := l.waitDurable(1); !errors.Is(err, eio) {
		t.Fatalf("waitDurable: %v, want the fsync's error", err)
	}
	if _, err := l.store(store, []*raft.Log{{Index: 2}}); !errors.Is(err, eio) {
		t.Fatalf("store after a failed fsync: %v, want the fsync's error", err)
	}
}

// recordingMeta records how many fsyncs the segment had when the metadata
// was committed.
type recordingMeta struct {
	types.MetaStore
	seg       *fakeSegment
	atCommits []int32
}

func (m *recordingMeta) CommitState(types.PersistentState) error {
	m.atCommits = append(m.atCommits, m.seg.syncs.Load())
	return nil
}

// TestMetadataCommitsAfterDeferredFsyncs: raft-wal's metadata (a sealed
// segment, a truncation) is committed only once the deferred fsyncs are
// done, so it never describes data the disk may not hold; and a store that
// syncs at once (a follower's) first makes the deferred ones.
func TestMetadataCommitsAfterDeferredFsyncs(t *testing.T) {
	l, seg, store := newDeferringLog(t, nil)
	hold := make(chan struct{})
	wait := func() { <-hold }
	l.beforeRound.Store(&wait) // the syncer waits before its fsync
	if _, err := l.store(store, []*raft.Log{{Index: 1}}); err != nil {
		t.Fatal(err)
	}
	if n := seg.syncs.Load(); n != 0 {
		t.Fatalf("%d fsyncs before the syncer ran, want the fsync deferred", n)
	}
	l.beforeRound.Store(nil)
	close(hold)
	meta := &recordingMeta{seg: seg}
	if err := (flushingMeta{MetaStore: meta, syncs: l}).CommitState(types.PersistentState{}); err != nil {
		t.Fatal(err)
	}
	if len(meta.atCommits) != 1 || meta.atCommits[0] < 1 {
		t.Fatalf("segment fsyncs at the metadata commit: %v, want ≥ 1", meta.atCommits)
	}
	if err := l.waitDurable(1); err != nil {
		t.Fatalf("waitDurable: %v", err)
	}

	// A store that may not defer syncs what is pending first, then itself.
	l.enable(func([]*raft.Log) bool { return false }, nil)
	before := seg.syncs.Load()
	if deferred, err := l.store(store, []*raft.Log{{Index: 2}}); err != nil || deferred {
		t.Fatalf("store: deferred %v, %v", deferred, err)
	}
	if seg.syncs.Load() <= before {
		t.Fatal("a store that may not defer returned before its fsync")
	}
}
