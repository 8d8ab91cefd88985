package cluster

// Keyless and administrative commands: the home shard runs them, or every
// shard when they change every shard's state; RAFT.SHARD and the
// metadata group's internal calls.

import (
	"context"
	"strconv"
	"strings"
	"time"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/stats"
	"raftset/internal/strictint"
)

// Admin answers CLUSTER for every shard, RAFT.SHARD on the shard it names,
// and passes the rest to the home shard.
func (h *Host) Admin(ctx context.Context, args [][]byte) []byte {
	if len(args) >= 2 && strings.EqualFold(string(args[0]), "cluster") {
		return h.clusterCmd(ctx, args)
	}
	if len(args) >= 2 && strings.EqualFold(string(args[0]), "raft.shard") {
		switch strings.ToLower(string(args[1])) {
		case "moveslots":
			return h.moveSlotsCmd(ctx, args)
		case "abort":
			return h.abortCmd(ctx, args)
		case "addshard":
			req, bad := addShardArgs(args[2:])
			if bad != nil {
				return bad
			}
			return h.addShard(ctx, req, false)
		case "addreplica", "removereplica":
			return h.replicaCmd(ctx, args)
		case "addnode":
			return h.addNodeCmd(ctx, args)
		case "removenode":
			return h.removeNodeCmd(ctx, args)
		case "addmeta", "removemeta":
			return h.metaCmd(ctx, args)
		case "removeshard":
			return h.removeShardCmd(ctx, args)
		case "balance-leaders":
			dry := len(args) == 3 && strings.EqualFold(string(args[2]), "dry-run")
			if len(args) > 3 || len(args) == 3 && !dry {
				return command.Error("ERR BALANCE-LEADERS takes no argument but DRY-RUN")
			}
			return h.balanceLeaders(ctx, dry, false)
		case "map":
			if len(args) != 2 {
				return command.Error(command.ErrArity("raft.shard|map"))
			}
			return command.AppendBulkString(nil, h.Map().Encode())
		}
	}
	if len(args) == 2 && strings.EqualFold(string(args[0]), "raft.shard") {
		return command.Error(command.ErrArity("raft.shard"))
	}
	if len(args) >= 3 && strings.EqualFold(string(args[0]), "raft.shard") {
		id, err := strconv.ParseUint(string(args[1]), 10, 32)
		if err != nil {
			return command.Error("ERR shard id is not an integer")
		}
		n, ok := h.held.Load().nodes[uint32(id)]
		if !ok || strings.EqualFold(string(args[2]), "raft.shard") {
			return command.Error("ERR this node holds no replica of shard " + string(args[1]))
		}
		return n.Admin(ctx, args[2:])
	}
	home := h.Home()
	if home == nil {
		return replyNoReplica
	}
	if everyShardAdmin(args) {
		// SAVE (and SHUTDOWN SAVE through it) snapshots every shard held
		// here, and CONFIG SET changes every shard's parameters (the
		// replicated ones through each shard's log), so that the shards
		// encode and snapshot alike; the first error wins.
		var reply []byte
		for _, id := range h.held.Load().ids {
			r := h.held.Load().nodes[id].Admin(ctx, args)
			if reply == nil || (command.IsError(r) && !command.IsError(reply)) {
				reply = r
			}
		}
		return reply
	}
	return home.Admin(ctx, args)
}

func everyShardAdmin(args [][]byte) bool {
	switch {
	case len(args) >= 1 && (strings.EqualFold(string(args[0]), "save") || strings.EqualFold(string(args[0]), "bgsave")):
		return true
	case len(args) >= 2 && strings.EqualFold(string(args[0]), "config") && strings.EqualFold(string(args[1]), "set"):
		return true
	}
	return false
}

// Internal runs another node's internal command on the shard it names
// (raftset.shard id ...; unwrapped calls are shard 0's, which sends them as
// a single-group node does).
func (h *Host) Internal(ctx context.Context, args [][]byte) []byte {
	id := uint32(0)
	if len(args) >= 3 && strings.EqualFold(string(args[0]), cmdShard) {
		v, err := strconv.ParseUint(string(args[1]), 10, 32)
		if err != nil {
			return command.Error("ERR shard id is not an integer")
		}
		id, args = uint32(v), args[2:]
	}
	if id == MetaGroup {
		return h.metaInternal(ctx, args)
	}
	n, ok := h.held.Load().nodes[id]
	if !ok {
		return command.Error("TRYAGAIN this node holds no replica of shard " + strconv.FormatUint(uint64(id), 10))
	}
	return n.Internal(ctx, args)
}

