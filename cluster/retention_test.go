package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
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
	ctx := context.Background()
	member := strings.Repeat("m", 500)
	const writes = 1200 // one entry each: about 600 KiB of log
	for i := range writes {
		if got := n.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(i, member))}); string(got[0]) != ":1\r\n" {
			t.Fatalf("write %d: %q", i, got[0])
		}
	}
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
