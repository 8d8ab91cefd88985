package cluster

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"raftset/internal/slot"
)

// ShardMap is the cluster map of docs/sharding.md: which shard owns each
// hash slot and which nodes hold a replica of each shard, at an epoch.
// The shard-map directive bootstraps it (epoch 1); the metadata group
// (metagroup.go) replicates it and hands every node each newer map, so a
// map is immutable once built and is looked up afresh for each command.
type ShardMap struct {
	Epoch  uint64
	Shards []Shard // by id
	// Addrs are the client addresses of nodes, by id, where the map gives
	// them: the only way a node learns those of nodes that share no shard
	// with it.
	Addrs map[string]string
	// Moves are the slot moves in progress (docs/sharding.md, Moving a
	// slot), sorted by First, their ranges disjoint (slotmoves.go); empty
	// when every slot is stable.
	Moves []SlotMove
	// Added are the members RAFT.SHARD ADDREPLICA gave a shard after it
	// was created, by shard id (replicas.go): their replica joins the
	// running group instead of bootstrapping it, which only the members
	// the shard was created with may do.
	Added map[uint32][]string
	// Nodes are the node records RAFT.SHARD ADDNODE wrote, by id: the
	// addresses of nodes that joined after the cluster was created, which
	// no process's peers name (looked up after peers: nodes.go).
	Nodes map[string]NodeRecord
	// Homes are the home shards of the nodes whose home is not the lowest
	// id the map gives them (homes.go), by node id.
	Homes map[string]uint32
	// Removed are the nodes RAFT.SHARD REMOVENODE took out of the cluster
	// (removenode.go), sorted: no longer nodes of it, whether their
	// process is in peers or was recorded.
	Removed []string
	// RemovedShards are the ids of the shards RAFT.SHARD REMOVESHARD took
	// out of the map (removeshard.go), sorted: a repeat of the removal
	// answers +OK rather than "no shard", and ADDSHARD never gives a new
	// shard an id whose old directory (dir/shards/<id>, kept) a member may
	// still have.
	RemovedShards []uint32
	// Meta are the voters of the metadata group once RAFT.SHARD ADDMETA or
	// REMOVEMETA changed them (metavoters.go), sorted; nil
	// before: the first shard's members of the map the cluster was
	// created with.
	Meta  []string
	owner [slot.Count]uint32
}

// NodeRecord is a node's addresses in the map: Client as other processes
// and clients reach it (advertise-addr), Raft as the other replicas of its
// shards dial it (raft-advertise-addr).
type NodeRecord struct {
	Client, Raft string
}

// joins says whether node's replica of shard id was added to a running
// group (it must not bootstrap one).
func (m *ShardMap) joins(id uint32, node string) bool {
	return slices.Contains(m.Added[id], node)
}

// MetaGroup is the Raft group id of the metadata group on the shared Raft
// port: the top of raftmux's group ids, so that it never collides with a
// shard (shard ids stay below it).
const MetaGroup uint32 = 1<<28 - 1

// Shard is one Raft group of the map.
type Shard struct {
	ID      uint32
	Ranges  [][2]int // first, last slot, inclusive, ascending
	Members []string // node ids (Raft server ids) of its voters
}

