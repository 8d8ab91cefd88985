package cluster

// Node addresses: a process learns other nodes' Raft addresses from peers
// and, for nodes added after the cluster was created (RAFT.SHARD ADDNODE),
// from the map's node records; client addresses from the map (members'
// "@addr", then node records), then from the logs of the shards held here.

// raftAddrOf is node id's Raft address: peers first (what the process was
// started with), else the node record of the map in use.
func (h *Host) raftAddrOf(id string) (string, bool) { return h.raftAddrIn(h.Map(), id) }

// raftAddrIn is raftAddrOf with the node records of map m.
func (h *Host) raftAddrIn(m *ShardMap, id string) (string, bool) {
	if a, ok := h.raftAddr[id]; ok {
		return a, true
	}
	if r, ok := m.Nodes[id]; ok {
		return r.Raft, true
	}
	return "", false
}

// knownNode says whether id is a node of the cluster: in peers, in a node
// record, or a member of a shard of the map, and not removed.
func (h *Host) knownNode(m *ShardMap, id string) bool {
	if m.removed(id) && id != h.self {
		return false // RAFT.SHARD REMOVENODE: whether in peers or not
	}
	if _, ok := h.raftAddr[id]; ok || id == h.self {
		return true
	}
	_, recorded := m.Nodes[id]
	return recorded || len(m.Hosts(id)) > 0
}
