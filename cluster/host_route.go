package cluster

// Routing: each command goes to the replica of its slot's shard held here,
// or gets -MOVED to that shard's leader elsewhere.

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"raftset/internal/command"
	"raftset/internal/slot"
)

// commandSlot is the slot of the first key of a command, or -1 without
// keys. In cluster mode the front end has checked that all its keys (all a
// transaction's) share it.
func commandSlot(args [][]byte) int {
	if len(args) == 0 {
		return -1
	}
	spec := commandSpecs().Lookup(args[0])
	if spec == nil {
		return -1
	}
	pos, _, ok := spec.FindKeys(args)
	if !ok || len(pos) == 0 {
		return -1
	}
	return slot.Of(args[pos[0]])
}

func opSlot(op command.Op) int {
	switch op.Kind {
	case command.OpCommand:
		return commandSlot(op.Args)
	case command.OpTx:
		if op.Tx == nil {
			return -1
		}
		for _, in := range op.Tx.Ops {
			if s := opSlot(in); s >= 0 {
				return s
			}
		}
		for _, w := range op.Tx.Watches {
			return slot.Of(w.Key)
		}
	}
	return -1
}

// splitTx reports a transaction whose watched keys are in another shard
// than its commands: the stamps WATCH took come from another state
// machine than the one EXEC would check them in. Redis allows it when
// both slots are on one node; here it is refused as CROSSSLOT.
// s is the transaction's slot (opSlot), m the map it is routed by.
func splitTx(m *ShardMap, op command.Op, s int) bool {
	if op.Kind != command.OpTx || op.Tx == nil || len(op.Tx.Watches) == 0 {
		return false
	}
	for _, w := range op.Tx.Watches {
		if m.ShardOf(slot.Of(w.Key)) != m.ShardOf(s) {
			return true
		}
	}
	return false
}

// target is the node that runs a command on slot s (the home shard's for
// -1), or the -MOVED reply when no replica of its shard is here.
func (h *Host) target(s int) (*Node, []byte) {
	if s < 0 {
		if home := h.Home(); home != nil {
			return home, nil
		}
		return nil, replyNoReplica
	}
	m := h.Map()
	if m.Epoch == 0 {
		return nil, replyMapUnknown
	}
	id := m.ShardOf(s)
	if n, ok := h.held.Load().nodes[id]; ok {
		return n, nil
	}
	if h.mapBehind(m, s, id) {
		return nil, replyMapBehind
	}
	if addr := h.memberAddr(id); addr != "" {
		return nil, command.Error("MOVED " + strconv.Itoa(s) + " " + addr)
	}
	return nil, command.Error("CLUSTERDOWN Hash slot not served")
}

// replyMapBehind refuses a command whose -MOVED would come from a map
// older than a slot step applied here (mapBehind).
var replyMapBehind = command.Error("TRYAGAIN this node's cluster map is behind a slot move, retry")

// slotStater is the part of *fsm.FSM that says a slot's state and the
// epoch of the last migration step applied to it.
type slotStater interface {
	SlotState(s int) (state string, epoch uint64)
}

// mapBehind reports whether m may be older than the routing of another
// process for slot s, which m gives to shard owner: a -MOVED from it would
// then send the client to the slot's old shard, whose process, with the
// newer map, sends it back here; cluster clients follow -MOVED without a
// pause, so the two would bounce it until it gives up (go-redis after
// MaxRedirects). -TRYAGAIN instead makes the client back off and ask
// again, by which time the map here has caught up (a refresh every
// remoteRefresh). That is when
//   - m shows a move of s (the one of the moves in progress whose range
//     holds it) into a shard led here, not flipped (nor being aborted):
//     another process may already route s here by the flip;
//   - or a replica here of a shard other than owner has applied a
//     migration step for s of a later epoch than m's: a move m does not
//     show yet.
//
// A slot that left a shard held here (dropped at the flip's epoch, which
// m already shows) keeps its -MOVED.
func (h *Host) mapBehind(m *ShardMap, s int, owner uint32) bool {
	held := h.held.Load()
	if mv, ok := m.MoveOf(s); ok && mv.Flip == 0 && mv.Abort == 0 && mv.To != owner {
		if n, ok := held.nodes[mv.To]; ok {
			if _, here := n.RouteSlot(s); here {
				return true
			}
		}
	}
	for _, id := range held.ids {
		if id == owner {
			continue
		}
		if f, ok := held.nodes[id].fsm.(slotStater); ok {
			if _, ep := f.SlotState(s); ep > m.Epoch {
				return true
			}
		}
	}
	return false
}

