package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"raftset/internal/command"
)

// Adding a node (docs/sharding.md, Adding a node): RAFT.SHARD ADDNODE <id>
// <client-addr> <raft-addr> runs on the metadata leader's process
// (relayToMeta, as ADDSHARD), which writes a node record into the map (one
// compare-and-set, new epoch). Every process then finds the node's Raft
// address after its peers (raftAddrOf) and its client address in the map
// (clientAddr), so ADDREPLICA can give the node replicas and other
// processes dial it, with no restart. The node itself is a process started
// with no replica (NewHost with a map that does not name it), which
// fetches the map from the metadata voters.

// cmdAddNode is RAFT.SHARD ADDNODE relayed to the metadata leader's
// process: raftset.addnode <id> <client-addr> <raft-addr> [relayed].
const cmdAddNode = "raftset.addnode"

// addNodeCmd is RAFT.SHARD ADDNODE <id> <client-addr> <raft-addr>.
func (h *Host) addNodeCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 5 {
		return command.Error(command.ErrArity("raft.shard|addnode"))
	}
	return h.addNode(ctx, args[2:5], false)
}

// addNode checks <id> <client-addr> <raft-addr> and has the metadata
// leader's process record them; relayed: sent by a metadata voter.
func (h *Host) addNode(ctx context.Context, a [][]byte, relayed bool) []byte {
	id, client, raftAddr := string(a[0]), string(a[1]), string(a[2])
	if err := checkNodeRecord(id, client, raftAddr); err != nil {
		return command.Error("ERR ADDNODE: " + err.Error())
	}
	args := [][]byte{[]byte(cmdAddNode), a[0], a[1], a[2]}
	return h.relayToMeta(ctx, "ADDNODE", runAgain, args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		if err := h.driveAddNode(ctx, id, NodeRecord{Client: client, Raft: raftAddr}); err != nil {
			var unknown errAddrUnknown
			if errors.As(err, &unknown) {
				return command.Error("TRYAGAIN ADDNODE: " + err.Error())
			}
			return command.Error("ERR ADDNODE: " + err.Error())
		}
		return command.OK
	})
}

// driveAddNode writes the node record, refusing an id or an address that
// another node has. The same record again is +OK (a repeat whose first
// reply was lost finds it in place).
func (h *Host) driveAddNode(ctx context.Context, id string, rec NodeRecord) error {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("the cluster map is not bootstrapped yet")
	}
	if old, ok := cur.Nodes[id]; ok && old == rec {
		return nil
	}
	if h.knownNode(cur, id) {
		return fmt.Errorf("node %s already exists", id)
	}
	for _, other := range h.nodeIDs(cur) {
		a := h.clientAddrIn(cur, other)
		if a == "" && other == h.self {
			a = h.cfg.ClientAddr
		}
		if a == "" {
			// Not in the map and not published in a shard held here yet
			// (a node publishes its address through its shards' logs
			// after it starts): the address cannot be compared yet.
			return errAddrUnknown(other)
		}
		if a == rec.Client {
			return fmt.Errorf("client address %s is node %s's", rec.Client, other)
		}
		if a, _ := h.raftAddrIn(cur, other); a == rec.Raft {
			return fmt.Errorf("Raft address %s is node %s's", rec.Raft, other)
		}
	}
	next := cur.clone()
	next.Epoch++
	if next.Nodes == nil {
		next.Nodes = map[string]NodeRecord{}
	}
	next.Nodes[id] = rec
	// A removed node added again (RAFT.SHARD REMOVENODE) is a node again.
	next.Removed = slices.DeleteFunc(next.Removed, func(r string) bool { return r == id })
	if len(next.Removed) == 0 {
		next.Removed = nil
	}
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("recording node %s: %w", id, err)
	}
	h.log.Info("added a node", "node", id, "client-addr", rec.Client, "raft-addr", rec.Raft, "epoch", next.Epoch)
	return nil
}

// errAddrUnknown: node's client address is not known here yet, so ADDNODE
// cannot tell whether the new one is taken (-TRYAGAIN: nothing was done).
type errAddrUnknown string

func (e errAddrUnknown) Error() string {
	return "node " + string(e) + "'s client address is not known yet, retry"
}

// nodeIDs are the cluster's nodes as this process knows them (knownNode),
// sorted.
func (h *Host) nodeIDs(m *ShardMap) []string {
	ids := slices.Collect(maps.Keys(h.raftAddr))
	ids = append(ids, h.self)
	ids = append(ids, slices.Collect(maps.Keys(m.Nodes))...)
	for _, sh := range m.Shards {
		ids = append(ids, sh.Members...)
	}
	slices.Sort(ids)
	return slices.DeleteFunc(slices.Compact(ids), func(id string) bool { return m.removed(id) && id != h.self })
}

// addNodeArgs is ADDNODE's check of raftset.addnode's arguments on the
// process it was relayed to.
func addNodeArgs(args [][]byte) ([][]byte, bool, []byte) {
	if len(args) != 4 && len(args) != 5 {
		return nil, false, command.Error(command.ErrArity(cmdAddNode))
	}
	return args[1:4], len(args) == 5, nil
}
