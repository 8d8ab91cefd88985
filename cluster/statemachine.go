package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/snapshot"
)

// stateMachine is what the node uses of *fsm.FSM. It is an interface so the
// node's own tests can drive a small fake; production always passes *fsm.FSM.
type stateMachine interface {
	raft.FSM
	// Prepare checks a write's syntax without state and rewrites relative
	// times to absolute ones; syntax errors come back as OpReply.
	Prepare(args [][]byte, nowMs int64) command.Op
	// Read runs a read-only command against the current state.
	Read(args [][]byte, nowMs int64, src setenc.Source, dst []byte) []byte
	// WatchStamp returns the WATCH stamps of keys.
	WatchStamp(keys [][]byte) []command.Watch
	// ExpiredKeys samples up to max keys whose deadline is at or before nowMs.
	ExpiredKeys(nowMs int64, max int) [][]byte
	// Clock is the state's time: the newest entry time applied (Unix ms).
	Clock() int64
	// WaitApplied blocks until the entry at index (a command entry) has been
	// applied, or ctx ends.
	WaitApplied(ctx context.Context, index uint64) error
	// AppliedIndex is the index of the last command entry applied.
	AppliedIndex() uint64
	// Limits are the replicated set-max-* settings.
	Limits() setenc.Limits
	// KeyspaceCounts returns the number of keys and of keys with a deadline.
	KeyspaceCounts() (keys, expires int)
	// WriteRDB writes the state as an RDB file with the snapshot's AUX
	// fields (DEBUG RELOAD).
	WriteRDB(w io.Writer) error
	// ClientAddr returns the client address node id published (meta.go),
	// empty if unknown.
	ClientAddr(id string) string
	// Halted is closed when the state machine stopped applying the log
	// because an entry does not decode; HaltErr says why.
	Halted() <-chan struct{}
	HaltErr() error
}

// New starts a node around the state machine f: it opens (or creates) the
// Raft stores in cfg.DataDir, restores the latest snapshot into f (failing,
// files untouched, if it is damaged), bootstraps when cfg.Bootstrap is set
// and the store is empty, and starts the proposer, the read barrier and the
// expiry sweeper. Close stops it.
func New(cfg Config, f *fsm.FSM) (*Node, error) {
	if f == nil {
		return nil, errors.New("cluster: nil state machine")
	}
	n, err := newNode(cfg, f)
	if err != nil {
		return nil, err
	}
	f.SetSnapshotAux(n.membershipAux)
	return n, nil
}

// repliesOf extracts the per-op replies from an ApplyFuture's response.
func repliesOf(resp any) ([][]byte, bool) {
	r, ok := resp.(*fsm.ApplyResult)
	if !ok || r == nil {
		return nil, false
	}
	return r.Replies, true
}

// dropReplies lets the reply buffers of an entry go once they were handed
// out: Raft's log cache keeps each recent entry's apply future, and with it
// this response, for as long as the entry stays cached.
func dropReplies(resp any) {
	if r, ok := resp.(*fsm.ApplyResult); ok && r != nil {
		r.Replies = nil
	}
}

// AuxMembers is the snapshot AUX field that records the Raft configuration
// when the snapshot was taken: "voter:id=addr,nonvoter:id=addr,...".
const AuxMembers = "raftset-members"

// membershipAux is the state machine's extra-AUX hook: the cluster
// membership travels in every snapshot (design brief §6).
func (n *Node) membershipAux() []snapshot.AuxField {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var b strings.Builder
	for i, s := range f.Configuration().Servers {
		if i > 0 {
			b.WriteByte(',')
		}
		switch s.Suffrage {
		case raft.Voter:
			b.WriteString("voter:")
		case raft.Nonvoter:
			b.WriteString("nonvoter:")
		default:
			b.WriteString("staging:")
		}
		b.WriteString(string(s.ID))
		b.WriteByte('=')
		b.WriteString(string(s.Address))
	}
	return []snapshot.AuxField{{Key: AuxMembers, Value: b.String()}}
}

// Fatal is closed when the node can no longer follow the log: its state
// machine met an entry it cannot decode (written by a newer raftset, or
// corrupt) and stopped applying. Raft keeps running, but the node's state
// is frozen at the entry before; the process should log FatalErr and exit.
func (n *Node) Fatal() <-chan struct{} { return n.fsm.Halted() }

// FatalErr says why Fatal was closed, nil before.
func (n *Node) FatalErr() error {
	if err := n.fsm.HaltErr(); err != nil {
		return fmt.Errorf("cluster: node %s: %w", n.cfg.NodeID, err)
	}
	return nil
}
