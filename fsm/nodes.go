package fsm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Node metadata: every node's client address, so that a follower can
// forward to the leader and ROLE, INFO and SENTINEL can name it. Nodes
// publish their address as TypeNode entries (older logs: "raftset.node id
// addr" command ops, read the same way); the map is replicated state like
// the keyspace, restored from and written to snapshots as the AUX field
// AuxNodes.
//
// It is not in DEBUG DIGEST: the digest is Redis's digest of the dataset
// (digest.go), comparable with a Redis holding the same keys, and the
// addresses are not data. Replicas still agree on the map, since they apply
// the same entries.

// AuxNodes is the snapshot AUX field holding the id→client-address map:
// "id=addr,id=addr" sorted by id. Snapshots of earlier versions wrote it
// from the cluster package, with the same key and format.
const AuxNodes = "raftset-nodes"

// ClientAddr returns the client address node id published, empty if
// unknown. It does not wait for the state lock.
func (f *FSM) ClientAddr(id string) string { return (*f.nodes.Load())[id] }

// setNodeLocked records a published address; f.mu is held.
func (f *FSM) setNodeLocked(a command.NodeAddr) {
	old := *f.nodes.Load()
	if cur, ok := old[a.ID]; ok && cur == a.Addr {
		return
	}
	m := maps.Clone(old)
	m[a.ID] = a.Addr
	f.nodes.Store(&m)
}

// formatNodes encodes the map as the AuxNodes value.
func formatNodes(m map[string]string) string {
	var b strings.Builder
	for i, id := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id + "=" + m[id])
	}
	return b.String()
}

func parseNodes(v string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if id, addr, ok := strings.Cut(kv, "="); ok && id != "" {
			out[id] = addr
		}
	}
	return out
}

// ErrHalted is wrapped by HaltErr and by the Snapshot and Restore errors of
// a halted state machine.
var ErrHalted = errors.New("fsm: stopped applying the log")

// halt stops the state machine at entry l, which does not decode. Raft has
// no way to refuse an entry: it would go on handing over the ones after
// it, so Apply ignores everything from now on, and Snapshot refuses (a
// snapshot would claim the indexes not applied), until the process, told
// through Halted, stops.
func (f *FSM) halt(l *raft.Log, err error) {
	f.haltOnce.Do(func() {
		version, hint := -1, ""
		if de := (*command.DecodeError)(nil); errors.As(err, &de) {
			version = int(de.Version)
			hint = "; no raftset can apply it"
			if de.Newer {
				hint = "; upgrade this node to a raftset that reads it"
			}
		}
		f.log.Error("stopped applying the log: "+err.Error()+hint+
			" (README: Recovering from an entry this node cannot apply)",
			"index", l.Index, "term", l.Term, "format_version", version)
		f.haltErr = fmt.Errorf("%w at entry %d (term %d): %w", ErrHalted, l.Index, l.Term, err)
		close(f.halted)
	})
}

// haltRestore stops the state machine when Raft hands it a snapshot that a
// newer raftset wrote (InstallSnapshot from an upgraded leader). Raft would
// retry the install forever; the node cannot follow the cluster any more,
// and its state is the one before the snapshot.
func (f *FSM) haltRestore(err error) {
	f.haltOnce.Do(func() {
		f.log.Error("stopped applying the log: cannot install the leader's snapshot: " + err.Error() +
			" (docs/operations.md: Upgrade)")
		f.haltErr = fmt.Errorf("%w: install snapshot: %w", ErrHalted, err)
		close(f.halted)
	})
}

// Halted is closed when the state machine stops applying the log because an
// entry does not decode (written by a newer raftset, or corrupt). The
// process should then stop: this replica can no longer follow the others.
func (f *FSM) Halted() <-chan struct{} { return f.halted }

// HaltErr says why the state machine halted (it wraps ErrHalted and the
// *command.DecodeError), nil while it has not.
func (f *FSM) HaltErr() error {
	if !f.isHalted() {
		return nil
	}
	return f.haltErr
}

func (f *FSM) isHalted() bool {
	select {
	case <-f.halted:
		return true
	default:
		return false
	}
}
