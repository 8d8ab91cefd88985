package cluster

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/slot"
)

// Placement (docs/sharding.md, Placement): pure functions that lay out a
// new cluster's map, choose which member of each shard should lead, and
// plan the slot moves that even out the shards. They read no state and
// propose nothing, so `raftset cluster create` runs them offline, the
// metadata leader's process runs AssignLeaders for RAFT.SHARD
// BALANCE-LEADERS, and `raftset cluster rebalance` runs PlanSlotMoves on
// the map RAFT.SHARD MAP prints.

// PlaceNode is a node given to Place: its id, and its client address if
// the map should carry it (needed by nodes that share no shard with it).
type PlaceNode struct {
	ID, Addr string
}

// Errors of Place.
var (
	// ErrPlacement is wrapped by every refusal of Place.
	ErrPlacement = errors.New("cluster: placement")
)

// Place lays out a new cluster of shards shards with replicas replicas
// each on nodes: the slots split into contiguous ranges as redis-cli
// --cluster create splits them among masters; replicas dealt to the nodes
// in turn (replica j of shard i on node (i*replicas+j) mod len(nodes)),
// so no shard has two replicas on one node and replica counts per node
// differ by at most 1; each shard's preferred leader (its first member)
// chosen by AssignLeaders so that leader counts differ by at most 1. The
// map's epoch is 1, as ParseShardMap's.
func Place(nodes []PlaceNode, shards, replicas int) (*ShardMap, error) {
	switch {
	case len(nodes) == 0:
		return nil, fmt.Errorf("%w: no nodes", ErrPlacement)
	case shards < 1:
		return nil, fmt.Errorf("%w: %d shards: want at least 1", ErrPlacement, shards)
	case shards > slot.Count:
		return nil, fmt.Errorf("%w: %d shards: at most %d (one slot each)", ErrPlacement, shards, slot.Count)
	case replicas < 1:
		return nil, fmt.Errorf("%w: replication factor %d: want at least 1", ErrPlacement, replicas)
	case replicas > len(nodes):
		return nil, fmt.Errorf("%w: replication factor %d with %d nodes: a shard's replicas need distinct nodes", ErrPlacement, replicas, len(nodes))
	}
	m := &ShardMap{Epoch: 1, Addrs: map[string]string{}}
	seen := map[string]bool{}
	for _, n := range nodes {
		if err := CheckNodeID(n.ID); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPlacement, err)
		}
		if seen[n.ID] {
			return nil, fmt.Errorf("%w: node %s listed twice", ErrPlacement, n.ID)
		}
		seen[n.ID] = true
		if n.Addr != "" {
			if _, _, err := net.SplitHostPort(n.Addr); err != nil {
				return nil, fmt.Errorf("%w: node %s: client address %q: %v", ErrPlacement, n.ID, n.Addr, err)
			}
			m.Addrs[n.ID] = n.Addr
		}
	}
	ranges := SplitSlots(shards)
	pos := 0
	for i := range shards {
		sh := Shard{ID: uint32(i), Ranges: [][2]int{ranges[i]}}
		for range replicas {
			sh.Members = append(sh.Members, nodes[pos%len(nodes)].ID)
			pos++
		}
		m.Shards = append(m.Shards, sh)
	}
	// The preferred leader goes first; the others keep their turn order.
	for id, leader := range AssignLeaders(m.Shards, nil) {
		sh := &m.Shards[id]
		i := slices.Index(sh.Members, leader)
		sh.Members = append([]string{leader}, slices.Delete(slices.Clone(sh.Members), i, i+1)...)
	}
	for _, sh := range m.Shards {
		for s := sh.Ranges[0][0]; s <= sh.Ranges[0][1]; s++ {
			m.owner[s] = sh.ID
		}
	}
	return m, nil
}

// SplitSlots splits the 16384 slots into n contiguous ranges as redis-cli
// --cluster create does (a float step, each end rounded to the nearest
// slot): 0-8191 8192-16383 for 2, 0-5460 5461-10922 10923-16383 for 3.
func SplitSlots(n int) [][2]int {
	per := float64(slot.Count) / float64(n)
	out := make([][2]int, 0, n)
	first, cursor := 0, 0.0
	for i := range n {
		last := int(math.Round(cursor + per - 1))
		if last >= slot.Count || i == n-1 {
			last = slot.Count - 1
		}
		last = max(last, first)
		out = append(out, [2]int{first, last})
		first = last + 1
		cursor += per
	}
	return out
}

