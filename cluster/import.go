package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Import replaces the cluster's state with an RDB snapshot through Raft's user
// restore: the snapshot becomes the new base of the log, past every existing
// entry, so every node — including nodes that join later and would otherwise
// replay the log from its start — receives it. It runs on the leader; the
// caller hands it a raftset snapshot (convert a foreign dump first, so that
// every node restores it exactly).
func (n *Node) Import(ctx context.Context, r io.Reader, size int64) error {
	if err := n.WaitLeader(ctx); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	n.clock.confirm()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	if err := n.raft.Restore(meta, r, timeout); err != nil {
		return fmt.Errorf("import: raft restore: %w", err)
	}
	// The restore leaves no entry the state machine has applied at the new
	// index; one write gives linearizable reads an applied index to wait for.
	for {
		reply := n.Write(ctx, []command.Op{command.Cmd([]byte("del"), []byte("__raftset_import__"))})[0]
		if !command.IsError(reply) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("import: first write after restore: %s", reply)
		}
		time.Sleep(50 * time.Millisecond) // leadership is settling
	}
}
