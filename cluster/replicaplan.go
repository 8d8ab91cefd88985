package cluster

import (
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
// shard on one node), of a shard that is not the donor's lowest id (its
// home shard, which REMOVEREPLICA refuses); among candidates, the lowest
// node ids and the highest shard id, so the plan is deterministic. Every
// move lowers the sum of squared counts, so the plan ends; it stops early
// when no move is allowed (the remaining imbalance is then reported by
// CheckPlacement).
func PlanReplicaMoves(m *ShardMap, nodes []string) []ReplicaMovePlan {
	members := map[uint32][]string{}
	count := map[string]int{}
	var all []string
	add := func(n string) {
		if !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	for _, n := range nodes {
		add(n)
	}
	for n := range m.Nodes {
		add(n)
	}
	for _, sh := range m.Shards {
		members[sh.ID] = slices.Clone(sh.Members)
		for _, n := range sh.Members {
			add(n)
			count[n]++
		}
	}
	slices.Sort(all)
	home := func(n string) (uint32, bool) {
		for _, sh := range m.Shards { // ascending ids
			if slices.Contains(members[sh.ID], n) {
				return sh.ID, true
			}
		}
		return 0, false
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
