package cluster

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/strictint"
)

// The Redis Cluster protocol over today's single Raft group
// (docs/sharding.md): the group is one shard that owns all 16384 slots, its
// Raft leader is the shard's master and its other voters are its replicas,
// each reported at the client address it published through the log
// (meta.go). Non-voters are still catching up: they are left out, as Redis
// leaves out a replica that is still syncing.
//
// Redis's node ids are 40 hex characters that clients treat as opaque
// names; ours are the SHA-1 of the Raft server id, so that every node names
// every other the same way without storing anything new. The configuration
// epoch is the Raft term, plus the cluster map's epoch on a Host: it grows
// whenever mastership or slot ownership may change, which is what clients
// compare it for.
//
// The front end answers CLUSTER KEYSLOT and refuses every subcommand while
// cluster mode is off (resp/cluster.go); it passes the others here.

// ClusterNodeID is the Redis Cluster node id of the Raft server id.
func ClusterNodeID(raftID string) string {
	sum := sha1.Sum([]byte(raftID))
	return hex.EncodeToString(sum[:])
}

// clusterMember is one voter as CLUSTER SLOTS, SHARDS and NODES show it.
type clusterMember struct {
	id         string // ClusterNodeID
	host, port string // client address
	busPort    string // the Raft port, shown as Redis's cluster bus port
	master     bool
	self       bool
	down       bool // the client port did not answer a dial (sentinel.go's probe)
}

// clusterView is the shard's membership: the master first (when there is
// one), then the replicas in Raft id order so every node lists them alike.
func (n *Node) clusterView(probe bool) (members []clusterMember, hasMaster bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	_, leader := n.Leader()
	servers := slices.Clone(f.Configuration().Servers)
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	var addrs []string
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		host, port := n.clientHostPort(s)
		_, bus := splitAddr(string(s.Address))
		m := clusterMember{id: ClusterNodeID(string(s.ID)), host: host, port: port, busPort: bus,
			master: string(s.ID) == leader, self: string(s.ID) == n.cfg.NodeID}
		if m.master {
			hasMaster = true
			members = slices.Insert(members, 0, m)
		} else {
			members = append(members, m)
		}
		if !m.self {
			addrs = append(addrs, net.JoinHostPort(host, port))
		}
	}
	if probe && len(addrs) > 0 {
		down := n.downAddrs(addrs)
		for i := range members {
			members[i].down = !members[i].self && down[net.JoinHostPort(members[i].host, members[i].port)]
		}
	}
	return members, hasMaster
}

// RouteSlot says where a command on hash slot s must go in cluster mode: to
// this node (here) or, as -MOVED, to addr, the client address of the
// shard's leader. While the leader or its address is unknown the command
// stays here, and the write path answers as it does today (forwarding, or
// its TRYAGAIN/CLUSTERDOWN errors). With one shard every slot is this
// group's, so s only matters once there are several.
func (n *Node) RouteSlot(s int) (addr string, here bool) {
	if n.raft.State() == raft.Leader {
		return "", true
	}
	_, addr = n.leaderClient()
	return addr, addr == ""
}

// shardView is one shard as the CLUSTER replies show it.
type shardView struct {
	ranges    [][2]int
	members   []clusterMember // master first (clusterView)
	hasMaster bool
	term      uint64
	applied   uint64 // this process's applied index in the shard
}

// view is the node's single shard, owning every slot.
func (n *Node) view(probe bool) []shardView {
	members, hasMaster := n.clusterView(probe)
	return []shardView{{ranges: [][2]int{{0, slot.Count - 1}}, members: members, hasMaster: hasMaster,
		term: n.raft.CurrentTerm(), applied: n.fsm.AppliedIndex()}}
}

// clusterCmd answers CLUSTER MYID, INFO, SLOTS, SHARDS, NODES,
// COUNTKEYSINSLOT and GETKEYSINSLOT (args[0] is "cluster"; the front end
// checked the arity).
func (n *Node) clusterCmd(_ context.Context, args [][]byte) []byte {
	switch strings.ToLower(string(args[1])) {
	case "myid":
		return command.AppendBulkString(nil, ClusterNodeID(n.cfg.NodeID))
	case "info":
		return clusterInfo(n.view(false), 0)
	case "slots":
		return clusterSlots(n.view(false))
	case "shards":
		return clusterShards(n.view(true))
	case "nodes":
		return clusterNodes(n.view(true), 0)
	case "countkeysinslot", "getkeysinslot":
		return n.slotKeysCmd(args)
	}
	return command.Error(command.ErrUnknownCommand(string(args[0]), args[1:]))
}

