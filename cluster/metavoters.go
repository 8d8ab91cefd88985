package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Changing the metadata group's voters (docs/sharding.md, Changing the
// voters): RAFT.SHARD ADDMETA <node> and REMOVEMETA <node> run on the
// metadata leader's process (relayToMeta, as ADDREPLICA), and change the
// group as ADDREPLICA and REMOVEREPLICA change a shard's: the group first
// (the node joins as a non-voter, or leaves), then the map, whose "meta"
// line names the voters from then on (the Raft configuration's voters,
// not the map's older list: after raftset recover --meta the group has
// fewer than the directive names). A process runs its replica while the
// map names it a voter: started by the map refresh (joining, never
// bootstrapping), closed once the map no longer names it.
//
// Which replica a process starts with comes from its directory, not from
// the directive, whose first shard may no longer be the group's voters
// (the map that says so is in the group itself): a replica that left
// leaves a marker file (metaLeftFile) in dir/meta, which stays; one that
// has state and no marker is started, whatever the directive; a directory
// with neither starts one, bootstrapping, only on a member of the
// directive's first shard, as before.

const (
	// cmdAddMeta, cmdRemoveMeta are RAFT.SHARD ADDMETA and REMOVEMETA
	// relayed to the metadata leader's process: raftset.addmeta <node>
	// [relayed].
	cmdAddMeta    = "raftset.addmeta"
	cmdRemoveMeta = "raftset.removemeta"
	// metaLeftFile, in dir/meta, marks a replica that left the group.
	metaLeftFile = "left"
)

// planMeta says whether this process starts its replica of the metadata
// group at start, as its directory says (above), and whether it may
// bootstrap it. It runs before any shard's replica starts: a process that
// must not start (metaStart) leaves nothing running or bootstrapped.
func (h *Host) planMeta() (start, bootstrap bool, err error) {
	dir := MetaDir(h.cfg.DataDir)
	// An unreadable marker is an error, never "no marker": a replica that
	// left must not start again.
	left, err := exists(filepath.Join(dir, metaLeftFile))
	if err != nil {
		return false, false, fmt.Errorf("metadata replica: %w", err)
	}
	if left {
		h.log.Info("this node left the metadata group (RAFT.SHARD REMOVEMETA): no replica of it started")
		return false, false, nil
	}
	inDirective := slices.Contains(h.bootstrap.Shards[0].Members, h.self)
	held, err := exists(filepath.Join(dir, raftDBFile))
	if err != nil {
		return false, false, fmt.Errorf("metadata replica: %w", err)
	}
	switch {
	case !inDirective:
		return held, false, nil
	case held:
		return true, true, nil
	}
	// An empty directory: bootstrap only where no other process knows
	// the group already (metaprobe.go).
	start, bootstrap, err = h.metaStart(h.probeMeta())
	switch {
	case err != nil:
	case !start:
		h.log.Info("the cluster map does not name this node a metadata voter: no replica of the metadata group started")
	case !bootstrap:
		h.log.Info("the metadata group exists already: this node's replica waits for its leader instead of bootstrapping")
	}
	return start, bootstrap, err
}

// startMeta starts this process's replica of the metadata group at start
// as planMeta said.
func (h *Host) startMeta(start, bootstrap bool) error {
	if !start {
		return nil
	}
	n, err := h.newMetaNode(h.metaVoters(), bootstrap)
	if err != nil {
		return err
	}
	h.meta.Store(n)
	return nil
}

// syncMeta starts this process's replica of the metadata group when the
// map names it a voter (ADDMETA), and closes it once the map no longer
// does (REMOVEMETA). The map is enough: REMOVEMETA writes it only once the
// group's configuration dropped the node, so no voter closes while the
// group still counts it, and the removed replica itself may never learn
// that configuration (the leader stops sending it the log), where it would
// campaign for good. Maps that never changed the voters (no meta line)
// change nothing.
func (h *Host) syncMeta() {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	m := h.Map()
	if h.closing || m.Epoch == 0 || len(m.Meta) == 0 {
		return
	}
	named := slices.Contains(m.Meta, h.self)
	meta := h.MetaNode()
	switch {
	case named && meta == nil:
		left := filepath.Join(MetaDir(h.cfg.DataDir), metaLeftFile)
		if err := os.Remove(left); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Error("starting the metadata replica the map adds", "error", err)
			return
		}
		n, err := h.newMetaNode(m.Meta, false)
		if err != nil {
			h.log.Error("starting the metadata replica the map adds", "error", err)
			return
		}
		h.meta.Store(n)
		h.log.Info("started a replica of the metadata group (RAFT.SHARD ADDMETA)")
	case !named && meta != nil:
		// The marker first: a crash after it leaves the replica closed
		// at the next start, which is what the map says.
		left := filepath.Join(MetaDir(h.cfg.DataDir), metaLeftFile)
		if err := os.WriteFile(left, []byte("this node left the metadata group (RAFT.SHARD REMOVEMETA)\n"), 0o644); err != nil {
			h.log.Error("closing the metadata replica the map removed", "error", err)
			return
		}
		h.meta.Store(nil)
		if err := meta.Close(); err != nil {
			h.log.Warn("closing the metadata replica the map removed", "error", err)
		}
		h.log.Info("closed this node's replica of the metadata group (RAFT.SHARD REMOVEMETA; dir/meta stays)")
	}
}

