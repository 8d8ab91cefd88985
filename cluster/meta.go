package cluster

import (
	"context"

	"raftset/internal/command"
)

// Node metadata (docs/invariants.md §1): every node knows every other node's
// client address, so that a follower can forward to the leader and ROLE,
// INFO and SENTINEL can name it.
//
// Each node, once it sees a leader, asks it with the internal command
// "raftset.node <id> <client-addr>" to publish its address whenever the
// replicated value differs from its own; the leader proposes a
// command.TypeNode entry (publishNodeAddr). The state machine applies it
// into its id→address map, which is replicated state like the keyspace: it
// travels in every snapshot (AUX field fsm.AuxNodes) and every node applies
// the same entries, so every node ends with the same map. The entry type is
// ignorable (command.IgnoreIfUnknown): a binary that predates it skips it
// instead of stopping. Logs written before it carry addresses as
// "raftset.node" command ops inside batches, which the state machine still
// reads into the same map.

// CmdNode is the internal command that asks the leader to publish a node's
// client address.
const CmdNode = "raftset.node"

// publishNodeAddr proposes the entry that records id's client address and
// waits until it is applied here. This node must lead. The reply is +OK, or
// the write path's TRYAGAIN (not proposed) or CLUSTERDOWN (outcome unknown),
// and the outcome says which.
func (n *Node) publishNodeAddr(ctx context.Context, id, addr string) ([]byte, outcomeKind) {
	e := command.Entry{Type: command.TypeNode, Node: &command.NodeAddr{ID: id, Addr: addr}}
	return n.w.proposeEntry(ctx, e.Encode(nil))
}

// ClientAddr returns the client address node id published, empty if
// unknown.
func (n *Node) ClientAddr(id string) string { return n.fsm.ClientAddr(id) }

// leaderClient returns the leader's id and client address ("" if unknown).
func (n *Node) leaderClient() (id, addr string) {
	_, lid := n.Leader()
	if lid == "" {
		return "", ""
	}
	if lid == n.cfg.NodeID && n.cfg.ClientAddr != "" {
		return lid, n.cfg.ClientAddr
	}
	return lid, n.fsm.ClientAddr(lid)
}
