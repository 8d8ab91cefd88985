package cluster

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// heldSnapshots holds a node's outgoing snapshot installs until release is
// closed, while heartbeats and appends go on: after a restore on that node
// (the leader), every follower keeps the state from before it for as long
// as the test wants.
type heldSnapshots struct {
	*raft.InmemTransport
	release <-chan struct{}
}

func (h heldSnapshots) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	<-h.release
	return h.InmemTransport.InstallSnapshot(id, target, args, resp, data)
}

// A linearizable read on a follower after the leader restored a backup, but
// before any follower installed it, must not answer the state from before
// the restore: the leader already answers the restored one. It waits for
// the restore to be installed on a quorum, then sees it.
func TestFollowerReadWaitsForARestore(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	c := &servedCluster{t: t, transport: func(tr *raft.InmemTransport) raft.Transport {
		return heldSnapshots{InmemTransport: tr, release: release}
	}}
	c.startVoters(3, nil)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the members stop
	l := c.leader()
	ctx := context.Background()
	const backup, after = "*1\r\n$6\r\nbackup\r\n", "*1\r\n$5\r\nafter\r\n"

	write1(t, l.node, "sadd", "s", "backup")
	var file bytes.Buffer
	if err := l.node.StreamRDB(ctx, func(int64, uint64) (io.Writer, error) { return &file, nil }); err != nil {
		t.Fatalf("backup: %v", err)
	}
	write1(t, l.node, "srem", "s", "backup")
	write1(t, l.node, "sadd", "s", "after")
	f := c.followers(l)[0]
	if got := string(f.node.Read(ctx, args("smembers", "s"), false)); got != after {
		t.Fatalf("follower SMEMBERS before the restore = %q, want %q", got, after)
	}

	restored := make(chan string, 1)
	go func() { restored <- string(l.node.restoreRDB(ctx, file.Bytes())) }()
	testutil.WaitFor(t, 10*time.Second, "the leader to hold the restored state", func() bool {
		return string(l.node.Read(ctx, args("smembers", "s"), true)) == backup
	})
	read := make(chan string, 1)
	go func() { read <- string(f.node.Read(ctx, args("smembers", "s"), false)) }()
	var early string
	testutil.WaitFor(t, 10*time.Second, "the follower's read to answer or to wait for the restore", func() bool {
		select {
		case early = <-read:
			return true
		default:
			return l.node.rd.restore.held.Load() > 0
		}
	})
	if early != "" {
		t.Fatalf("a follower's read after the leader restored, before any follower installed the restore, = %q "+
			"(the leader answers %q)", early, backup)
	}
	once.Do(func() { close(release) })
	if got := <-read; got != backup {
		t.Errorf("the follower's read, once the restore was installed = %q, want %q", got, backup)
	}
	if got := <-restored; got != ":1\r\n" {
		t.Errorf("RAFT.RESTORE = %q, want :1", got)
	}
}

// A restore reaches a member whose log holds entries of an old term past
// the new leader's last index (an old leader appended them, and they never
// committed). Raft's user restore puts the restored snapshot at the index
// after the leader's last; hashicorp/raft's follower keeps its own entry at
// that index when it installs the snapshot, then refuses every append after
// it for the term mismatch and asks for the snapshot again, forever
// (hashicorp/raft#697).
func TestRestoreReachesAFollowerWithADivergentLog(t *testing.T) {
	c := newServedCluster(t, 5, nil)
	old := c.leader()
	c.published()
	ctx := context.Background()
	const backup = "*1\r\n$6\r\nbackup\r\n"
	write1(t, old.node, "sadd", "s", "backup")
	var file bytes.Buffer
	if err := old.node.StreamRDB(ctx, func(int64, uint64) (io.Writer, error) { return &file, nil }); err != nil {
		t.Fatalf("backup: %v", err)
	}
	write1(t, old.node, "sadd", "s", "after")

	// The old leader reaches e alone: what it appends now never commits.
	e := c.followers(old)[0]
	for _, m := range c.members {
		if m != old && m != e {
			old.trans.Disconnect(raft.ServerAddress(m.id))
			m.trans.Disconnect(raft.ServerAddress(old.id))
		}
	}
	base := e.node.raft.LastIndex()
	entry := (&command.Entry{Type: command.TypeBatch, Ops: []command.Op{cmd("sadd", "never", "x")}}).Encode(nil)
	for range 50 {
		old.node.raft.Apply(entry, 0)
	}
	testutil.WaitFor(t, 10*time.Second, "e to hold 20 of the old leader's uncommitted entries", func() bool {
		return e.node.raft.LastIndex() >= base+20
	})
	c.isolateMember(old)
	c.isolateMember(e)
	var l *member
	testutil.WaitFor(t, 10*time.Second, "a leader among the other three", func() bool {
		for _, m := range c.members {
			if m != old && m != e && m.node.IsLeader() {
				l = m
				return true
			}
		}
		return false
	})
	if got, past := e.node.raft.LastIndex(), l.node.raft.LastIndex(); got <= past {
		t.Fatalf("setup: e's log ends at %d, not past the new leader's %d", got, past)
	}
	if got := string(l.node.restoreRDB(ctx, file.Bytes())); got != ":1\r\n" {
		t.Fatalf("RAFT.RESTORE on %s = %q", l.id, got)
	}
	c.reconnectMember(old)
	c.reconnectMember(e)
	// Installing the snapshot again and again shows the restored state; only
	// a member that goes on past it applies a write made after it.
	write1(t, l.node, "sadd", "later", "x")
	for _, m := range []*member{e, old} {
		testutil.WaitFor(t, 10*time.Second, m.id+" to apply a write made after the restore", func() bool {
			return string(m.node.Read(ctx, args("sismember", "later", "x"), true)) == ":1\r\n"
		})
		if got := string(m.node.Read(ctx, args("smembers", "s"), true)); got != backup {
			t.Errorf("%s: SMEMBERS s = %q, want the backup's %q", m.id, got, backup)
		}
	}
	c.converged(c.leader())
}
