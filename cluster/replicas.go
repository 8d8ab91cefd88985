package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

// Moving a replica (docs/sharding.md, Placement): RAFT.SHARD ADDREPLICA
// <shard> <node> and REMOVEREPLICA <shard> <node> run on the metadata
// leader's process (relayToMeta, as ADDSHARD). Adding: the shard's leader
// makes the node a non-voter (RAFT.JOIN's path), the map names it a member
// (one compare-and-set, new epoch, and an "added" record so that its
// replica joins instead of bootstrapping), the node's Host starts the
// replica on its next map refresh, the replica asks for promotion once
// caught up (membership.go), and the command answers once the shard's
// leader lists it as a voter. Removing: the shard's leader removes it from
// the group, then the map drops it, and the node's Host closes its replica
// on its next map refresh (its directory stays: stopRemovedShards).

const (
	// cmdAddReplica, cmdRemoveReplica are RAFT.SHARD ADDREPLICA and
	// REMOVEREPLICA relayed to the metadata leader's process:
	// raftset.addreplica <shard> <node> [relayed].
	cmdAddReplica    = "raftset.addreplica"
	cmdRemoveReplica = "raftset.removereplica"
	// cmdAddMember, cmdRemoveMember, cmdSuffrage are sent to any member of
	// a shard and run on its leader: RAFT.JOIN <node> <raft-addr>,
	// RAFT.REMOVE <node>, and the node's suffrage in the leader's latest
	// configuration ("voter", "nonvoter", or empty: not a member).
	cmdAddMember    = "raftset.addmember"
	cmdRemoveMember = "raftset.removemember"
	cmdSuffrage     = "raftset.suffrage"

	// promoteWait bounds how long ADDREPLICA waits for the new replica to
	// catch up and become a voter (it copies the shard's snapshot and log).
	promoteWait = 60 * time.Second
)

// replicaCmd is RAFT.SHARD ADDREPLICA|REMOVEREPLICA <shard> <node>.
func (h *Host) replicaCmd(ctx context.Context, args [][]byte) []byte {
	sub := strings.ToLower(string(args[1]))
	if len(args) != 4 {
		return command.Error(command.ErrArity("raft.shard|" + sub))
	}
	return h.replicaArgs(ctx, sub == "addreplica", args[2], args[3], false)
}

func (h *Host) replicaArgs(ctx context.Context, add bool, shard, node []byte, relayed bool) []byte {
	what, name := "REMOVEREPLICA", cmdRemoveReplica
	if add {
		what, name = "ADDREPLICA", cmdAddReplica
	}
	id, err := strconv.ParseUint(string(shard), 10, 32)
	if err != nil || id >= uint64(MetaGroup) {
		return command.Error("ERR " + what + " wants <shard> <node>: shard id is not an integer")
	}
	if err := CheckNodeID(string(node)); err != nil {
		return command.Error("ERR " + what + ": " + err.Error())
	}
	// A repeat of an ADDREPLICA that recorded the node completes it
	// (driveAddReplica); one of a REMOVEREPLICA that removed it is refused,
	// since the map keeps no trace of a removed replica.
	again := runAgain
	if !add {
		again += ": an answer that node " + string(node) + " holds no replica of shard " + strconv.FormatUint(id, 10) + " means it was removed"
	}
	args := [][]byte{[]byte(name), shard, node}
	return h.relayToMeta(ctx, what, again, args, relayed, func() []byte {
		h.moveMu.Lock()
		defer h.moveMu.Unlock()
		var err error
		if add {
			err = h.driveAddReplica(ctx, uint32(id), string(node))
		} else {
			err = h.driveRemoveReplica(ctx, uint32(id), string(node))
		}
		if err != nil {
			return command.Error("ERR " + what + ": " + err.Error())
		}
		return command.OK
	})
}

// replicationFactor is the configured number of replicas per shard: the
// bootstrap map's first shard's (raftset cluster create gives every shard
// the same).
func (h *Host) replicationFactor() int { return len(h.bootstrap.Shards[0].Members) }

// settledShard reads the replicated map (readMetaSettled) and its shard
// id.
func (h *Host) settledShard(ctx context.Context, id uint32) (*ShardMap, Shard, error) {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return nil, Shard{}, err
	}
	if cur == nil {
		return nil, Shard{}, errors.New("the cluster map is not bootstrapped yet")
	}
	sh, ok := cur.Shard(id)
	if !ok {
		return nil, Shard{}, fmt.Errorf("no shard %d", id)
	}
	return cur, sh, nil
}