// AssignLeaders chooses a leader for each shard among its members so that
// the nodes' leader counts are as even as the membership allows: within
// floor and ceiling of shards/nodes whenever some assignment is (always
// for a map Place laid out: its replica counts are even, so spreading each
// shard evenly over its members is a fractional such assignment, and a
// bipartite b-matching with those bounds then has an integral one).
//
// It is a matching in two rounds, each shard's candidates tried in order
// (below): every node first takes up to the floor, then up to the ceiling, with augmenting paths that move an
// already placed shard to another of its members when that frees a node;
// an augmenting path never lowers a node's count, so the floor reached in
// the first round holds. A shard still without a leader (membership too
// lopsided) goes to its least loaded member.
//
// Candidates of a shard, in order: its first member (the preferred
// leader), then current[id] (its leader now, when known), then its other
// members as listed. Shards are keyed by id in the result.
func AssignLeaders(shards []Shard, current map[uint32]string) map[uint32]string {
	var nodes []string
	for _, sh := range shards {
		for _, mem := range sh.Members {
			if !slices.Contains(nodes, mem) {
				nodes = append(nodes, mem)
			}
		}
	}
	out := map[uint32]string{}
	if len(nodes) == 0 {
		return out
	}
	cands := make([][]string, len(shards))
	for i, sh := range shards {
		c := []string{}
		add := func(n string) {
			if n != "" && slices.Contains(sh.Members, n) && !slices.Contains(c, n) {
				c = append(c, n)
			}
		}
		if len(sh.Members) > 0 {
			add(sh.Members[0])
		}
		add(current[sh.ID])
		for _, mem := range sh.Members {
			add(mem)
		}
		cands[i] = c
	}
	assign := make([]string, len(shards)) // by index in shards
	load := map[string][]int{}            // node → indexes of the shards it leads
	var try func(i int, limit int, seen map[string]bool) bool
	try = func(i, limit int, seen map[string]bool) bool {
		// A free candidate first: the preferred order wins where it can.
		for _, n := range cands[i] {
			if !seen[n] && len(load[n]) < limit {
				seen[n] = true
				assign[i], load[n] = n, append(load[n], i)
				return true
			}
		}
		for _, n := range cands[i] {
			if seen[n] {
				continue
			}
			seen[n] = true
			for k, j := range load[n] {
				if try(j, limit, seen) {
					load[n][k] = i
					assign[i] = n
					return true
				}
			}
		}
		return false
	}
	floor := len(shards) / len(nodes)
	ceil := (len(shards) + len(nodes) - 1) / len(nodes)
	for _, limit := range []int{floor, ceil} {
		for i := range shards {
			if assign[i] == "" && limit > 0 {
				try(i, limit, map[string]bool{})
			}
		}
	}
	for i, sh := range shards {
		if assign[i] == "" && len(cands[i]) > 0 {
			best := cands[i][0]
			for _, n := range cands[i] {
				if len(load[n]) < len(load[best]) {
					best = n
				}
			}
			assign[i], load[best] = best, append(load[best], i)
		}
		if assign[i] != "" {
			out[sh.ID] = assign[i]
		}
	}
	return out
}

// CheckPlacement reports what in m breaks the placement rules, one
// sentence each (none: it keeps them all): replicas shards with that many
// members each (0: not checked); no node holding two replicas of a shard;
// replica counts, preferred leader counts (each shard's first member) and
// shards' slot counts each differing by at most 1.
func CheckPlacement(m *ShardMap, replicas int) []string {
	var out []string
	reps, leads := map[string]int{}, map[string]int{}
	var nodes []string
	for _, sh := range m.Shards {
		if replicas > 0 && len(sh.Members) != replicas {
			out = append(out, fmt.Sprintf("shard %d has %d replicas, want %d", sh.ID, len(sh.Members), replicas))
		}
		for i, mem := range sh.Members {
			if slices.Contains(sh.Members[:i], mem) {
				out = append(out, fmt.Sprintf("shard %d has two replicas on node %s", sh.ID, mem))
			}
			if !slices.Contains(nodes, mem) {
				nodes = append(nodes, mem)
			}
			reps[mem]++
		}
		if len(sh.Members) > 0 {
			leads[sh.Members[0]]++
		}
	}
	spread := func(what string, count func(string) int) {
		if len(nodes) == 0 {
			return
		}
		lo, hi := nodes[0], nodes[0]
		for _, n := range nodes {
			if count(n) < count(lo) {
				lo = n
			}
			if count(n) > count(hi) {
				hi = n
			}
		}
		if count(hi)-count(lo) > 1 {
			out = append(out, fmt.Sprintf("%s: node %s has %d, node %s has %d", what, hi, count(hi), lo, count(lo)))
		}
	}
	spread("replicas per node differ by more than 1", func(n string) int { return reps[n] })
	spread("preferred leaders (first members) per node differ by more than 1", func(n string) int { return leads[n] })
	if len(m.Shards) > 0 {
		lo, hi := m.Shards[0], m.Shards[0]
		for _, sh := range m.Shards {
			if SlotCount(sh) < SlotCount(lo) {
				lo = sh
			}
			if SlotCount(sh) > SlotCount(hi) {
				hi = sh
			}
		}
		if SlotCount(hi)-SlotCount(lo) > 1 {
			out = append(out, fmt.Sprintf("slots per shard differ by more than 1: shard %d has %d, shard %d has %d",
				hi.ID, SlotCount(hi), lo.ID, SlotCount(lo)))
		}
	}
	return out
}

