package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// errRestoreUnknown: Raft restored the snapshot on this leader, but no entry
// after it committed before leadership was lost or the caller gave up, so
// the cluster may or may not hold it: a new leader that never installed it
// goes on from the state before it.
var errRestoreUnknown = errors.New("the restore's outcome is unknown: no entry after it committed on this leader")

// restoreIndexGap is how far past the leader's last log index a restored
// snapshot is placed. Raft's user restore takes the index after the
// leader's last entry for it, unless the snapshot names a higher one. A
// member whose log goes past the leader's (entries of an old term, appended
// by a leader that lost its quorum, never committed) may hold an entry of
// another term at that index, and hashicorp/raft's follower keeps it when it
// installs the snapshot: it then refuses every append after the snapshot
// for the term mismatch and asks for the snapshot again, forever
// (hashicorp/raft#697, found by TestJepsen/restore-3). Such a tail is what
// an old leader appends before its lease runs out, a few thousand entries
// at most; past the gap no member holds an entry, so a follower takes the
// snapshot's index and term as its last and goes on from there. Log indexes
// (and the replication offsets INFO shows) jump by the gap at a restore.
const restoreIndexGap = 1 << 20

// Import replaces the cluster's state with an RDB snapshot through Raft's user
// restore: the snapshot becomes the new base of the log, past every existing
// entry, so every node — including nodes that join later and would otherwise
// replay the log from its start — receives it. It runs on the leader; the
// caller hands it a raftset snapshot (convert a foreign dump first, so that
// every node restores it exactly). It returns once a quorum holds the
// snapshot; an error wrapping raft.ErrNotLeader means nothing was restored,
// errRestoreUnknown that the outcome is unknown.
func (n *Node) Import(ctx context.Context, r io.Reader, size int64) error {
	if err := n.WaitLeader(ctx); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	n.importMu.Lock()
	defer n.importMu.Unlock()
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	n.clock.confirm()
	n.rd.restore.begin()
	defer n.rd.restore.end()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size, Index: n.raft.LastIndex() + restoreIndexGap}
	if err := n.raft.Restore(meta, r, timeout); err != nil {
		return fmt.Errorf("import: raft restore: %w", err)
	}
	return n.commitAfterRestore(ctx)
}

// commitAfterRestore commits a write of this leader's after a restore. Raft
// left the restored snapshot on this node alone, at an index past its log:
// a follower accepts the next entry only after installing the snapshot, so
// that entry's commit proves a quorum holds it, and it gives linearizable
// reads an applied index past the restore to wait for. The write is never
// forwarded: another leader would commit it without the snapshot.
func (n *Node) commitAfterRestore(ctx context.Context) error {
	op := []command.Op{command.Cmd([]byte("del"), []byte("__raftset_import__"))}
	for {
		if n.raft.State() != raft.Leader {
			return fmt.Errorf("import: %w (this node no longer leads)", errRestoreUnknown)
		}
		replies, outcome := n.w.submitOutcome(ctx, op, false)
		if outcome == applied && !command.IsError(replies[0]) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("import: %w: %s", errRestoreUnknown, replies[0])
		}
		time.Sleep(50 * time.Millisecond) // a full queue, a term changing
	}
}