func (h *Host) driveAddReplica(ctx context.Context, id uint32, node string) error {
	cur, sh, err := h.settledShard(ctx, id)
	if err != nil {
		return err
	}
	if cur.removed(node) {
		return fmt.Errorf("node %s was removed from the cluster (RAFT.SHARD REMOVENODE); add it again first (RAFT.SHARD ADDNODE)", node)
	}
	raftAddr, ok := h.raftAddrIn(cur, node)
	if !ok {
		return fmt.Errorf("unknown node %q (not in peers, nor added by RAFT.SHARD ADDNODE)", node)
	}
	if slices.Contains(sh.Members, node) {
		if cur.joins(id, node) {
			// An ADDREPLICA recorded it (its added line): this is a
			// repeat, after a lost reply or a wait for the voter that ran
			// out, which waits for the voter as the first run did.
			return h.waitSuffrage(ctx, id, node, "voter")
		}
		return fmt.Errorf("node %s already holds a replica of shard %d (two replicas of a shard on one node)", node, id)
	}
	// The group first: a map naming the node before the group knows it
	// would start a replica no leader talks to. A repeat after a failure
	// finds the node a member already (RAFT.JOIN is idempotent).
	if _, err := h.retry(ctx, func() []byte {
		return h.shardCall(ctx, id, [][]byte{[]byte(cmdAddMember), []byte(node), []byte(raftAddr)})
	}); err != nil {
		return fmt.Errorf("adding %s to shard %d's group: %w", node, id, err)
	}
	home, had := cur.Home(node)
	if !had {
		home = id // its first replica becomes its home (noreplica.go)
	}
	next := cur.clone()
	next.Epoch++
	for i := range next.Shards {
		if next.Shards[i].ID == id {
			next.Shards[i].Members = append(next.Shards[i].Members, node)
		}
	}
	next.setHome(node, home, true)
	if next.Added == nil {
		next.Added = map[uint32][]string{}
	}
	next.Added[id] = append(next.Added[id], node)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("recording %s in shard %d's members: %w", node, id, err)
	}
	h.log.Info("added a replica", "shard", id, "node", node, "epoch", next.Epoch)
	h.startNewShards()
	return h.waitSuffrage(ctx, id, node, "voter")
}

func (h *Host) driveRemoveReplica(ctx context.Context, id uint32, node string) error {
	cur, sh, err := h.settledShard(ctx, id)
	if err != nil {
		return err
	}
	if !slices.Contains(sh.Members, node) {
		return fmt.Errorf("node %s holds no replica of shard %d", node, id)
	}
	if gone, err := h.outOfGroup(ctx, id, node); err != nil {
		return err
	} else if gone {
		return h.forgetReplica(ctx, cur, id, node) // lost with its machine (forget.go)
	}
	if r := h.replicationFactor(); len(sh.Members)-1 < r/2+1 {
		return fmt.Errorf("shard %d would keep %d of its %d configured replicas, less than a majority", id, len(sh.Members)-1, r)
	}
	// The home shard (keyless commands, ACL users) goes last: a process
	// keeps it while it holds another replica. Its last replica may go
	// (draining a node: raftset cluster remove-node); the process then
	// holds none, as a node just added (stopRemovedShards).
	if len(cur.Hosts(node)) > 1 && h.isHome(ctx, cur, node, id) {
		return fmt.Errorf("shard %d is node %s's home shard; it goes last, once the node holds no other replica (raftset cluster remove-node)", id, node)
	}
	if err := h.leadElsewhere(ctx, sh, node); err != nil {
		return err
	}
	if _, err := h.retry(ctx, func() []byte {
		r := h.shardCall(ctx, id, [][]byte{[]byte(cmdRemoveMember), []byte(node)})
		if strings.HasPrefix(string(r), "-ERR no member with id") {
			return command.OK // removed by an earlier attempt
		}
		return r
	}); err != nil {
		return fmt.Errorf("removing %s from shard %d's group: %w", node, id, err)
	}
	next := cur.withoutMember(id, node)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("dropping %s from shard %d's members: %w", node, id, err)
	}
	h.log.Info("removed a replica", "shard", id, "node", node, "epoch", next.Epoch)
	h.stopRemovedShards()
	// If the node led the shard nonetheless (elected again after the
	// transfer) it stepped down: answer once the others elected, so that
	// what runs next (the next move of a rebalance, a client's command)
	// finds the shard served.
	return h.waitLeaderOtherThan(ctx, id, node)
}