// slotKeysCmd answers COUNTKEYSINSLOT and GETKEYSINSLOT from this replica.
func (n *Node) slotKeysCmd(args [][]byte) []byte {
	switch strings.ToLower(string(args[1])) {
	case "countkeysinslot":
		s, ok := strictint.Parse(args[2])
		if !ok {
			return command.Error(command.ErrNotInteger)
		}
		if s < 0 || s >= slot.Count {
			return command.Error("ERR Invalid slot")
		}
		count, _, ok := n.keysInSlot(int(s), 0)
		if !ok {
			return command.Error(errNoSlotKeys)
		}
		return command.AppendInt(nil, int64(count))
	default: // getkeysinslot
		s, ok1 := strictint.Parse(args[2])
		max, ok2 := strictint.Parse(args[3])
		if !ok1 || !ok2 {
			return command.Error(command.ErrNotInteger)
		}
		if s < 0 || s >= slot.Count || max < 0 {
			return command.Error("ERR Invalid slot or number of keys")
		}
		_, keys, ok := n.keysInSlot(int(s), int(min(max, 1<<31)))
		if !ok {
			return command.Error(errNoSlotKeys)
		}
		out := command.AppendArray(nil, len(keys))
		for _, k := range keys {
			out = command.AppendBulk(out, k)
		}
		return out
	}
}

// processes merges the shards' members into one entry per process: a
// Redis Cluster node id has one role, so a process is a master when it
// leads any shard (of all their slots), else a replica of the master of
// the first shard it holds that has one (docs/sharding.md, "One node id
// per process").
type process struct {
	clusterMember
	slots  [][2]int
	master string // id of the master it replicates; "-" for none or a master
}

func processes(views []shardView) []process {
	var out []process
	at := map[string]int{}
	for _, v := range views {
		for _, m := range v.members {
			i, ok := at[m.id]
			if !ok {
				i = len(out)
				at[m.id] = i
				mm := m
				mm.master = false
				out = append(out, process{clusterMember: mm, master: "-"})
			}
			p := &out[i]
			p.down = p.down || m.down
			if m.master {
				p.clusterMember.master = true
				p.slots = append(p.slots, v.ranges...)
			}
		}
	}
	for _, v := range views {
		if !v.hasMaster {
			continue
		}
		for _, m := range v.members[1:] {
			if p := &out[at[m.id]]; !p.clusterMember.master && p.master == "-" {
				p.master = v.members[0].id
			}
		}
	}
	for i := range out {
		out[i].slots = mergeRanges(out[i].slots)
	}
	return out
}

// mergeRanges sorts slot ranges and joins adjacent ones, as Redis prints a
// node's slots (two shards led by one process, 0-99 and 100-199, are
// "0-199").
func mergeRanges(rs [][2]int) [][2]int {
	slices.SortFunc(rs, func(a, b [2]int) int { return a[0] - b[0] })
	var out [][2]int
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1][1]+1 == r[0] {
			out[n-1][1] = r[1]
			continue
		}
		out = append(out, r)
	}
	return out
}

func maxTerm(views []shardView) uint64 {
	var t uint64
	for _, v := range views {
		t = max(t, v.term)
	}
	return t
}

