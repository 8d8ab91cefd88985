package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Membership (DESIGN.md, "Membership and promotion"): RAFT.JOIN adds a
// node as a non-voter (or updates the address of a known id: identity is
// the id, not the address); the non-voter asks for promotion every
// membershipTick (raftset.promote id applied-index), and the leader makes it
// a voter only once that index is within Config.PromoteLag entries of its
// own: a voter far behind would hold up every commit it is needed for.
// RAFT.REMOVE, RAFT.TRANSFER run on the leader (a follower relays them);
// RAFT.INFO and RAFT.SNAPSHOT are local.

const membershipTick = 200 * time.Millisecond

// runMembership publishes this node's client address, joins a cluster when
// Config.Join is set and asks for promotion once caught up.
func (n *Node) runMembership() {
	defer n.wg.Done()
	t := time.NewTicker(membershipTick)
	defer t.Stop()
	var warned time.Time
	for {
		select {
		case <-t.C:
		case <-n.stopCh:
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		joining := n.cfg.Join != "" && !n.joined.Load()
		if err := n.membershipStep(ctx); err != nil {
			// A join that keeps failing (a wrong secret or certificate,
			// an unreachable member) is the operator's to fix: say so,
			// every few seconds rather than every tick.
			if joining && time.Since(warned) >= 5*time.Second {
				warned = time.Now()
				n.log.Warn("cannot join the cluster yet", "error", err)
			} else {
				n.log.Debug("membership step", "error", err)
			}
		}
		cancel()
	}
}

func (n *Node) membershipStep(ctx context.Context) error {
	if n.cfg.Join != "" && !n.joined.Load() {
		// Also when this node has state: it may come back with a new
		// address, which RAFT.JOIN updates under its id.
		if err := n.join(ctx); err != nil {
			return err
		}
		n.joined.Store(true)
	}
	self, member := n.selfServer()
	if !member {
		return nil
	}
	if _, lid := n.Leader(); lid == "" {
		return nil
	}
	if n.cfg.ClientAddr != "" && n.ClientAddr(n.cfg.NodeID) != n.cfg.ClientAddr {
		req := nodeAddrReq{id: []byte(n.cfg.NodeID), addr: []byte(n.cfg.ClientAddr)}
		if o := n.askLeader(ctx, req.args()); o.kind != applied {
			return fmt.Errorf("publish client address: %w", o)
		}
	}
	if self.Suffrage == raft.Nonvoter {
		req := promoteReq{id: []byte(n.cfg.NodeID), applied: n.fsm.AppliedIndex()}
		if o := n.askLeader(ctx, req.args()); o.kind != applied {
			return fmt.Errorf("promotion: %w", o)
		}
		n.log.Info("promoted to voter")
	}
	return nil
}

// promoteLag is how far a non-voter asking for promotion is behind the
// leader: entries between the leader's applied index and the one it
// reported. Both count the same entries (the state machine's), so entries
// the state machine never sees (configuration, no-ops) at the end of the
// log do not hold a caught-up node back.
func (n *Node) promoteLag(reported uint64) uint64 {
	if leader := n.fsm.AppliedIndex(); leader > reported {
		return leader - reported
	}
	return 0
}

// selfServer returns this node's entry in the latest configuration.
func (n *Node) selfServer() (raft.Server, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Server{}, false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			return s, true
		}
	}
	return raft.Server{}, false
}

// join asks the member at Config.Join to add this node.
func (n *Node) join(ctx context.Context) error {
	pc, err := dialPeer(ctx, n.cfg.Join, n.cfg.ApplyTimeout, n.peerAuth())
	if err != nil {
		return fmt.Errorf("join via %s: %w", n.cfg.Join, err)
	}
	defer pc.Close()
	args := [][]byte{[]byte("raft.join"), []byte(n.cfg.NodeID), []byte(n.raftAddr())}
	if n.cfg.ClientAddr != "" {
		args = append(args, []byte(n.cfg.ClientAddr))
	}
	reply, err := pc.Call(ctx, args)
	if err != nil {
		return fmt.Errorf("join via %s: %w", n.cfg.Join, err)
	}
	if command.IsError(reply) {
		return fmt.Errorf("join via %s: %s", n.cfg.Join, strings.TrimSpace(string(reply)))
	}
	n.log.Info("asked to join the cluster", "via", n.cfg.Join)
	return nil
}

// raftAddr is the Raft address peers dial.
func (n *Node) raftAddr() string {
	if n.cfg.RaftAdvertise != "" {
		return n.cfg.RaftAdvertise
	}
	return string(n.trans.LocalAddr())
}