// memberAddr is the client address of a member of shard id that this
// process does not host (it redirects to the shard's leader itself).
func (h *Host) memberAddr(id uint32) string {
	if l, ok := h.remoteLeader(id); ok && h.Map().member(id, l.id) {
		return l.addr
	}
	sh, ok := h.Map().Shard(id)
	if !ok {
		return ""
	}
	for _, mem := range sh.Members {
		if a := h.clientAddr(mem); a != "" {
			return a
		}
	}
	return ""
}

// clientAddr is node id's client address: as the map gives it (a member's
// "@addr", else its node record), else as a shard held here, or the
// metadata group's replica here, published it (a metadata voter added with
// RAFT.SHARD ADDMETA may share no shard with this process).
func (h *Host) clientAddr(id string) string { return h.clientAddrIn(h.Map(), id) }

func (h *Host) clientAddrIn(m *ShardMap, id string) string {
	if a := m.Addrs[id]; a != "" {
		return a
	}
	if r, ok := m.Nodes[id]; ok {
		return r.Client
	}
	for _, hid := range h.held.Load().ids {
		if a := h.held.Load().nodes[hid].ClientAddr(id); a != "" {
			return a
		}
	}
	if meta := h.MetaNode(); meta != nil {
		return meta.ClientAddr(id)
	}
	return ""
}

// WriteIndexed runs a connection's writes, each in its slot's shard, runs
// of consecutive writes to one shard together. The index is the home
// shard's when every write went there (WAIT counts the home shard's
// replicas), else 0.
func (h *Host) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	// Each op's route, worked out once: finding its slot means a command
	// spec lookup, a key search and a CRC16.
	type route struct {
		slot  int
		n     *Node  // the replica that runs it here, or nil
		moved []byte // with n nil: the redirect or refusal
		split bool   // a transaction watching another shard's keys
		every bool   // a keyless write for every shard held here
	}
	m := h.Map()
	rs := make([]route, len(ops))
	for i, op := range ops {
		r := &rs[i]
		r.slot = opSlot(op)
		switch {
		case splitTx(m, op, r.slot):
			r.split = true
		case h.everyShard(op):
			r.every = true
		default:
			r.n, r.moved = h.target(r.slot)
		}
	}
	out := make([][]byte, 0, len(ops))
	var index uint64
	for i := 0; i < len(ops); {
		r := rs[i]
		if r.split || r.every {
			if r.split {
				out = append(out, command.Error(errCrossSlot))
			} else {
				out = append(out, h.writeEverywhere(ctx, ops[i]))
			}
			index = 0
			i++
			continue
		}
		j := i + 1
		for j < len(ops) && !rs[j].split && !rs[j].every && rs[j].n == r.n && (rs[j].moved == nil) == (r.moved == nil) {
			j++
		}
		if r.n == nil {
			for k := i; k < j; k++ {
				out = append(out, rs[k].moved)
			}
			index = 0
		} else {
			replies, idx := r.n.WriteIndexed(ctx, ops[i:j])
			for k, rep := range replies {
				if mv := h.movedAway(rep, rs[i+k].slot, r.n); mv != nil {
					replies[k] = mv
				}
			}
			out = append(out, replies...)
			if i == 0 && j == len(ops) && r.n == h.Home() {
				index = idx
			}
		}
		i = j
	}
	return out, index
}

// everyShard reports whether a keyless write acts on the keyspace (FLUSHALL,
// FLUSHDB): on a Redis Cluster node it empties the node's slots, so here it
// runs in every shard hosted here (with one, or none, as any keyless write).
func (h *Host) everyShard(op command.Op) bool {
	if op.Kind != command.OpCommand || len(op.Args) == 0 || len(h.held.Load().ids) <= 1 {
		return false
	}
	return bytes.EqualFold(op.Args[0], []byte("flushall")) || bytes.EqualFold(op.Args[0], []byte("flushdb"))
}

// writeEverywhere runs op in every hosted shard, one after another, and
// answers the first error, else the home shard's reply.
func (h *Host) writeEverywhere(ctx context.Context, op command.Op) []byte {
	var reply []byte
	for _, id := range h.held.Load().ids {
		r, _ := h.held.Load().nodes[id].WriteIndexed(ctx, []command.Op{op})
		if reply == nil || (command.IsError(r[0]) && !command.IsError(reply)) {
			reply = r[0]
		}
	}
	return reply
}