// SlotCount is the number of slots sh owns.
func SlotCount(sh Shard) int {
	n := 0
	for _, r := range sh.Ranges {
		n += r[1] - r[0] + 1
	}
	return n
}

// Directive is m as the shard-map directive (ParseShardMap's syntax), each
// member with its client address where the map has it: what every node of
// a new cluster is started with.
func (m *ShardMap) Directive() string {
	parts := make([]string, 0, len(m.Shards))
	for _, sh := range m.Shards {
		var b strings.Builder
		b.WriteString(strconv.FormatUint(uint64(sh.ID), 10) + ":")
		for i, r := range sh.Ranges {
			if i > 0 {
				b.WriteByte('+')
			}
			if r[0] == r[1] {
				b.WriteString(strconv.Itoa(r[0]))
			} else {
				fmt.Fprintf(&b, "%d-%d", r[0], r[1])
			}
		}
		b.WriteByte(':')
		m.writeMembers(&b, sh.Members)
		parts = append(parts, b.String())
	}
	return strings.Join(parts, " ")
}

// SlotMovePlan is one move of a rebalance: slots First..Last, all in
// shard From, to shard To (RAFT.SHARD MOVESLOTS First Last To).
type SlotMovePlan struct {
	First, Last int
	From, To    uint32
}

// PlanSlotMoves is the list of moves after which the shards' slot counts
// differ by at most 1. Their ranges are disjoint and each lies in its donor
// in m (a receiver never gives), so they may run one after another or at
// once. The shards that own
// the most slots now keep the extra slot of an uneven split (ties: the
// lower id), so nothing moves that need not. Each move takes the donor's
// highest slots, whole ranges first, so that a donor keeps its low slots
// contiguous and receivers get runs rather than scattered slots.
func PlanSlotMoves(m *ShardMap) []SlotMovePlan {
	n := len(m.Shards)
	if n == 0 {
		return nil
	}
	type acct struct {
		id     uint32
		ranges [][2]int
		have   int
		want   int
	}
	accts := make([]*acct, n)
	for i, sh := range m.Shards {
		accts[i] = &acct{id: sh.ID, ranges: slices.Clone(sh.Ranges), have: SlotCount(sh)}
	}
	byCount := slices.Clone(accts)
	slices.SortStableFunc(byCount, func(a, b *acct) int { return b.have - a.have })
	q, r := slot.Count/n, slot.Count%n
	for i, a := range byCount {
		a.want = q
		if i < r {
			a.want++
		}
	}
	var plan []SlotMovePlan
	for _, to := range accts {
		for to.have < to.want {
			var from *acct
			for _, a := range accts {
				if a.have > a.want {
					from = a
					break
				}
			}
			if from == nil {
				return plan // cannot happen: surpluses and deficits add up to 0
			}
			k := min(to.want-to.have, from.have-from.want)
			last := from.ranges[len(from.ranges)-1]
			first := max(last[0], last[1]-k+1)
			plan = append(plan, SlotMovePlan{First: first, Last: last[1], From: from.id, To: to.id})
			moved := last[1] - first + 1
			if first == last[0] {
				from.ranges = from.ranges[:len(from.ranges)-1]
			} else {
				from.ranges[len(from.ranges)-1][1] = first - 1
			}
			from.have -= moved
			to.have += moved
		}
	}
	return plan
}