// leaderCommand runs a leader-only command on the leader.
func (n *Node) leaderCommand(ctx context.Context, args [][]byte) []byte {
	name := strings.ToLower(string(args[0]))
	timeout := n.cfg.ApplyTimeout
	switch name {
	case CmdNode:
		req, bad := parseNodeAddr(args)
		if bad != nil {
			return bad
		}
		return n.serveNodeAddr(ctx, req)
	case cmdSlotStep:
		return n.serveSlotStep(ctx, args)
	case cmdSuffrage:
		if len(args) != 2 {
			return command.Error(command.ErrArity(name))
		}
		return n.serveSuffrage(args[1])
	case "raft.join":
		if len(args) < 3 || len(args) > 4 {
			return command.Error(command.ErrArity(name))
		}
		id, addr := raft.ServerID(args[1]), raft.ServerAddress(args[2])
		if s, ok := n.server(string(id)); !ok || s.Address != addr {
			// A known id with a new address keeps its suffrage and takes
			// the new address; a new id is a non-voter until caught up.
			if err := n.raft.AddNonvoter(id, addr, 0, timeout).Error(); err != nil {
				return raftError("RAFT.JOIN", err)
			}
			n.log.Info("added member", "id", id, "raft-addr", addr, "known", ok)
		}
		if len(args) == 4 {
			n.proposeNodeAddr(ctx, args[1], args[3])
		}
		return command.OK
	case cmdPromote:
		req, bad := parsePromote(args)
		if bad != nil {
			return bad
		}
		return n.servePromote(req)
	case "raft.remove":
		if len(args) != 2 {
			return command.Error(command.ErrArity(name))
		}
		if _, ok := n.server(string(args[1])); !ok {
			return command.Error("ERR no member with id " + string(args[1]))
		}
		if err := n.raft.RemoveServer(raft.ServerID(args[1]), 0, timeout).Error(); err != nil {
			return raftError("RAFT.REMOVE", err)
		}
		n.log.Info("removed member", "id", string(args[1]))
		return command.OK
	case "raft.restore":
		if len(args) != 2 {
			return command.Error(command.ErrArity(name))
		}
		return n.restoreRDB(ctx, args[1])
	case "raft.transfer":
		var fut raft.Future
		switch len(args) {
		case 1:
			n.handClockOver(ctx, n.otherServers())
			fut = n.raft.LeadershipTransfer()
		case 2:
			s, ok := n.server(string(args[1]))
			if !ok {
				return command.Error("ERR no member with id " + string(args[1]))
			}
			n.handClockOver(ctx, []raft.Server{s})
			fut = n.raft.LeadershipTransferToServer(s.ID, s.Address)
		default:
			return command.Error(command.ErrArity(name))
		}
		if err := fut.Error(); err != nil {
			return raftError("RAFT.TRANSFER", err)
		}
		return command.OK
	}
	return replyNoAdminCommand
}

func raftError(what string, err error) []byte {
	if errors.Is(err, raft.ErrNotLeader) {
		return constReply("TRYAGAIN " + what + ": " + err.Error() + ", retry")
	}
	if errors.Is(err, raft.ErrLeadershipLost) {
		// The change was appended and may still commit under a new leader.
		return constReply("CLUSTERDOWN " + what + ": " + err.Error() + "; its outcome is unknown, check RAFT.INFO")
	}
	return constReply("ERR " + what + ": " + err.Error())
}

// server returns the member with id in the latest configuration.
func (n *Node) server(id string) (raft.Server, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Server{}, false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// raftInfo is RAFT.INFO: "field:value" lines as a bulk string.
func (n *Node) raftInfo() []byte {
	stats := n.raft.Stats()
	_, lid := n.Leader()
	lines := []string{
		"node_id:" + n.cfg.NodeID,
		"role:" + strings.ToLower(stats["state"]),
		"term:" + stats["term"],
		"leader_id:" + lid,
		"leader_client_addr:" + n.ClientAddr(lid),
		"commit_index:" + stats["commit_index"],
		"applied_index:" + itoa(n.fsm.AppliedIndex()),
	}
	f := n.raft.GetConfiguration()
	if f.Error() == nil {
		for i, s := range f.Configuration().Servers {
			lines = append(lines, "member"+strconv.Itoa(i)+":id="+string(s.ID)+",suffrage="+
				strings.ToLower(s.Suffrage.String())+",raft_addr="+string(s.Address)+
				",client_addr="+n.ClientAddr(string(s.ID)))
		}
	}
	return command.AppendBulkString(nil, strings.Join(lines, "\r\n")+"\r\n")
}

// clientHostPort returns a member's client host and port, or its Raft
// address when it has not published one.
func (n *Node) clientHostPort(s raft.Server) (host, port string) {
	if a := n.ClientAddr(string(s.ID)); a != "" {
		return splitAddr(a)
	}
	return splitAddr(string(s.Address))
}
