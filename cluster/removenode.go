package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
)

// Removing a node (docs/sharding.md, Removing a node): RAFT.SHARD
// REMOVENODE <id> runs on the metadata leader's process (relayToMeta, as
// ADDNODE) once the node holds no replica (raftset cluster remove-node
// moves them off first, with ADDREPLICA and REMOVEREPLICA): one
// compare-and-set drops its node record and home line and writes a
// "removed <id>" line. The line is what lets a repeat after a lost reply
// answer +OK rather than "unknown node", and what takes a node that is in
// every process's peers (which the map cannot edit) out of the cluster:
// no process lists it or lets ADDREPLICA give it a replica again (knownNode,
// nodeIDs); ADDNODE of the same id brings it back and drops the line. The
// removed process keeps running with no replica (stopRemovedShards closed
// them); the operator stops it, and its directory can be deleted.

// cmdRemoveNode is RAFT.SHARD REMOVENODE relayed to the metadata leader's
// process: raftset.removenode <id> [relayed].
const cmdRemoveNode = "raftset.removenode"

// removeNodeCmd is RAFT.SHARD REMOVENODE <id>.
func (h *Host) removeNodeCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 3 {
		return command.Error(command.ErrArity("raft.shard|removenode"))
	}
	return h.removeNode(ctx, args[2], false)
}

// removeNode checks <id> and has the metadata leader's process remove it;
// relayed: sent by a metadata voter.
func (h *Host) removeNode(ctx context.Context, id []byte, relayed bool) []byte {
	if err := checkNodeID(string(id)); err != nil {
		return command.Error("ERR REMOVENODE: " + err.Error())
	}
	args := [][]byte{[]byte(cmdRemoveNode), id}
	return h.relayToMeta(ctx, "REMOVENODE", args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		if err := h.driveRemoveNode(ctx, string(id)); err != nil {
			return command.Error("ERR REMOVENODE: " + err.Error())
		}
		return command.OK
	})
}

// driveRemoveNode removes node from the map, refusing an unknown node, a
// metadata voter, and a node the map still names in a shard. A node
// removed already is +OK with nothing changed.
func (h *Host) driveRemoveNode(ctx context.Context, node string) error {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	if cur.removed(node) {
		return nil
	}
	if !h.knownNode(cur, node) {
		return fmt.Errorf("unknown node %q (not in peers, nor added by RAFT.SHARD ADDNODE)", node)
	}
	if slices.Contains(h.metaVotersIn(cur), node) {
		// Without this process the group would run one voter short for
		// good: it leaves the group first (metavoters.go).
		return fmt.Errorf("node %s is a voter of the metadata group: remove it from the group first (RAFT.SHARD REMOVEMETA %s)", node, node)
	}
	if held := cur.Hosts(node); len(held) > 0 {
		ids := make([]string, len(held))
		for i, id := range held {
			ids[i] = strconv.FormatUint(uint64(id), 10)
		}
		return fmt.Errorf("node %s still holds a replica of shard %s: move them to other nodes first (raftset cluster remove-node does)", node, strings.Join(ids, ", "))
	}
	next := cur.clone()
	next.Epoch++
	delete(next.Nodes, node)
	if len(next.Nodes) == 0 {
		next.Nodes = nil
	}
	next.setHome(node, 0, false)
	i, _ := slices.BinarySearch(next.Removed, node)
	next.Removed = slices.Insert(next.Removed, i, node)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("removing node %s from the map: %w", node, err)
	}
	h.log.Info("removed a node", "node", node, "epoch", next.Epoch)
	return nil
}

// removeNodeArgs is REMOVENODE's check of raftset.removenode's arguments
// on the process it was relayed to.
func removeNodeArgs(args [][]byte) ([]byte, bool, []byte) {
	if len(args) != 2 && len(args) != 3 {
		return nil, false, command.Error(command.ErrArity(cmdRemoveNode))
	}
	return args[1], len(args) == 3, nil
}