// dbsize is DBSIZE over every shard hosted here ("the keys of the local
// replicas").
func (h *Host) dbsize(ctx context.Context, cmd [][]byte, stale bool) []byte {
	var total int64
	for _, id := range h.held.Load().ids {
		r := h.held.Load().nodes[id].ReadBatch(ctx, [][][]byte{cmd}, stale)[0]
		if len(r) < 3 || r[0] != ':' {
			return r
		}
		v, err := strconv.ParseInt(string(r[1:len(r)-2]), 10, 64)
		if err != nil {
			return r
		}
		total += v
	}
	return command.AppendInt(nil, total)
}

// ReadBatch runs a connection's reads, each in its slot's shard; DBSIZE
// counts every shard hosted here.
func (h *Host) ReadBatch(ctx context.Context, cmds [][][]byte, stale bool) [][]byte {
	slots := make([]int, len(cmds)) // each found once: a spec lookup, a key search, a CRC16
	for i, c := range cmds {
		slots[i] = commandSlot(c)
	}
	out := make([][]byte, 0, len(cmds))
	for i := 0; i < len(cmds); {
		if len(cmds[i]) == 1 && strings.EqualFold(string(cmds[i][0]), "dbsize") && len(h.held.Load().ids) != 1 {
			out = append(out, h.dbsize(ctx, cmds[i], stale))
			i++
			continue
		}
		n, moved := h.target(slots[i])
		if n == nil {
			out = append(out, moved)
			i++
			continue
		}
		j := i + 1
		for j < len(cmds) {
			if m, _ := h.target(slots[j]); m != n || strings.EqualFold(string(cmds[j][0]), "dbsize") {
				break
			}
			j++
		}
		replies := n.ReadBatch(ctx, cmds[i:j], stale)
		for k, r := range replies {
			if mv := h.movedAway(r, slots[i+k], n); mv != nil {
				replies[k] = mv
			}
		}
		out = append(out, replies...)
		i = j
	}
	return out
}

// Watch stamps the keys in their slot's shard (in cluster mode they share
// one slot).
func (h *Host) Watch(ctx context.Context, keys [][]byte) ([]command.Watch, []byte) {
	s := -1
	if len(keys) > 0 {
		s = slot.Of(keys[0])
	}
	n, moved := h.target(s)
	if n == nil {
		return nil, moved
	}
	return n.Watch(ctx, keys)
}

// Wait answers WAIT for the home shard.
func (h *Host) Wait(ctx context.Context, args [][]byte, index uint64) []byte {
	if home := h.Home(); home != nil {
		return home.Wait(ctx, args, index)
	}
	return replyNoReplica
}

// RouteSlot says where a command on slot s must go: here when this process
// holds its shard's leader (or the leader is unknown, and the write path
// answers), else the client address of the shard's leader, or of a member
// when no replica of the shard is here.
func (h *Host) RouteSlot(s int) (addr string, here bool) {
	m := h.Map()
	if m.Epoch == 0 {
		return "", true // Host.ReadBatch and WriteIndexed answer replyMapUnknown
	}
	id := m.ShardOf(s)
	if n, ok := h.held.Load().nodes[id]; ok {
		addr, here := n.RouteSlot(s)
		if !here && h.mapBehind(m, s, id) {
			return "", true // Host.ReadBatch and WriteIndexed answer TRYAGAIN
		}
		if lid, _ := n.leaderClient(); !here && !m.member(id, lid) {
			// The leader this replica last heard of was removed from the
			// shard (REMOVEREPLICA) and the others have not elected yet:
			// its process, which no longer holds the shard, would send the
			// client back here. The replica answers (TRYAGAIN: no leader)
			// until the election.
			return "", true
		}
		return addr, here
	}
	if h.mapBehind(m, s, id) {
		return "", true // target answers replyMapBehind
	}
	if a := h.memberAddr(id); a != "" {
		return a, false
	}
	return "", true // Host.ReadBatch and WriteIndexed answer CLUSTERDOWN
}

// movedAway turns n's refusal of a command on slot s into -MOVED when the
// map now gives s to a shard whose leader is elsewhere: the state machine
// cannot say where a slot it gave away went, the map can. Otherwise (still
// n's shard's, or led here) nil: the client's retry finds it.
func (h *Host) movedAway(reply []byte, s int, n *Node) []byte {
	if s < 0 || !bytes.HasPrefix(reply, []byte(slotRefused)) || h.Map().ShardOf(s) == n.cfg.Shard {
		return nil
	}
	if addr, here := h.RouteSlot(s); !here && addr != "" {
		return command.Error("MOVED " + strconv.Itoa(s) + " " + addr)
	}
	return nil
}
