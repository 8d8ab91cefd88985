package cluster

import (
	"fmt"
	"maps"
	"slices"
)

// ReplicaMovePlan is one replica move of `raftset cluster rebalance
// --replicas`: RAFT.SHARD ADDREPLICA Shard To, wait until To is a voter,
// then REMOVEREPLICA Shard From.
type ReplicaMovePlan struct {
	Shard    uint32
	From, To string
}

// PlanReplicaMoves is the list of replica moves, to run one after
// another, after which the replica counts of nodes (those the map names as
// members or in node records, such as a node RAFT.SHARD ADDNODE recorded
// that holds no replica yet, and those in nodes) differ by at most 1
// (CheckPlacement's rule). Each move goes from a fullest node to an
// emptiest one that holds no replica of the shard (never two replicas of a
// shard on one node), of a shard that is not the donor's home (the map's:
// ShardMap.Home; REMOVEREPLICA refuses it); among candidates, the lowest
// node ids and the highest shard id, so the plan is deterministic. Every
// move lowers the sum of squared counts, so the plan ends; it stops early
// when no move is allowed (the remaining imbalance is then reported by
// CheckPlacement).
func PlanReplicaMoves(m *ShardMap, nodes []string) []ReplicaMovePlan {
	count := m.ReplicaCounts()
	for _, n := range nodes {
		if _, ok := count[n]; !ok {
			count[n] = 0 // a node outside the map holds none
		}
	}
	all := slices.Sorted(maps.Keys(count))
	members := map[uint32][]string{}
	for _, sh := range m.Shards {
		members[sh.ID] = slices.Clone(sh.Members)
	}
	homes := map[string]uint32{}
	for _, n := range all {
		if id, ok := m.Home(n); ok {
			homes[n] = id
		}
	}
	home := func(n string) (uint32, bool) {
		id, ok := homes[n]
		return id, ok
	}
	var plan []ReplicaMovePlan
	for {
		mv, ok := nextReplicaMove(m, all, count, members, home)
		if !ok {
			return plan
		}
		members[mv.Shard] = append(slices.DeleteFunc(members[mv.Shard], func(n string) bool { return n == mv.From }), mv.To)
		count[mv.From]--
		count[mv.To]++
		if _, ok := homes[mv.To]; !ok {
			homes[mv.To] = mv.Shard // a node's first replica is its home
		}
		plan = append(plan, mv)
	}
}

// nextReplicaMove finds the move of PlanReplicaMoves from the current
// counts: donors fullest first, receivers emptiest first, each at least 2
// apart.
func nextReplicaMove(m *ShardMap, all []string, count map[string]int, members map[uint32][]string,
	home func(string) (uint32, bool)) (ReplicaMovePlan, bool) {
	donors, receivers := slices.Clone(all), slices.Clone(all)
	slices.SortStableFunc(donors, func(a, b string) int { return count[b] - count[a] })
	slices.SortStableFunc(receivers, func(a, b string) int { return count[a] - count[b] })
	for _, from := range donors {
		h, _ := home(from)
		for _, to := range receivers {
			if count[from]-count[to] < 2 {
				break
			}
			for i := len(m.Shards) - 1; i >= 0; i-- {
				id := m.Shards[i].ID
				if id != h && slices.Contains(members[id], from) && !slices.Contains(members[id], to) {
					return ReplicaMovePlan{Shard: id, From: from, To: to}, true
				}
			}
		}
	}
	return ReplicaMovePlan{}, false
}

// PlanDrain is the list of replica moves, to run one after another, that
// take every replica off node before RAFT.SHARD REMOVENODE (raftset
// cluster remove-node), and the map as it is after them and the removal
// (node in no shard and without record or home), from which
// PlanReplicaMoves evens out what the drain left uneven. The home shard
// goes last (REMOVEREPLICA keeps it while the node holds another), the
// others from the highest id down; each to the node with the fewest
// replicas that holds none of the shard (never two replicas of a shard on
// one node), the lowest id among equals. An error when no other node can
// take a replica: each holds one of the shard already.
func PlanDrain(m *ShardMap, node string) ([]ReplicaMovePlan, *ShardMap, error) {
	after := m.clone()
	held := m.Hosts(node)
	slices.Reverse(held)
	if home, ok := m.Home(node); ok {
		held = append(slices.DeleteFunc(held, func(id uint32) bool { return id == home }), home)
	}
	count := m.ReplicaCounts()
	all := slices.DeleteFunc(slices.Sorted(maps.Keys(count)), func(n string) bool { return n == node })
	var plan []ReplicaMovePlan
	for _, id := range held {
		i := slices.IndexFunc(after.Shards, func(sh Shard) bool { return sh.ID == id })
		sh := &after.Shards[i]
		to := ""
		for _, n := range all {
			if !slices.Contains(sh.Members, n) && (to == "" || count[n] < count[to]) {
				to = n
			}
		}
		if to == "" {
			return nil, nil, fmt.Errorf("no other node can take node %s's replica of shard %d: each holds one already (add a node first: raftset cluster add-node)", node, id)
		}
		home, had := after.Home(to)
		if !had {
			home = id // its first replica becomes its home
		}
		sh.Members = append(slices.DeleteFunc(sh.Members, func(n string) bool { return n == node }), to)
		after.setHome(to, home, true)
		count[to]++
		plan = append(plan, ReplicaMovePlan{Shard: id, From: node, To: to})
	}
	delete(after.Nodes, node)
	after.setHome(node, 0, false)
	return plan, after, nil
}