// Info is the home shard's, with the keyspace of every shard held here
// (as DBSIZE counts it; avg_ttl is the home shard's).
func (h *Host) Info() []InfoSection {
	home := h.Home()
	if home == nil {
		return []InfoSection{{Name: "Keyspace"}} // no key here
	}
	secs := home.Info()
	var keys, expires int
	for _, id := range h.held.Load().ids {
		k, e := h.held.Load().nodes[id].fsm.KeyspaceCounts()
		keys, expires = keys+k, expires+e
	}
	for i, sec := range secs {
		if sec.Name != "Keyspace" {
			continue
		}
		avg := "0"
		if len(sec.Fields) == 1 {
			if _, a, ok := strings.Cut(sec.Fields[0][1], ",avg_ttl="); ok {
				avg = a
			}
		}
		secs[i].Fields = nil
		if keys > 0 {
			secs[i].Fields = [][2]string{{"db0", "keys=" + strconv.Itoa(keys) + ",expires=" + strconv.Itoa(expires) + ",avg_ttl=" + avg}}
		}
	}
	return append(secs, h.leaderBalanceInfo())
}

// ClusterTime is the home shard's cluster clock; this host's wall clock
// while it holds no replica (no write is stamped here then).
func (h *Host) ClusterTime() time.Time {
	if home := h.Home(); home != nil {
		return home.ClusterTime()
	}
	return time.Now()
}

// Users are the home shard's: ACL changes are keyless writes, replicated
// through its log. On a process started with no replica, they are those
// of the state machine its first replica will take (firstFSM): the
// default user only until that replica applies its shard's log.
func (h *Host) Users() *acl.Registry {
	if home := h.Home(); home != nil {
		return home.Users()
	}
	return h.firstUsers.Load()
}

// SetPublish hands the front end's PUBLISH to the home shard's
// +switch-master notices (to the first replica's, on a process started
// with none, once it starts).
func (h *Host) SetPublish(publish func(channel string, message []byte) int) {
	h.publish.Store(&publish)
	if home := h.Home(); home != nil {
		home.SetPublish(publish)
	}
}

// RaftRefused counts connections the shared Raft port refused.
func (h *Host) RaftRefused() uint64 { return h.port.Refused() }

// moveSlotsCmd is RAFT.SHARD MOVESLOTS <first> <last> <to-shard>.
func (h *Host) moveSlotsCmd(ctx context.Context, args [][]byte) []byte {
	if len(args) != 5 {
		return command.Error(command.ErrArity("raft.shard|moveslots"))
	}
	return h.moveSlotsArgs(ctx, args[2:5], false)
}

// moveSlotsArgs parses <first> <last> <to-shard>; relayed: sent by a
// metadata voter, so never relayed again.
func (h *Host) moveSlotsArgs(ctx context.Context, args [][]byte, relayed bool) []byte {
	first, last, ok := parseSlotRange(args[0], args[1])
	to, err := strconv.ParseUint(string(args[2]), 10, 32)
	if !ok || err != nil {
		return command.Error("ERR MOVESLOTS wants <first> <last> <to-shard>, slots 0-16383, first <= last")
	}
	return h.moveSlots(ctx, first, last, uint32(to), relayed)
}

// parseSlotRange reads a command's <first> <last> slot range: integers as
// Redis reads them (strictint: "+5", " 5" and "05" are not), slots
// 0-16383, first <= last. MOVESLOTS and ABORT both read theirs with it,
// so that a range one takes the other takes too.
func parseSlotRange(first, last []byte) (int, int, bool) {
	f, ok1 := strictint.Parse(first)
	l, ok2 := strictint.Parse(last)
	if !ok1 || !ok2 || f < 0 || l >= slot.Count || f > l {
		return 0, 0, false
	}
	return int(f), int(l), true
}

