package cluster

import "slices"

// Home shards in the map (docs/sharding.md, Removing a node). A process's
// home shard runs its keyless commands and holds its ACL users: the lowest
// id it held at start, or for a process started with none its first
// replica. Every process's home must be known to whoever plans replica
// moves (PlanReplicaMoves, PlanDrain) and to REMOVEREPLICA, and must
// stay the same across the process's restarts, so the map says it: a
// node's home is the lowest id the map gives it unless a "home <node>
// <shard>" line names another. The drivers keep that true:
// ADDREPLICA writes the line when it gives a node a shard below its home
// (or the first replica of a node that holds none, which is its lowest
// then), REMOVEREPLICA drops it with the node's last replica, and a
// process with no replica starts its home shard first after a restart, so
// that it becomes its home again (startNewShards). A map needs no line for
// a process started from the directive that nothing gave a lower id: its
// home is its lowest id there, as before.

// Home is node's home shard in m, false when m gives it no replica.
func (m *ShardMap) Home(node string) (uint32, bool) {
	if id, ok := m.Homes[node]; ok && m.member(id, node) {
		return id, true
	}
	held := m.Hosts(node)
	if len(held) == 0 {
		return 0, false
	}
	return held[0], true
}

// setHome records home as node's home shard in m (m is a copy being
// changed): a line only when it is not the lowest id m gives the node, so
// that maps that need none encode as before.
func (m *ShardMap) setHome(node string, home uint32, ok bool) {
	held := m.Hosts(node)
	if !ok || len(held) == 0 || held[0] == home || !slices.Contains(held, home) {
		delete(m.Homes, node)
		if len(m.Homes) == 0 {
			m.Homes = nil
		}
		return
	}
	if m.Homes == nil {
		m.Homes = map[string]uint32{}
	}
	m.Homes[node] = home
}

// removed says whether RAFT.SHARD REMOVENODE removed node.
func (m *ShardMap) removed(node string) bool {
	_, ok := slices.BinarySearch(m.Removed, node)
	return ok
}