// knowsLeader says whether the node knows its group's leader.
func (n *Node) knowsLeader() bool {
	_, id := n.Leader()
	return id != ""
}

// metaCmd is RAFT.SHARD ADDMETA|REMOVEMETA <node>.
func (h *Host) metaCmd(ctx context.Context, args [][]byte) []byte {
	sub := strings.ToLower(string(args[1]))
	if len(args) != 3 {
		return command.Error(command.ErrArity("raft.shard|" + sub))
	}
	return h.metaArgs(ctx, sub == "addmeta", args[2], false)
}

// metaArgs checks <node> and has the metadata leader's process run the
// change; relayed: sent by a metadata voter.
func (h *Host) metaArgs(ctx context.Context, add bool, node []byte, relayed bool) []byte {
	what, name := "REMOVEMETA", cmdRemoveMeta
	if add {
		what, name = "ADDMETA", cmdAddMeta
	}
	if err := CheckNodeID(string(node)); err != nil {
		return command.Error("ERR " + what + ": " + err.Error())
	}
	// A repeat of a change that was made is refused (node a voter
	// already, or not one), which is why the advice says what that means.
	again := runAgain + ": an answer that node " + string(node) + " is not a voter of the metadata group means it was removed"
	if add {
		again = runAgain + ": an answer that node " + string(node) + " is a voter of the metadata group already means it was added"
	}
	args := [][]byte{[]byte(name), node}
	return h.relayToMeta(ctx, what, again, args, relayed, func() []byte {
		h.moveMu.Lock()
		var err error
		if add {
			err = h.driveAddMeta(ctx, string(node))
		} else {
			err = h.driveRemoveMeta(ctx, string(node))
		}
		h.moveMu.Unlock()
		if errors.Is(err, errMetaHandedOver) {
			// This process led the group and the node is its own: the
			// new leader's process removes it.
			return h.metaArgs(ctx, add, node, false)
		}
		if err != nil {
			return command.Error("ERR " + what + ": " + err.Error())
		}
		return command.OK
	})
}

// metaArgsInternal is ADDMETA's and REMOVEMETA's check of the relayed
// call's arguments.
func metaArgsInternal(args [][]byte) ([]byte, bool, []byte) {
	if len(args) != 2 && len(args) != 3 {
		return nil, false, command.Error(command.ErrArity(string(args[0])))
	}
	return args[1], len(args) == 3, nil
}

// errMetaHandedOver: the metadata leadership moved to another process
// before the removal of this one's replica, which that process runs.
var errMetaHandedOver = errors.New("the metadata group's leadership was handed over")

// metaConfig is the metadata group's configuration as this process's
// replica (its leader: the drivers run there) knows it: the voters in
// order, and each member's suffrage.
func (h *Host) metaConfig() ([]string, map[string]raft.ServerSuffrage, error) {
	meta := h.MetaNode()
	if meta == nil {
		return nil, nil, errNoMetaReplica
	}
	f := meta.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, nil, fmt.Errorf("the metadata group's configuration: %w", err)
	}
	var voters []string
	all := map[string]raft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		all[string(s.ID)] = s.Suffrage
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	return voters, all, nil
}

func (h *Host) driveAddMeta(ctx context.Context, node string) error {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return err
	}
	if cur == nil {
		return errors.New("the cluster map is not bootstrapped yet")
	}
	if cur.removed(node) {
		return fmt.Errorf("node %s was removed from the cluster (RAFT.SHARD REMOVENODE); add it again first (RAFT.SHARD ADDNODE)", node)
	}
	raftAddr, ok := h.raftAddrIn(cur, node)
	if !ok || !h.knownNode(cur, node) {
		return fmt.Errorf("unknown node %q (not in peers, nor added by RAFT.SHARD ADDNODE)", node)
	}
	voters, _, err := h.metaConfig()
	if err != nil {
		return err
	}
	if slices.Contains(voters, node) && slices.Contains(h.metaVotersIn(cur), node) {
		return fmt.Errorf("node %s is a voter of the metadata group already", node)
	}
	// The group first (a non-voter: it counts for no quorum until caught
	// up), then the map, which starts the node's replica. A repeat after a
	// failure finds it a member already (RAFT.JOIN is idempotent).
	if _, err := h.retry(ctx, func() []byte {
		return h.metaCall(ctx, [][]byte{[]byte(cmdAddMember), []byte(node), []byte(raftAddr)})
	}); err != nil {
		return fmt.Errorf("adding %s to the metadata group: %w", node, err)
	}
	if voters, _, err = h.metaConfig(); err != nil {
		return err
	}
	next := cur.clone()
	next.Epoch++
	next.Meta = slices.Clone(voters)
	if !slices.Contains(voters, node) {
		next.Meta = append(next.Meta, node) // else promoted by an earlier attempt
	}
	slices.Sort(next.Meta)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("recording %s as a metadata voter: %w", node, err)
	}
	h.log.Info("added a metadata voter", "node", node, "epoch", next.Epoch)
	return h.waitMetaSuffrage(ctx, node, "voter")
}

