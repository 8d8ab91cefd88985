package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
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
	waitFor(t, "a snapshot for the log's size", 10*time.Second, func() bool { return n.lastSnapshotIndex() > 0 })
	waitFor(t, "the log trimmed to its trailing bytes", 10*time.Second, func() bool {
		first, _ := n.logs.FirstIndex()
		last, _ := n.logs.LastIndex()
		return first > 1 && last-first+1 < 300
	})
	first, _ := n.logs.FirstIndex()
	last, _ := n.logs.LastIndex()
	// 64 KiB of ~520-byte entries is about 125 kept; Raft keeps them behind
	// the snapshot index, which may trail the last index by what arrived
	// while it was taken.
	if kept := last - first + 1; kept < minTrailingLogs {
		t.Fatalf("kept %d entries, fewer than the minimum %d", kept, minTrailingLogs)
	}
	if rc := n.raft.ReloadableConfig(); rc.TrailingLogs < 100 || rc.TrailingLogs > 160 {
		t.Fatalf("TrailingLogs = %d, want about 64 KiB / 520 B ≈ 125", rc.TrailingLogs)
	}
}
