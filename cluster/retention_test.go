package cluster

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// The log is snapshotted and trimmed by its size in bytes, though the entry
// threshold is never reached.
func TestLogRetentionBySize(t *testing.T) {
	cfg := diskConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 1 << 40
	cfg.SnapshotLogBytes = 256 << 10
	cfg.TrailingLogBytes = 64 << 10
	n := mustNode(t, cfg, newFakeFSM(), true)
	writeLargeMembers(t, n, 0, 1200) // about 600 KiB of log
	testutil.WaitFor(t, 10*time.Second, "a snapshot for the log's size", func() bool {
		first, _ := n.logs.FirstIndex()
		return n.lastSnapshotIndex() > 0 && first > 1
	})

	// Raft compacts up to the snapshot's index minus TrailingLogs, which the
	// node set to about 64 KiB of ~520-byte entries: about 125.
	first, _ := n.logs.FirstIndex()
	kept := n.lastSnapshotIndex() - first + 1
	if kept < minTrailingLogs || kept > 160 {
		t.Fatalf("kept %d entries behind the snapshot, want about 64 KiB / 520 B ≈ 125", kept)
	}
	if rc := n.raft.ReloadableConfig(); rc.TrailingLogs < 100 || rc.TrailingLogs > 160 {
		t.Fatalf("TrailingLogs = %d, want about 125", rc.TrailingLogs)
	}
}

func TestSnapshotLogBound(t *testing.T) {
	for _, c := range []struct {
		fixed    int64
		percent  int
		snapSize int64
		want     uint64
	}{
		{32 << 20, 100, 0, 32 << 20},          // no snapshot yet: the fixed bound
		{32 << 20, 100, 10 << 20, 32 << 20},   // small data: the fixed bound
		{32 << 20, 100, 300 << 20, 300 << 20}, // large data: its snapshot's size
		{32 << 20, 50, 300 << 20, 150 << 20},
		{32 << 20, 200, 300 << 20, 600 << 20},
		{32 << 20, -1, 300 << 20, 32 << 20},              // percentage off
		{-1, 100, 300 << 20, 0},                          // snapshots for the log's size off
		{32 << 20, math.MaxInt, 1 << 40, math.MaxUint64}, // no overflow
	} {
		if got := snapshotLogBound(c.fixed, c.percent, c.snapSize); got != c.want {
			t.Errorf("snapshotLogBound(%d, %d, %d) = %d, want %d", c.fixed, c.percent, c.snapSize, got, c.want)
		}
	}
}

// Once the data's snapshot is larger than SnapshotLogBytes, the next
// snapshot for the log's size waits until the log grew by the snapshot's
// size (SnapshotLogPercent 100), not by SnapshotLogBytes.
func TestLogRetentionScalesWithSnapshot(t *testing.T) {
	cfg := diskConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 1 << 40
	cfg.SnapshotLogBytes = 32 << 10
	cfg.SnapshotLogPercent = 100
	n := mustNode(t, cfg, newFakeFSM(), true)
	writeLargeMembers(t, n, 0, 600) // about 300 KiB of data
	written := 600
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	size := n.latestSnapshotSize()
	if size < 8*cfg.SnapshotLogBytes {
		t.Fatalf("the snapshot has %d bytes, want well over SnapshotLogBytes (%d)", size, cfg.SnapshotLogBytes)
	}
	waitRetentionRounds(t, n)
	snap, base := n.lastSnapshotIndex(), n.stores.bytes.Load()
	for n.lastSnapshotIndex() == snap {
		if grew := n.stores.bytes.Load() - base; grew > uint64(size)+4*uint64(cfg.SnapshotLogBytes) {
			t.Fatalf("no snapshot after %d bytes of log; the latest snapshot has %d", grew, size)
		}
		writeLargeMembers(t, n, written, written+60) // about SnapshotLogBytes of log
		written += 60
		waitRetentionRounds(t, n)
	}
	if grew, bound := n.stores.bytes.Load()-base, snapshotLogBound(cfg.SnapshotLogBytes, 100, size); grew < bound {
		t.Fatalf("a snapshot after %d bytes of log, before the log grew by the latest snapshot's %d", grew, bound)
	}
}

// CONFIG SET snapshot-log-size turns the snapshot for the log's size on in a
// running node that started with it off.
func TestLogRetentionConfigSet(t *testing.T) {
	cfg := diskConfig(t, t.TempDir())
	cfg.SnapshotThreshold = 1 << 40
	cfg.SnapshotLogBytes = -1
	n := mustNode(t, cfg, newFakeFSM(), true)
	writeLargeMembers(t, n, 0, 200) // about 100 KiB of log
	waitRetentionRounds(t, n)
	if idx := n.lastSnapshotIndex(); idx != 0 {
		t.Fatalf("a snapshot (index %d) with snapshot-log-size off", idx)
	}
	if got := string(n.Admin(context.Background(), args("config", "set", "snapshot-log-size", "32kb"))); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	testutil.WaitFor(t, 10*time.Second, "a snapshot for the log's size", func() bool {
		return n.st.logSizeSnapshots.Load() > 0
	})
	if got := n.st.logSizeSnapshots.Load(); got != 1 {
		t.Fatalf("raft_log_size_snapshots = %d, want 1", got)
	}
}

// writeLargeMembers is writeMembers (logstore_test.go) with members of
// ~510 bytes: one log entry of ~520 bytes each.
func writeLargeMembers(t *testing.T, n *Node, from, to int) {
	t.Helper()
	writePaddedMembers(t, n, from, to, strings.Repeat("m", 500))
}

// waitRetentionRounds waits until the retention loop has made two more
// checks, so that one of them saw everything written before the call.
func waitRetentionRounds(t *testing.T, n *Node) {
	t.Helper()
	r := n.st.retentionRounds.Load()
	testutil.WaitFor(t, 10*time.Second, "two log retention checks", func() bool {
		return n.st.retentionRounds.Load() >= r+2
	})
}