// cmdHome asks a process for its home shard: raftset.shard <MetaGroup>
// raftset.home, answered by any process (metaInternal) with the id, or -1
// while it holds no replica.
const cmdHome = "raftset.home"

// isHome says whether shard id is node's home: the map's (homes.go), or
// the one its process answers when they differ (a process whose home was
// given before the map recorded homes), so that neither is removed while
// the process runs it. A process that does not answer (down: removing its
// replicas is how one replaces it) is judged by the map.
func (h *Host) isHome(ctx context.Context, m *ShardMap, node string, id uint32) bool {
	if home, ok := m.Home(node); ok && home == id {
		return true
	}
	home, ok := h.answeringHome(ctx, m, node)
	return ok && home == id
}

// leadElsewhere moves sh's leadership off node before node leaves it. A
// leader that removes itself steps down and the others elect only after
// an election timeout; meanwhile they still name it, while its process,
// which no longer holds the shard, sends the shard's commands back to a
// member, and cluster clients bounced between the two until they gave up
// (go-redis: MOVED after MaxRedirects). A transfer hands leadership over
// with no such gap, and every member knows the new leader before node
// leaves.
func (h *Host) leadElsewhere(ctx context.Context, sh Shard, node string) error {
	l, err := h.shardLeader(ctx, sh.ID)
	if err != nil || l != node {
		return nil // not known to lead: nothing to hand over (the removal copes)
	}
	// A transfer can time out (the target did not win within an election
	// timeout on a loaded machine): the next member is tried, twice round.
	var errs []error
	for range 2 {
		for _, to := range sh.Members {
			if to == node {
				continue
			}
			err := h.transferShard(ctx, sh.ID, to)
			if err == nil {
				return nil
			}
			if l, lerr := h.shardLeader(ctx, sh.ID); lerr == nil && l != node {
				return nil // moved all the same (an election, a late transfer)
			}
			errs = append(errs, fmt.Errorf("to %s: %w", to, err))
		}
	}
	if len(errs) == 0 {
		return nil // no other member: the removal refuses that itself
	}
	return fmt.Errorf("moving shard %d's leadership from %s before removing it: %w", sh.ID, node, errors.Join(errs...))
}

// waitLeaderOtherThan waits until shard id names a leader other than node.
func (h *Host) waitLeaderOtherThan(ctx context.Context, id uint32, node string) error {
	var l string
	var err error
	perr := h.poll(ctx, stepRetry, 100*time.Millisecond, func() bool {
		l, err = h.shardLeader(ctx, id)
		return err == nil && l != node
	})
	if errors.Is(perr, errPollLimit) {
		return fmt.Errorf("shard %d named no leader other than %s within %s (last: %q, %v); %s is out of its group and the map", id, node, stepRetry, l, err, node)
	}
	return perr
}

// readMetaSettled reads the replicated map as a driver starts from it
// (linearizable), again for up to stepRetry while the metadata group
// cannot serve the read (a new leader that has not committed in its term
// yet, or could not confirm its leadership: TRYAGAIN, CLUSTERDOWN), as a
// client retries them: a read changes nothing.
func (h *Host) readMetaSettled(ctx context.Context) (*ShardMap, error) {
	var m *ShardMap
	var err error
	perr := h.poll(ctx, stepRetry, 50*time.Millisecond, func() bool {
		m, err = h.readMeta(ctx, false)
		return err == nil || !strings.Contains(err.Error(), "TRYAGAIN") && !strings.Contains(err.Error(), "CLUSTERDOWN")
	})
	if perr != nil && !errors.Is(perr, errPollLimit) {
		return nil, perr
	}
	return m, err // at the limit, the last TRYAGAIN
}