func (h *Host) driveRemoveMeta(ctx context.Context, node string) error {
	cur, err := h.readMetaSettled(ctx)
	if err != nil {
		return err
	}
	if cur == nil {
		return errors.New("the cluster map is not bootstrapped yet")
	}
	voters, all, err := h.metaConfig()
	if err != nil {
		return err
	}
	_, member := all[node]
	named := slices.Contains(h.metaVotersIn(cur), node)
	switch {
	case !member && !named:
		return fmt.Errorf("node %s is not a voter of the metadata group", node)
	case member && len(voters) == 1 && voters[0] == node:
		return fmt.Errorf("node %s is the metadata group's only voter: add another first (RAFT.SHARD ADDMETA)", node)
	case member && node == h.self:
		// A leader that removes itself leaves the group without one
		// until an election timeout; a transfer hands it over at once,
		// and the new leader's process runs the removal.
		if err := h.handMetaOver(ctx, voters); err != nil {
			return err
		}
		return errMetaHandedOver
	case member:
		if _, err := h.retry(ctx, func() []byte {
			r := h.metaCall(ctx, [][]byte{[]byte(cmdRemoveMember), []byte(node)})
			if strings.HasPrefix(string(r), "-ERR no member with id") {
				return command.OK // removed by an earlier attempt
			}
			return r
		}); err != nil {
			return fmt.Errorf("removing %s from the metadata group: %w", node, err)
		}
	}
	// The map last: it closes the node's replica, which must be out of
	// the group by then (syncMeta). A member lost with its machine, out of
	// the configuration already (raftset recover --meta), changes the map
	// alone.
	if voters, _, err = h.metaConfig(); err != nil {
		return err
	}
	next := cur.clone()
	next.Epoch++
	next.Meta = slices.DeleteFunc(slices.Clone(voters), func(v string) bool { return v == node })
	slices.Sort(next.Meta)
	if err := h.metaCAS(ctx, cur, next); err != nil {
		return fmt.Errorf("dropping %s from the metadata voters: %w", node, err)
	}
	h.log.Info("removed a metadata voter", "node", node, "epoch", next.Epoch)
	return nil
}

// handMetaOver moves the metadata group's leadership from this process to
// another voter and waits until this replica follows it. A voter that
// cannot take it (down: the machine being replaced) passes the turn to
// the next.
func (h *Host) handMetaOver(ctx context.Context, voters []string) error {
	var errs []error
	for _, to := range voters {
		if to == h.self {
			continue
		}
		if _, err := h.retry(ctx, func() []byte {
			return h.metaCall(ctx, [][]byte{[]byte(cmdTransfer), []byte(to)})
		}); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("to %s: %w", to, err))
			continue
		}
		perr := h.poll(ctx, transferWait, 50*time.Millisecond, func() bool {
			meta := h.MetaNode()
			if meta == nil {
				return false
			}
			_, l := meta.Leader()
			return l != "" && l != h.self
		})
		if !errors.Is(perr, errPollLimit) {
			return perr
		}
		errs = append(errs, fmt.Errorf("to %s: no other leader named within %s", to, transferWait))
	}
	if len(errs) > 0 {
		return fmt.Errorf("moving the metadata group's leadership off %s before removing it: %w", h.self, errors.Join(errs...))
	}
	return nil
}

// metaCall runs a member change (cmdAddMember, cmdRemoveMember,
// cmdSuffrage, cmdTransfer) on the metadata group's leader, through this
// process's replica.
func (h *Host) metaCall(ctx context.Context, args [][]byte) []byte {
	meta := h.MetaNode()
	if meta == nil {
		return command.Error("ERR " + errNoMetaReplica.Error())
	}
	return meta.Internal(ctx, args)
}

// waitMetaSuffrage waits until the metadata leader lists node with
// suffrage.
func (h *Host) waitMetaSuffrage(ctx context.Context, node, suffrage string) error {
	last, err := h.awaitSuffrage(ctx, func(args [][]byte) []byte { return h.metaCall(ctx, args) }, node, suffrage)
	if errors.Is(err, errPollLimit) {
		return fmt.Errorf("%s is not a %s of the metadata group after %s (last answer %q); the map names it, run ADDMETA again to wait for it",
			node, suffrage, promoteWait, last)
	}
	return err
}
