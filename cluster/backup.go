package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/memlimit"
	"raftset/snapshot"
)

// Backup and restore of a running cluster (docs/operations.md).
//
// A backup is the state machine's snapshot written as RDB version 10, which
// Redis 7.0 and later load as well as raftset (a restore reloads it with
// Redis's conversions anyway, so the exact encodings of version 11 would buy
// nothing). StreamRDB captures it after the linearizable read barrier (so it
// holds every write acknowledged before the request, on a follower too) and
// writes it twice, once to learn
// its size (SYNC announces the length before the bytes, as Redis's
// disk-based sync does) and once to the client. The capture is
// copy-on-write, so both passes read the same state while writes go on, and
// the writer is deterministic, so both passes write the same bytes.
//
// A restore (RAFT.RESTORE) replaces the state through Raft's user restore,
// as --import does for a new node: every member installs the file and the
// membership is kept.

// rdbSnapshot is what StreamRDB needs of a captured state machine snapshot
// (*fsm.FSM's implements it).
type rdbSnapshot interface {
	ExportRDB(w io.Writer) error
	IndexTerm() (index, term uint64)
}

// SyncError is StreamRDB's error before anything was written: Reply is the
// RESP error line to send (without the leading '-').
type SyncError struct{ Reply string }

func (e *SyncError) Error() string { return e.Reply }

// StreamRDB writes a consistent RDB file of the state. It passes the read
// barrier, captures the state, measures the file, then calls start with its
// exact size and the log index it is consistent with (the file's
// raftset-index AUX field) and writes the file to the writer start returns.
// An error before start was called is a *SyncError and nothing was written.
func (n *Node) StreamRDB(ctx context.Context, start func(size int64, index uint64) (io.Writer, error)) error {
	if reply := n.linearize(ctx); reply != nil {
		return &SyncError{Reply: strings.TrimSpace(strings.TrimPrefix(string(reply), "-"))}
	}
	// The capture's copies are garbage once the file is written, as a Raft
	// snapshot's are (metaFSM.Snapshot).
	end := memlimit.Transient()
	defer end()
	snap, err := n.fsm.Snapshot()
	if err != nil {
		return &SyncError{Reply: "ERR sync: " + err.Error()}
	}
	defer snap.Release()
	rs, ok := snap.(rdbSnapshot)
	if !ok {
		return &SyncError{Reply: "ERR sync: this state machine cannot write an RDB file"}
	}
	var size countWriter
	if err := rs.ExportRDB(&size); err != nil {
		return &SyncError{Reply: "ERR sync: " + err.Error()}
	}
	index, term := rs.IndexTerm()
	w, err := start(size.n, index)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	started := time.Now()
	out := &countWriter{w: w}
	if err := rs.ExportRDB(out); err != nil {
		return fmt.Errorf("sync: send RDB: %w", err)
	}
	if out.n != size.n {
		// Cannot happen with a deterministic writer; the client's length
		// check would catch it, but say why here.
		return fmt.Errorf("sync: the RDB file changed between passes (%d then %d bytes)", size.n, out.n)
	}
	n.log.Info("sent an RDB file (SYNC)", "bytes", size.n, "index", index, "term", term, "took", time.Since(started))
	return nil
}

// countWriter counts bytes written, passing them to w when set.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.w == nil {
		c.n += int64(len(p))
		return len(p), nil
	}
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// restoreTimeout bounds a RAFT.RESTORE: the file is installed on every
// member through Raft's snapshot transfer.
const restoreTimeout = 5 * time.Minute

// restoreRDB is RAFT.RESTORE on the leader: the file (a raftset backup or
// any Redis dump) is loaded as --import loads a dump (database 0, Redis's
// encodings, keys already expired dropped, the cluster's current set-max-*
// limits), written back as a raftset snapshot that carries the current
// node addresses and membership, and installed through Raft's user restore.
func (n *Node) restoreRDB(ctx context.Context, file []byte) []byte {
	scratch := fsm.New(fsm.Config{Limits: n.fsm.Limits(), Logger: n.log.Named("restore")})
	keys, err := scratch.LoadRDB(bytes.NewReader(file), fsm.LoadOptions{NowMs: n.nowMs()})
	if err != nil {
		return constReply("ERR RAFT.RESTORE: the file was not restored: " + oneLine(err.Error()))
	}
	aux := n.membershipAux()
	if nodes := n.nodesAux(); nodes != "" {
		aux = append(aux, snapshot.AuxField{Key: fsm.AuxNodes, Value: nodes})
	}
	scratch.SetSnapshotAux(func() []snapshot.AuxField { return aux })
	var buf bytes.Buffer
	if err := scratch.WriteRDB(&buf); err != nil {
		return constReply("ERR RAFT.RESTORE: the file was not restored: " + oneLine(err.Error()))
	}
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	started := time.Now()
	if err := n.Import(ctx, &buf, int64(buf.Len())); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return constReply("TRYAGAIN RAFT.RESTORE was not run: this node is no longer the leader, retry")
		}
		if errors.Is(err, errRestoreUnknown) {
			return constReply("CLUSTERDOWN RAFT.RESTORE: " + oneLine(err.Error()))
		}
		return constReply("ERR RAFT.RESTORE: " + oneLine(err.Error()))
	}
	n.log.Info("restored the cluster's state from an RDB file (RAFT.RESTORE)", "keys", keys,
		"bytes", len(file), "took", time.Since(started))
	return command.AppendInt(nil, int64(keys))
}

// nodesAux is the node-address AUX value (fsm.AuxNodes) of the members'
// addresses known now, so that a restore does not forget where to forward.
func (n *Node) nodesAux() string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	m := map[string]string{}
	for _, s := range f.Configuration().Servers {
		if a := n.fsm.ClientAddr(string(s.ID)); a != "" {
			m[string(s.ID)] = a
		}
	}
	var b strings.Builder
	for i, id := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id + "=" + m[id])
	}
	return b.String()
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