// waitSuffrage waits until shard id's leader lists node with suffrage.
func (h *Host) waitSuffrage(ctx context.Context, id uint32, node, suffrage string) error {
	last, err := h.awaitSuffrage(ctx, func(args [][]byte) []byte { return h.shardCall(ctx, id, args) }, node, suffrage)
	if errors.Is(err, errPollLimit) {
		return fmt.Errorf("%s is not a %s of shard %d after %s (last answer %q); the map names it, run ADDREPLICA again to wait for it",
			node, suffrage, id, promoteWait, last)
	}
	return err
}

// awaitSuffrage asks a group's leader through call until it answers that
// node has suffrage, for up to promoteWait; at the limit it returns
// errPollLimit with the last answer.
func (h *Host) awaitSuffrage(ctx context.Context, call func([][]byte) []byte, node, suffrage string) (string, error) {
	var r []byte
	err := h.poll(ctx, promoteWait, 100*time.Millisecond, func() bool {
		r = call([][]byte{[]byte(cmdSuffrage), []byte(node)})
		v, err := respwire.Parse(r)
		return err == nil && v.Kind == '$' && v.Str == suffrage
	})
	return strings.TrimSpace(string(r)), err
}

// stopRemovedShards closes this process's replica of every shard the map
// no longer names it a member of (REMOVEREPLICA). Its directory stays: a
// later ADDREPLICA of the same node starts from it (a non-voter with old
// state catches up like any lagging one). It also makes the map's home
// (homes.go) this process's home once it runs here: they differ only
// after a restart from the directive, whose lowest shard is the home at
// start, of a node drained since and given other replicas (the home
// closed with the last replica: a stale one was started). With no home in
// the map held here, a home closed leaves the process with none, as one
// started with none, keeping its ACL users for the front end until the
// next replica starts (which becomes its home: startShard).
func (h *Host) stopRemovedShards() {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	if h.closing {
		return
	}
	m := h.Map()
	if m.Epoch == 0 {
		return // the directive's map: nothing was removed yet
	}
	held := h.held.Load()
	var gone []uint32
	next := &heldShards{nodes: make(map[uint32]*Node, len(held.nodes))}
	for _, id := range held.ids {
		if !m.member(id, h.self) {
			gone = append(gone, id)
			continue
		}
		next.nodes[id] = held.nodes[id]
		next.ids = append(next.ids, id)
	}
	home := h.Home()
	var want *Node
	if id, ok := m.Home(h.self); ok {
		want = next.nodes[id] // nil until startNewShards started it
	}
	switch {
	case want != nil && want != home:
		h.log.Info("the map's home shard is this process's home now", "shard", want.cfg.Shard)
		h.setHome(want)
	case home != nil && slices.Contains(gone, home.cfg.Shard):
		h.firstUsers.Store(home.Users())
		h.home.Store(nil)
	}
	if len(gone) == 0 {
		return
	}
	h.held.Store(next)
	for _, id := range gone {
		if err := held.nodes[id].Close(); err != nil {
			h.log.Warn("closing a replica the map removed", "shard", id, "error", err)
		}
		h.log.Info("closed a replica the map removed (its directory stays)", "shard", id)
	}
}

// memberCommand runs the member changes ADDREPLICA and REMOVEREPLICA send
// a shard, on its leader (leaderCommand).
func (n *Node) memberCommand(ctx context.Context, args [][]byte) []byte {
	switch strings.ToLower(string(args[0])) {
	case cmdAddMember:
		if len(args) != 3 {
			return command.Error(command.ErrArity(cmdAddMember))
		}
		return n.onLeader(ctx, [][]byte{[]byte("raft.join"), args[1], args[2]})
	case cmdRemoveMember:
		if len(args) != 2 {
			return command.Error(command.ErrArity(cmdRemoveMember))
		}
		return n.onLeader(ctx, [][]byte{[]byte("raft.remove"), args[1]})
	default: // cmdSuffrage
		if len(args) != 2 {
			return command.Error(command.ErrArity(cmdSuffrage))
		}
		return n.onLeader(ctx, args)
	}
}

// serveSuffrage is raftset.suffrage on the leader.
func (n *Node) serveSuffrage(id []byte) []byte {
	s, ok := n.server(string(id))
	switch {
	case !ok:
		return command.AppendBulkString(nil, "")
	case s.Suffrage == raft.Voter:
		return command.AppendBulkString(nil, "voter")
	default:
		return command.AppendBulkString(nil, "nonvoter")
	}
}