// ParseShardMap reads the shard-map directive: shards separated by spaces
// or semicolons, each "id:ranges:members", where ranges are first-last (or
// one slot) joined by "+", and members node ids joined by ",", each
// optionally with its client address after "@" (given once is enough); a
// shard with no slot has empty ranges ("3::n1,n2,n3"):
//
//	0:0-5460:n1,n2,n3 1:5461-10922:n1,n2,n3 2:10923-16383:n1,n2,n3
//	0:0-8191:a@10.0.0.1:6379,b@10.0.0.2:6379 1:8192-16383:c@10.0.0.3:6379,d@10.0.0.4:6379
//
// Every slot must belong to exactly one shard.
func ParseShardMap(s string) (*ShardMap, error) {
	m := &ShardMap{Epoch: 1, Addrs: map[string]string{}}
	var seen [slot.Count]bool
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ';' || r == '\t' }) {
		parts := strings.SplitN(f, ":", 3) // member addresses have colons
		if len(parts) != 3 {
			return nil, fmt.Errorf("shard %q: want id:ranges:members", f)
		}
		id, err := strconv.ParseUint(parts[0], 10, 32)
		if err != nil || id >= uint64(MetaGroup) {
			return nil, fmt.Errorf("shard %q: bad id %q", f, parts[0])
		}
		if slices.ContainsFunc(m.Shards, func(sh Shard) bool { return sh.ID == uint32(id) }) {
			return nil, fmt.Errorf("shard %d listed twice", id)
		}
		sh := Shard{ID: uint32(id)}
		var ranges []string
		if parts[1] != "" {
			// A shard may own no slot: one just added, before a
			// rebalance gives it some.
			ranges = strings.Split(parts[1], "+")
		}
		for _, r := range ranges {
			first, last, ok := strings.Cut(r, "-")
			if !ok {
				last = first
			}
			a, err1 := strconv.Atoi(first)
			b, err2 := strconv.Atoi(last)
			if err1 != nil || err2 != nil || a < 0 || b >= slot.Count || a > b {
				return nil, fmt.Errorf("shard %d: bad slot range %q (slots are 0-%d)", id, r, slot.Count-1)
			}
			for i := a; i <= b; i++ {
				if seen[i] {
					return nil, fmt.Errorf("shard %d: slot %d belongs to two shards", id, i)
				}
				seen[i] = true
				m.owner[i] = uint32(id)
			}
			sh.Ranges = append(sh.Ranges, [2]int{a, b})
		}
		slices.SortFunc(sh.Ranges, func(x, y [2]int) int { return x[0] - y[0] })
		for _, mem := range strings.Split(parts[2], ",") {
			mem, addr, hasAddr := strings.Cut(mem, "@")
			if mem == "" || slices.Contains(sh.Members, mem) {
				return nil, fmt.Errorf("shard %d: empty or repeated member in %q", id, parts[2])
			}
			if hasAddr {
				if _, _, err := net.SplitHostPort(addr); err != nil {
					return nil, fmt.Errorf("shard %d: member %s: client address %q: %w", id, mem, addr, err)
				}
				if old, ok := m.Addrs[mem]; ok && old != addr {
					return nil, fmt.Errorf("node %s has two client addresses, %s and %s", mem, old, addr)
				}
				m.Addrs[mem] = addr
			}
			sh.Members = append(sh.Members, mem)
		}
		m.Shards = append(m.Shards, sh)
	}
	if len(m.Shards) == 0 {
		return nil, fmt.Errorf("no shards")
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("slot %d belongs to no shard", i)
		}
	}
	slices.SortFunc(m.Shards, func(a, b Shard) int { return int(a.ID) - int(b.ID) })
	return m, nil
}

// ShardOf returns the shard that owns slot s.
func (m *ShardMap) ShardOf(s int) uint32 { return m.owner[s] }

// Shard returns shard id's entry.
func (m *ShardMap) Shard(id uint32) (Shard, bool) {
	i := slices.IndexFunc(m.Shards, func(sh Shard) bool { return sh.ID == id })
	if i < 0 {
		return Shard{}, false
	}
	return m.Shards[i], true
}

// member says whether node is a member of shard id.
func (m *ShardMap) member(id uint32, node string) bool {
	sh, ok := m.Shard(id)
	return ok && slices.Contains(sh.Members, node)
}

// Hosts lists the shards node id holds a replica of, by id.
func (m *ShardMap) Hosts(node string) []uint32 {
	var out []uint32
	for _, sh := range m.Shards {
		if slices.Contains(sh.Members, node) {
			out = append(out, sh.ID)
		}
	}
	return out
}

// ReplicaCounts is the number of replicas each node holds, by node id:
// every member of a shard, and every node record (0 for a node added with
// none), the nodes whose counts the replica plans even out.
func (m *ShardMap) ReplicaCounts() map[string]int {
	count := map[string]int{}
	for n := range m.Nodes {
		count[n] = 0
	}
	for _, sh := range m.Shards {
		for _, n := range sh.Members {
			count[n]++
		}
	}
	return count
}