// clusterInfo has the fields of Redis 7.0's CLUSTER INFO, in its order.
// There is no gossip, so the message counters stay 0.
func clusterInfo(views []shardView, mapEpoch uint64) []byte {
	served, assigned := 0, 0
	for _, v := range views {
		for _, r := range v.ranges {
			assigned += r[1] - r[0] + 1
			if v.hasMaster {
				served += r[1] - r[0] + 1
			}
		}
	}
	procs := processes(views)
	masters := 0
	for _, p := range procs {
		if p.clusterMember.master && len(p.slots) > 0 {
			masters++ // Redis's cluster_size: masters serving a slot
		}
	}
	state := "fail"
	if served == slot.Count {
		state = "ok"
	}
	term := strconv.FormatUint(mapEpoch+maxTerm(views), 10)
	var b strings.Builder
	for _, f := range [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", strconv.Itoa(assigned)},
		{"cluster_slots_ok", strconv.Itoa(served)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", strconv.Itoa(assigned - served)},
		{"cluster_known_nodes", strconv.Itoa(len(procs))},
		{"cluster_size", strconv.Itoa(max(masters, 1))},
		{"cluster_current_epoch", term},
		{"cluster_my_epoch", term},
		{"cluster_stats_messages_sent", "0"},
		{"cluster_stats_messages_received", "0"},
		{"total_cluster_links_buffer_limit_exceeded", "0"},
	} {
		b.WriteString(f[0] + ":" + f[1] + "\r\n")
	}
	return command.AppendBulkString(nil, b.String())
}

// clusterSlots is CLUSTER SLOTS: one entry per slot range whose shard has a
// master, master first, each node as [ip, port, id, metadata]. Slots whose
// shard has no master are left out, as Redis leaves out slots whose owner
// failed.
func clusterSlots(views []shardView) []byte {
	type entry struct {
		r [2]int
		v *shardView
	}
	var entries []entry
	for i := range views {
		if views[i].hasMaster {
			for _, r := range views[i].ranges {
				entries = append(entries, entry{r, &views[i]})
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.r[0] - b.r[0] })
	out := command.AppendArray(nil, len(entries))
	for _, e := range entries {
		out = command.AppendArray(out, 2+len(e.v.members))
		out = command.AppendInt(out, int64(e.r[0]))
		out = command.AppendInt(out, int64(e.r[1]))
		for _, m := range e.v.members {
			out = command.AppendArray(out, 4)
			out = command.AppendBulkString(out, m.host)
			out = command.AppendInt(out, atoi(m.port))
			out = command.AppendBulkString(out, m.id)
			out = command.AppendArray(out, 0)
		}
	}
	return out
}

// clusterShards is CLUSTER SHARDS: one entry per shard, with Redis 7.0's
// node fields and each process's role in that shard. replication-offset is
// this process's applied index for itself; the others' are not known here
// (Raft keeps followers' progress private), so they are 0.
func clusterShards(views []shardView) []byte {
	out := command.AppendArray(nil, len(views))
	for _, v := range views {
		out = command.AppendArray(out, 4)
		out = command.AppendBulkString(out, "slots")
		if v.hasMaster {
			out = command.AppendArray(out, 2*len(v.ranges))
			for _, r := range v.ranges {
				out = command.AppendInt(out, int64(r[0]))
				out = command.AppendInt(out, int64(r[1]))
			}
		} else {
			out = command.AppendArray(out, 0)
		}
		out = command.AppendBulkString(out, "nodes")
		out = command.AppendArray(out, len(v.members))
		for _, m := range v.members {
			role, health, offset := "replica", "online", int64(0)
			if m.master {
				role = "master"
			}
			if m.down {
				health = "failed"
			}
			if m.self {
				offset = int64(v.applied)
			}
			out = command.AppendArray(out, 14)
			for _, kv := range [][2]string{{"id", m.id}, {"port", ""}, {"ip", m.host}, {"endpoint", m.host},
				{"role", role}, {"replication-offset", ""}, {"health", health}} {
				out = command.AppendBulkString(out, kv[0])
				switch kv[0] {
				case "port":
					out = command.AppendInt(out, atoi(m.port))
				case "replication-offset":
					out = command.AppendInt(out, offset)
				default:
					out = command.AppendBulkString(out, kv[1])
				}
			}
		}
	}
	return out
}

// clusterNodes is CLUSTER NODES: one line per process,
// "<id> <ip:port@bus> <flags> <master> <ping-sent> <pong-recv> <epoch>
// <link-state> [<slots>]".
func clusterNodes(views []shardView, mapEpoch uint64) []byte {
	epoch := strconv.FormatUint(mapEpoch+maxTerm(views), 10)
	var b strings.Builder
	for _, p := range processes(views) {
		var flags []string
		if p.self {
			flags = append(flags, "myself")
		}
		if p.clusterMember.master {
			flags = append(flags, "master")
		} else {
			flags = append(flags, "slave")
		}
		if p.down {
			flags = append(flags, "fail")
		}
		link := "connected"
		if p.down {
			link = "disconnected"
		}
		b.WriteString(p.id + " " + net.JoinHostPort(p.host, p.port) + "@" + p.busPort + " " +
			strings.Join(flags, ",") + " " + p.master + " 0 0 " + epoch + " " + link)
		for _, r := range p.slots {
			if r[0] == r[1] {
				b.WriteString(" " + strconv.Itoa(r[0]))
			} else {
				b.WriteString(" " + strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1]))
			}
		}
		b.WriteByte('\n')
	}
	return command.AppendBulkString(nil, b.String())
}

// slotKeys is what CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT need of the
// state machine, from its per-slot index: *fsm.FSM has it, the node's test
// fakes need not.
type slotKeys interface {
	CountKeysInSlot(s int) int
	GetKeysInSlot(s, count int) [][]byte
}

const errNoSlotKeys = "ERR this state machine cannot list keys by slot"

// keysInSlot counts the keys of hash slot s (O(1)) and returns up to limit
// of them (O(limit)).
func (n *Node) keysInSlot(s, limit int) (count int, keys [][]byte, ok bool) {
	sk, ok := n.fsm.(slotKeys)
	if !ok {
		return 0, nil, false
	}
	if limit > 0 {
		keys = sk.GetKeysInSlot(s, limit)
	}
	return sk.CountKeysInSlot(s), keys, true
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}
