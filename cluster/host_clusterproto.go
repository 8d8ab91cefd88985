package cluster

// The CLUSTER commands across every shard (one node id per process).

import (
	"context"
	"slices"
	"strings"

	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/strictint"
)

// views describes every shard of the map: the hosted ones from their own
// Raft configuration and leader, the others from the map (members at the
// client addresses hosted shards know, no master known).
func (h *Host) views(probe bool) []shardView {
	out := make([]shardView, 0, len(h.Map().Shards))
	for _, sh := range h.Map().Shards {
		if n, ok := h.held.Load().nodes[sh.ID]; ok {
			v := n.view(probe)[0]
			v.ranges = sh.Ranges
			out = append(out, v)
			continue
		}
		v := shardView{ranges: sh.Ranges}
		l, known := h.remoteLeader(sh.ID)
		for _, mem := range slices.Sorted(slices.Values(sh.Members)) {
			m := clusterMember{id: ClusterNodeID(mem), self: mem == h.self, master: known && mem == l.id}
			if a := h.clientAddr(mem); a != "" {
				m.host, m.port = splitAddr(a)
			}
			if m.master {
				m.host, m.port = splitAddr(l.addr)
				v.hasMaster, v.term = true, l.term
				v.members = slices.Insert(v.members, 0, m)
			} else {
				v.members = append(v.members, m)
			}
		}
		for i := range v.members {
			if a, ok := h.raftAddrOf(idOfMember(sh.Members, v.members[i].id)); ok {
				_, v.members[i].busPort = splitAddr(a)
			}
		}
		out = append(out, v)
	}
	return out
}

// idleViews are, for CLUSTER NODES and INFO, the nodes that hold no
// replica of any shard of m (recorded by RAFT.SHARD ADDNODE, and this
// process while it holds none): each a master of no slot, as Redis lists a
// node just added to a cluster. CLUSTER SLOTS and SHARDS list shards only.
func (h *Host) idleViews(m *ShardMap) []shardView {
	var out []shardView
	for _, id := range h.nodeIDs(m) {
		if _, recorded := m.Nodes[id]; (!recorded && id != h.self) || len(m.Hosts(id)) > 0 {
			continue
		}
		mem := clusterMember{id: ClusterNodeID(id), self: id == h.self, master: true}
		mem.host, mem.port = splitAddr(h.clientAddrIn(m, id))
		if id == h.self && h.cfg.ClientAddr != "" {
			mem.host, mem.port = splitAddr(h.cfg.ClientAddr)
		}
		if a, ok := h.raftAddrIn(m, id); ok {
			_, mem.busPort = splitAddr(a)
		} else if id == h.self {
			a := h.cfg.RaftAdvertise
			if a == "" {
				a = h.cfg.RaftBind
			}
			_, mem.busPort = splitAddr(a)
		}
		out = append(out, shardView{members: []clusterMember{mem}})
	}
	return out
}

// idOfMember is the member whose cluster node id is cid.
func idOfMember(members []string, cid string) string {
	for _, m := range members {
		if ClusterNodeID(m) == cid {
			return m
		}
	}
	return ""
}

// clusterCmd answers CLUSTER for every shard of the map; COUNTKEYSINSLOT
// and GETKEYSINSLOT from the slot's replica here (a slot served elsewhere
// has no keys here, as on a Redis node that does not own it).
func (h *Host) clusterCmd(_ context.Context, args [][]byte) []byte {
	switch strings.ToLower(string(args[1])) {
	case "myid":
		return command.AppendBulkString(nil, ClusterNodeID(h.self))
	case "info":
		return clusterInfo(append(h.views(false), h.idleViews(h.Map())...), h.Map().Epoch)
	case "slots":
		return clusterSlots(h.views(false))
	case "shards":
		return clusterShards(h.views(true))
	case "nodes":
		return clusterNodes(append(h.views(true), h.idleViews(h.Map())...), h.Map().Epoch)
	case "countkeysinslot", "getkeysinslot":
		n := h.Home()
		if s, ok := strictint.Parse(args[2]); ok && s >= 0 && s < slot.Count {
			if sn, ok := h.held.Load().nodes[h.Map().ShardOf(int(s))]; ok {
				n = sn
			} else if strings.EqualFold(string(args[1]), "countkeysinslot") {
				return command.AppendInt(nil, 0)
			} else if len(args) > 3 {
				if _, ok := strictint.Parse(args[3]); ok {
					return command.AppendArray(nil, 0)
				}
			}
		}
		if n == nil {
			return replyNoReplica
		}
		return n.slotKeysCmd(args)
	}
	return command.Error(command.ErrUnknownCommand(string(args[0]), args[1:]))
}
