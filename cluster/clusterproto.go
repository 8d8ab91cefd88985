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
// epoch is the Raft term: it grows whenever mastership may change, which
// is what clients compare it for.
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

// clusterCmd answers CLUSTER MYID, INFO, SLOTS, SHARDS, NODES,
// COUNTKEYSINSLOT and GETKEYSINSLOT (args[0] is "cluster"; the front end
// checked the arity).
func (n *Node) clusterCmd(_ context.Context, args [][]byte) []byte {
	switch strings.ToLower(string(args[1])) {
	case "myid":
		return command.AppendBulkString(nil, ClusterNodeID(n.cfg.NodeID))
	case "info":
		return n.clusterInfo()
	case "slots":
		return n.clusterSlots()
	case "shards":
		return n.clusterShards()
	case "nodes":
		return n.clusterNodes()
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
	case "getkeysinslot":
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
	return command.Error(command.ErrUnknownCommand(string(args[0]), args[1:]))
}

// clusterInfo has the fields of Redis 7.0's CLUSTER INFO, in its order.
// There is no gossip, so the message counters stay 0.
func (n *Node) clusterInfo() []byte {
	members, hasMaster := n.clusterView(false)
	state, ok, fail := "fail", "0", strconv.Itoa(slot.Count)
	if hasMaster {
		state, ok, fail = "ok", strconv.Itoa(slot.Count), "0"
	}
	term := strconv.FormatUint(n.raft.CurrentTerm(), 10)
	var b strings.Builder
	for _, f := range [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", strconv.Itoa(slot.Count)},
		{"cluster_slots_ok", ok},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", fail},
		{"cluster_known_nodes", strconv.Itoa(len(members))},
		{"cluster_size", "1"},
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

// clusterSlots is CLUSTER SLOTS: one range, 0-16383, master first, each
// node as [ip, port, id, metadata]. Without a master no slot is served,
// and the reply is empty, as Redis leaves out slots whose owner failed.
func (n *Node) clusterSlots() []byte {
	members, hasMaster := n.clusterView(false)
	if !hasMaster {
		return command.AppendArray(nil, 0)
	}
	out := command.AppendArray(nil, 1)
	out = command.AppendArray(out, 2+len(members))
	out = command.AppendInt(out, 0)
	out = command.AppendInt(out, slot.Count-1)
	for _, m := range members {
		out = command.AppendArray(out, 4)
		out = command.AppendBulkString(out, m.host)
		out = command.AppendInt(out, atoi(m.port))
		out = command.AppendBulkString(out, m.id)
		out = command.AppendArray(out, 0)
	}
	return out
}

// clusterShards is CLUSTER SHARDS: the one shard, with Redis 7.0's node
// fields. replication-offset is this node's applied index for itself; the
// others' are not known here (Raft keeps followers' progress private), so
// they are 0.
func (n *Node) clusterShards() []byte {
	members, hasMaster := n.clusterView(true)
	out := command.AppendArray(nil, 1)
	out = command.AppendArray(out, 4)
	out = command.AppendBulkString(out, "slots")
	if hasMaster {
		out = command.AppendArray(out, 2)
		out = command.AppendInt(out, 0)
		out = command.AppendInt(out, slot.Count-1)
	} else {
		out = command.AppendArray(out, 0)
	}
	out = command.AppendBulkString(out, "nodes")
	out = command.AppendArray(out, len(members))
	for _, m := range members {
		role, health, offset := "replica", "online", int64(0)
		if m.master {
			role = "master"
		}
		if m.down {
			health = "failed"
		}
		if m.self {
			offset = int64(n.fsm.AppliedIndex())
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
	return out
}

// clusterNodes is CLUSTER NODES: one line per voter,
// "<id> <ip:port@bus> <flags> <master> <ping-sent> <pong-recv> <epoch>
// <link-state> [<slots>]".
func (n *Node) clusterNodes() []byte {
	members, hasMaster := n.clusterView(true)
	masterID := "-"
	if hasMaster {
		masterID = members[0].id
	}
	epoch := strconv.FormatUint(n.raft.CurrentTerm(), 10)
	var b strings.Builder
	for _, m := range members {
		var flags []string
		if m.self {
			flags = append(flags, "myself")
		}
		if m.master {
			flags = append(flags, "master")
		} else {
			flags = append(flags, "slave")
		}
		if m.down {
			flags = append(flags, "fail")
		}
		link, of := "connected", masterID
		if m.down {
			link = "disconnected"
		}
		if m.master {
			of = "-"
		}
		b.WriteString(m.id + " " + net.JoinHostPort(m.host, m.port) + "@" + m.busPort + " " +
			strings.Join(flags, ",") + " " + of + " 0 0 " + epoch + " " + link)
		if m.master {
			b.WriteString(" 0-" + strconv.Itoa(slot.Count-1))
		}
		b.WriteByte('\n')
	}
	return command.AppendBulkString(nil, b.String())
}

// slotKeys is what CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT need of the
// state machine: *fsm.FSM has it, the node's test fakes need not.
type slotKeys interface {
	KeysWhere(match func(key []byte) bool, limit int) (count int, keys [][]byte)
}

const errNoSlotKeys = "ERR this state machine cannot list keys by slot"

// keysInSlot counts the keys of hash slot s and returns up to limit of them.
func (n *Node) keysInSlot(s, limit int) (count int, keys [][]byte, ok bool) {
	sk, ok := n.fsm.(slotKeys)
	if !ok {
		return 0, nil, false
	}
	count, keys = sk.KeysWhere(func(k []byte) bool { return slot.Of(k) == s }, limit)
	return count, keys, true
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}