// Encode writes the map as the metadata group stores it: the shard-map
// directive's syntax (every member with its address where known), then the
// epoch and the move in progress, one field a line.
func (m *ShardMap) Encode() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d\n", m.Epoch)
	for _, sh := range m.Shards {
		b.WriteString("shard " + strconv.FormatUint(uint64(sh.ID), 10) + ":")
		for i, r := range sh.Ranges {
			if i > 0 {
				b.WriteByte('+')
			}
			fmt.Fprintf(&b, "%d-%d", r[0], r[1])
		}
		b.WriteByte(':')
		m.writeMembers(&b, sh.Members)
		b.WriteByte('\n')
	}
	// Only a map with node records or added members has these lines, so
	// others encode as before. A release that does not know a line refuses
	// the map (DecodeShardMap): upgrade every process before ADDNODE.
	for _, id := range slices.Sorted(maps.Keys(m.Nodes)) {
		fmt.Fprintf(&b, "node %s %s %s\n", id, m.Nodes[id].Client, m.Nodes[id].Raft)
	}
	for _, sh := range m.Shards {
		if a := m.Added[sh.ID]; len(a) > 0 {
			fmt.Fprintf(&b, "added %d %s\n", sh.ID, strings.Join(a, ","))
		}
	}
	// Home and removed lines, as node lines: only maps that need them have
	// them, and a release that does not know them refuses such a map.
	for _, id := range slices.Sorted(maps.Keys(m.Homes)) {
		fmt.Fprintf(&b, "home %s %d\n", id, m.Homes[id])
	}
	for _, id := range m.Removed {
		fmt.Fprintf(&b, "removed %s\n", id)
	}
	for _, id := range m.RemovedShards {
		fmt.Fprintf(&b, "removed-shard %d\n", id)
	}
	if len(m.Meta) > 0 {
		// Only once the metadata voters changed, as the lines above.
		fmt.Fprintf(&b, "meta %s\n", strings.Join(m.Meta, ","))
	}
	writeMoves(&b, m.Moves)
	return b.String()
}

// writeMembers writes members joined by ",", each with "@" and its client
// address where the map has one: the members part of both the directive
// and the encoding.
func (m *ShardMap) writeMembers(b *strings.Builder, members []string) {
	for i, mem := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(mem)
		if a := m.Addrs[mem]; a != "" {
			b.WriteString("@" + a)
		}
	}
}

// DecodeShardMap reads what Encode wrote.
func DecodeShardMap(s string) (*ShardMap, error) {
	var shards []string
	var epoch uint64
	var moves []moveLine
	added := map[uint32][]string{}
	nodes := map[string]NodeRecord{}
	homes := map[string]uint32{}
	var removed []string
	var removedShards []uint32
	var meta []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "epoch":
			v, err := strconv.ParseUint(rest, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cluster map: bad epoch %q", rest)
			}
			epoch = v
		case "shard":
			shards = append(shards, rest)
		case "node":
			id, rec, err := parseNodeRecord(rest)
			if err != nil {
				return nil, fmt.Errorf("cluster map: bad node line %q: %w", line, err)
			}
			nodes[id] = rec
		case "home":
			id, shard, ok := strings.Cut(rest, " ")
			v, err := strconv.ParseUint(shard, 10, 32)
			if !ok || err != nil || CheckNodeID(id) != nil || v >= uint64(MetaGroup) {
				return nil, fmt.Errorf("cluster map: bad home line %q", line)
			}
			homes[id] = uint32(v)
		case "removed":
			if CheckNodeID(rest) != nil || slices.Contains(removed, rest) {
				return nil, fmt.Errorf("cluster map: bad removed line %q", line)
			}
			removed = append(removed, rest)
		case "removed-shard":
			v, err := strconv.ParseUint(rest, 10, 32)
			if err != nil || v >= uint64(MetaGroup) || slices.Contains(removedShards, uint32(v)) {
				return nil, fmt.Errorf("cluster map: bad removed-shard line %q", line)
			}
			removedShards = append(removedShards, uint32(v))
		case "meta":
			meta = strings.Split(rest, ",")
			for i, v := range meta {
				if CheckNodeID(v) != nil || slices.Contains(meta[:i], v) {
					return nil, fmt.Errorf("cluster map: bad meta line %q", line)
				}
			}
		case "added":
			id, nodes, ok := strings.Cut(rest, " ")
			v, err := strconv.ParseUint(id, 10, 32)
			if !ok || err != nil || nodes == "" {
				return nil, fmt.Errorf("cluster map: bad added line %q", line)
			}
			added[uint32(v)] = strings.Split(nodes, ",")
		case "move", "moving":
			mv, err := parseMoveLine(kind, rest)
			if err != nil {
				return nil, err
			}
			moves = append(moves, moveLine{kind, mv})
		default:
			return nil, fmt.Errorf("cluster map: unknown line %q", line)
		}
	}
	m, err := ParseShardMap(strings.Join(shards, " "))
	if err != nil {
		return nil, fmt.Errorf("cluster map: %w", err)
	}
	if epoch == 0 {
		return nil, errors.New("cluster map: no epoch")
	}
	m.Epoch = epoch
	if m.Moves, err = checkMoves(moves); err != nil {
		return nil, err
	}
	if len(added) > 0 {
		m.Added = added
	}
	if len(nodes) > 0 {
		m.Nodes = nodes
	}
	if len(homes) > 0 {
		m.Homes = homes
	}
	if len(removed) > 0 {
		slices.Sort(removed)
		m.Removed = removed
	}
	for _, id := range removedShards {
		if _, ok := m.Shard(id); ok {
			return nil, fmt.Errorf("cluster map: shard %d is both in the map and removed", id)
		}
	}
	if len(removedShards) > 0 {
		slices.Sort(removedShards)
		m.RemovedShards = removedShards
	}
	m.Meta = meta
	return m, nil
}

