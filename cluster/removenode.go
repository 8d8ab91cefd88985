package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/command"
)

// Removing a node (docs/sharding.md, Removing a node): RAFT.SHARD
// REMOVENODE <id> runs on the metadata leader's process (relayToMeta, as
// ADDNODE); a metadata voter leaves the group first (metaReplacement),
// and the node is removed once it holds no replica (raftset cluster remove-node
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

// removeNodeCmd is RAFT.SHARD REMOVENODE <id> [DRY-RUN].
func (h *Host) removeNodeCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 3 && len(args) != 4 {
		return command.Error(command.ErrArity("raft.shard|removenode"))
	}
	if len(args) == 4 && !strings.EqualFold(string(args[3]), "dry-run") {
		return command.Error("ERR REMOVENODE wants <node> [DRY-RUN]")
	}
	return h.removeNode(ctx, args[2], len(args) == 4, false)
}

// removeNode checks <id> and has the metadata leader's process remove it
// (dry: say what it would do to the metadata group); relayed: sent by a
// metadata voter.
func (h *Host) removeNode(ctx context.Context, id []byte, dry, relayed bool) []byte {
	if err := CheckNodeID(string(id)); err != nil {
		return command.Error("ERR REMOVENODE: " + err.Error())
	}
	args := [][]byte{[]byte(cmdRemoveNode), id}
	if dry {
		args = append(args, []byte("dry-run"))
	}
	return h.relayToMeta(ctx, "REMOVENODE", runAgain, args, relayed, func() []byte {
		h.moveMu.Lock()
		var plan string
		var err error
		if dry {
			plan, err = h.planRemoveNode(ctx, string(id))
		} else {
			err = h.driveRemoveNode(ctx, string(id))
		}
		h.moveMu.Unlock()
		if errors.Is(err, errMetaHandedOver) {
			// This process led the metadata group and the node is its
			// own: the new leader's process goes on.
			return h.removeNode(ctx, id, dry, false)
		}
		if err != nil {
			return command.Error("ERR REMOVENODE: " + err.Error())
		}
		if dry {
			return command.AppendBulkString(nil, plan)
		}
		return command.OK
	})
}

// planRemoveNode is REMOVENODE's DRY-RUN: the metadata group's steps, one
// line each ("" for a node that is no voter), or the refusal.
func (h *Host) planRemoveNode(ctx context.Context, node string) (string, error) {
	cur, err := h.removableMap(ctx, node)
	if err != nil || cur == nil {
		return "", err
	}
	repl, voter, err := h.metaReplacement(ctx, cur, node)
	switch {
	case err != nil || !voter:
		return "", err
	case repl != "":
		return fmt.Sprintf("add metadata voter %s (add-meta %s)\nremove metadata voter %s (remove-meta %s)\n", repl, repl, node, node), nil
	}
	return fmt.Sprintf("remove metadata voter %s (remove-meta %s)\n", node, node), nil
}

// removableMap is the map REMOVENODE of node starts from: nil (and no
// error) when node was removed already.
func (h *Host) removableMap(ctx context.Context, node string) (*ShardMap, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	if cur.removed(node) {
		return nil, nil
	}
	if !h.knownNode(cur, node) {
		return nil, fmt.Errorf("unknown node %q (not in peers, nor added by RAFT.SHARD ADDNODE)", node)
	}
	return cur, nil
}

// driveRemoveNode removes node from the map, refusing an unknown node and
// a node the map still names in a shard. A metadata voter leaves the group
// first (metaReplacement), so that the group does not run one voter short
// for good. A node removed already is +OK with nothing changed.
func (h *Host) driveRemoveNode(ctx context.Context, node string) error {
	cur, err := h.removableMap(ctx, node)
	if err != nil || cur == nil {
		return err
	}
	repl, voter, err := h.metaReplacement(ctx, cur, node)
	if err != nil {
		return err
	}
	if voter {
		if repl != "" {
			if err := h.driveAddMeta(ctx, repl); err != nil {
				return fmt.Errorf("adding %s to the metadata group in place of %s: %w", repl, node, err)
			}
		}
		if err := h.driveRemoveMeta(ctx, node); err != nil {
			if errors.Is(err, errMetaHandedOver) {
				return err
			}
			return fmt.Errorf("removing %s from the metadata group: %w", node, err)
		}
		if cur, err = h.readMetaSettled(ctx); err != nil {
			return err
		}
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
// raftset.removenode <id> [dry-run] [relayed]: the id, dry, relayed.
func removeNodeArgs(args [][]byte) ([]byte, bool, bool, []byte) {
	if len(args) < 2 || len(args) > 4 {
		return nil, false, false, command.Error(command.ErrArity(cmdRemoveNode))
	}
	dry := len(args) > 2 && string(args[2]) == "dry-run"
	return args[1], dry, len(args) == 4 || !dry && len(args) == 3, nil
}

// minMetaVoters is how many voters REMOVENODE of a metadata voter leaves
// the group without adding a replacement: 3 tolerate the loss of one.
const minMetaVoters = 3

// metaReplacement plans REMOVENODE of node for the metadata group: voter
// says whether node is one of its voters (in its configuration or the
// map's meta line); repl is the node added in its place first, "" when
// at least minMetaVoters remain without it. The replacement is a node
// of the cluster that is no voter, not removed, and answers, the first by
// id; one the map names a voter while the configuration does not list it
// a voter yet (an earlier attempt's, whose promotion did not finish) is
// taken again. With none, REMOVENODE is refused.
func (h *Host) metaReplacement(ctx context.Context, cur *ShardMap, node string) (repl string, voter bool, err error) {
	voters, _, err := h.metaConfig()
	if err != nil {
		return "", false, err
	}
	named := h.metaVotersIn(cur)
	if !slices.Contains(voters, node) && !slices.Contains(named, node) {
		return "", false, nil
	}
	left := len(slices.DeleteFunc(slices.Clone(voters), func(v string) bool { return v == node }))
	if left >= minMetaVoters {
		return "", true, nil
	}
	for _, id := range named {
		if id != node && !slices.Contains(voters, id) {
			return id, true, nil
		}
	}
	for _, id := range h.nodeIDs(cur) {
		if id == node || slices.Contains(voters, id) || slices.Contains(named, id) {
			continue
		}
		if h.answers(ctx, id) {
			return id, true, nil
		}
	}
	return "", true, fmt.Errorf("node %s is a voter of the metadata group, which would keep %d, and no node can take its place "+
		"(one that is no voter, not removed, and answers): add a node first (raftset cluster add-node), "+
		"or leave the group with %d voters (RAFT.SHARD REMOVEMETA %s)", node, left, left, node)
}

// answers says whether node id's process answers at its client address.
func (h *Host) answers(ctx context.Context, id string) bool {
	addr := h.clientAddr(id)
	if addr == "" {
		return false
	}
	return h.call(ctx, &h.pool, addr, MetaGroup, [][]byte{[]byte(cmdHome)}).kind == applied
}