// metaInternal runs another process's call for the metadata group.
func (h *Host) metaInternal(ctx context.Context, args [][]byte) []byte {
	switch strings.ToLower(string(args[0])) {
	case cmdMetaMap:
		return h.serveMetaMap(ctx)
	case cmdMetaProbe:
		return h.serveMetaProbe(ctx, args)
	case cmdMoveSlots:
		if len(args) != 4 && len(args) != 5 {
			return command.Error(command.ErrArity(cmdMoveSlots))
		}
		return h.moveSlotsArgs(ctx, args[1:4], len(args) == 5)
	case cmdAbortMove:
		return h.abortInternal(ctx, args)
	case cmdAddShard, cmdAddShardID:
		return h.addShardInternal(ctx, args)
	case cmdAddReplica, cmdRemoveReplica:
		if len(args) != 3 && len(args) != 4 {
			return command.Error(command.ErrArity(string(args[0])))
		}
		return h.replicaArgs(ctx, strings.EqualFold(string(args[0]), cmdAddReplica), args[1], args[2], len(args) == 4)
	case cmdAddNode:
		a, relayed, bad := addNodeArgs(args)
		if bad != nil {
			return bad
		}
		return h.addNode(ctx, a, relayed)
	case cmdRemoveNode:
		id, dry, relayed, bad := removeNodeArgs(args)
		if bad != nil {
			return bad
		}
		return h.removeNode(ctx, id, dry, relayed)
	case cmdAddMeta, cmdRemoveMeta:
		node, relayed, bad := metaArgsInternal(args)
		if bad != nil {
			return bad
		}
		return h.metaArgs(ctx, strings.EqualFold(string(args[0]), cmdAddMeta), node, relayed)
	case cmdRemoveShard:
		shard, mode, relayed, bad := removeShardArgs(args)
		if bad != nil {
			return bad
		}
		return h.removeShard(ctx, shard, mode, relayed)
	case cmdHome:
		if home := h.Home(); home != nil {
			return command.AppendInt(nil, int64(home.cfg.Shard))
		}
		return command.AppendInt(nil, -1)
	case cmdBalanceLeaders:
		if len(args) != 2 && len(args) != 3 {
			return command.Error(command.ErrArity(cmdBalanceLeaders))
		}
		return h.balanceLeaders(ctx, strings.EqualFold(string(args[1]), "dry-run"), len(args) == 3)
	}
	meta := h.MetaNode()
	if meta == nil {
		return command.Error("TRYAGAIN this node is not a member of the metadata group")
	}
	return meta.Internal(ctx, args)
}

// Ready reports whether the process should take traffic (/readyz): every
// shard it holds a replica of is ready (Node.Ready), else the first that
// is not, by id, and why. A process is as ready as its least ready
// replica: a shard whose replicas here has no leader or is catching up
// would answer its keys with errors or stale data, whatever the home
// shard says.
func (h *Host) Ready() (bool, string) {
	held := h.held.Load()
	if len(held.ids) == 0 {
		return false, "this node holds no replica yet"
	}
	for _, id := range held.ids {
		if ok, why := held.nodes[id].Ready(); !ok {
			return false, "shard " + strconv.FormatUint(uint64(id), 10) + ": " + why
		}
	}
	return true, "ok"
}

// ShardStats are the metrics of every replica the process holds, by
// ascending shard id (metrics.Node): read from the replicas held at the
// scrape, so that a replica the map adds gets its series at once and one
// it removes leaves none behind. None while it holds no replica yet.
func (h *Host) ShardStats() []stats.Node {
	held := h.held.Load()
	out := make([]stats.Node, 0, len(held.ids))
	for _, id := range held.ids {
		if n := held.nodes[id]; n != nil {
			out = append(out, n.NodeStats())
		}
	}
	return out
}

// ProcessStats are the process's memory figures (metrics.Node).
func (h *Host) ProcessStats() stats.Process { return processStats() }

// MetaStats is the metadata group as this process sees it (metrics.Node):
// the epoch of the map it routes by, which every process has, and its
// replica's Raft state on a process that runs one (the members of the
// bootstrap map's first shard, or the voters the map names once ADDMETA or
// REMOVEMETA changed them: metavoters.go), read at each call.
func (h *Host) MetaStats() (stats.Meta, bool) {
	m := stats.Meta{Epoch: h.Map().Epoch, BalanceTransfers: h.bal.transfers.Load(), BalanceFailures: h.bal.failures.Load()}
	if meta := h.MetaNode(); meta != nil {
		st := meta.NodeStats()
		m.Replica, m.Voter = &st, meta.isVoter()
	}
	return m, true
}