// parseNodeRecord reads "<id> <client-addr> <raft-addr>", a node line's
// fields (and RAFT.SHARD ADDNODE's arguments).
func parseNodeRecord(s string) (string, NodeRecord, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return "", NodeRecord{}, errors.New("want <id> <client-addr> <raft-addr>")
	}
	if err := checkNodeRecord(f[0], f[1], f[2]); err != nil {
		return "", NodeRecord{}, err
	}
	return f[0], NodeRecord{Client: f[1], Raft: f[2]}, nil
}

// checkNodeRecord checks a node id (the characters the map's syntax uses
// are refused) and its two host:port addresses.
func checkNodeRecord(id, client, raftAddr string) error {
	if err := CheckNodeID(id); err != nil {
		return err
	}
	for _, a := range [][2]string{{"client", client}, {"Raft", raftAddr}} {
		if _, port, err := net.SplitHostPort(a[1]); err != nil || port == "" {
			return fmt.Errorf("%s address %q is not host:port", a[0], a[1])
		}
	}
	return nil
}

// CheckNodeID refuses a node id the map's syntax cannot hold (its
// separators, and ID@HOST:PORT as add-node takes it): what RAFT.SHARD's
// commands refuse, and the cluster subcommands before they send them.
func CheckNodeID(id string) error {
	if id == "" || strings.ContainsAny(id, " \t;:,@=") {
		return fmt.Errorf("bad node id %q", id)
	}
	return nil
}

// withoutMember is the next epoch of m with node no longer a member of
// shard id (nor recorded as added to it), its home line kept true (gone
// with its home): what REMOVEREPLICA writes, and what forgetting a member
// the group lost writes.
func (m *ShardMap) withoutMember(id uint32, node string) *ShardMap {
	home, had := m.Home(node)
	next := m.clone()
	next.Epoch++
	for i := range next.Shards {
		if next.Shards[i].ID == id {
			next.Shards[i].Members = slices.DeleteFunc(next.Shards[i].Members, func(mem string) bool { return mem == node })
		}
	}
	if a := slices.DeleteFunc(next.Added[id], func(mem string) bool { return mem == node }); len(a) > 0 {
		next.Added[id] = a
	} else {
		delete(next.Added, id)
	}
	next.setHome(node, home, had)
	return next
}

// clone copies m (its shards' slices too) for a change.
func (m *ShardMap) clone() *ShardMap {
	c := *m
	c.Shards = make([]Shard, len(m.Shards))
	for i, sh := range m.Shards {
		c.Shards[i] = Shard{ID: sh.ID, Ranges: slices.Clone(sh.Ranges), Members: slices.Clone(sh.Members)}
	}
	c.Addrs = maps.Clone(m.Addrs)
	c.Nodes = maps.Clone(m.Nodes) // NodeRecord is a value
	c.Homes = maps.Clone(m.Homes)
	c.Removed = slices.Clone(m.Removed)
	c.RemovedShards = slices.Clone(m.RemovedShards)
	c.Meta = slices.Clone(m.Meta)
	if m.Added != nil {
		c.Added = make(map[uint32][]string, len(m.Added))
		for id, a := range m.Added {
			c.Added[id] = slices.Clone(a)
		}
	}
	c.Moves = slices.Clone(m.Moves) // SlotMove is a value
	return &c
}

// withOwner is a copy of m in which slots first..last belong to shard to,
// every shard's ranges rebuilt from the owners.
func (m *ShardMap) withOwner(first, last int, to uint32) *ShardMap {
	c := m.clone()
	for s := first; s <= last; s++ {
		c.owner[s] = to
	}
	for i := range c.Shards {
		c.Shards[i].Ranges = nil
	}
	for s := 0; s < slot.Count; {
		e := s
		for e+1 < slot.Count && c.owner[e+1] == c.owner[s] {
			e++
		}
		i := slices.IndexFunc(c.Shards, func(sh Shard) bool { return sh.ID == c.owner[s] })
		c.Shards[i].Ranges = append(c.Shards[i].Ranges, [2]int{s, e})
		s = e + 1
	}
	return c
}
