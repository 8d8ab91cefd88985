package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Membership (design brief §1, §8; peers.md §0 item 7): RAFT.JOIN adds a
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
	for {
		select {
		case <-t.C:
		case <-n.stopCh:
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		if err := n.membershipStep(ctx); err != nil {
			n.log.Debug("membership step", "error", err)
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
		reply := n.onLeader(ctx, [][]byte{[]byte(CmdNode), []byte(n.cfg.NodeID), []byte(n.cfg.ClientAddr)})
		if command.IsError(reply) {
			return fmt.Errorf("publish client address: %s", strings.TrimSpace(string(reply)))
		}
	}
	if self.Suffrage == raft.Nonvoter {
		applied := strconv.FormatUint(n.fsm.AppliedIndex(), 10)
		reply := n.onLeader(ctx, [][]byte{[]byte(cmdPromote), []byte(n.cfg.NodeID), []byte(applied)})
		if command.IsError(reply) {
			return fmt.Errorf("promotion: %s", strings.TrimSpace(string(reply)))
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
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", n.cfg.Join)
	if err != nil {
		return fmt.Errorf("join via %s: %w", n.cfg.Join, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	pc := &peerConn{addr: n.cfg.Join, c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}
	if err := pc.handshake(ctx, n.peerAuth()); err != nil {
		return fmt.Errorf("join via %s: authenticate: %w", n.cfg.Join, err)
	}
	args := [][]byte{[]byte("raft.join"), []byte(n.cfg.NodeID), []byte(n.raftAddr())}
	if n.cfg.ClientAddr != "" {
		args = append(args, []byte(n.cfg.ClientAddr))
	}
	reply, err := pc.roundTrip(args)
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

// onLeader runs a leader-only command here when this node leads, or relays
// it to the leader.
func (n *Node) onLeader(ctx context.Context, args [][]byte) []byte {
	if n.raft.State() == raft.Leader {
		return n.leaderCommand(ctx, args)
	}
	// Wrapped so that the receiver never relays it again (no loops between
	// nodes with stale views of the leader).
	reply, err := n.relay(ctx, append([][]byte{[]byte(cmdOnLeader)}, args...))
	if err != nil {
		if errors.Is(err, errNotSent) {
			return fixed("TRYAGAIN " + strings.ToUpper(string(args[0])) + " was not run: no reachable leader, retry")
		}
		return fixed("CLUSTERDOWN " + strings.ToUpper(string(args[0])) + ": the connection to the leader failed; it may or may not have been done")
	}
	return reply
}

// serveOnLeader is raftset.onleader: a leader-only command relayed by a
// follower, run here only if this node leads.
func (n *Node) serveOnLeader(ctx context.Context, args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity(cmdOnLeader))
	}
	if n.raft.State() != raft.Leader {
		return fixed("TRYAGAIN " + strings.ToUpper(string(args[1])) + " was not run: this node is no longer the leader, retry")
	}
	return n.leaderCommand(ctx, args[1:])
}

// leaderCommand runs a leader-only command on the leader.
func (n *Node) leaderCommand(ctx context.Context, args [][]byte) []byte {
	name := strings.ToLower(string(args[0]))
	timeout := n.cfg.ApplyTimeout
	switch name {
	case CmdNode:
		if len(args) != 3 {
			return command.Error(command.ErrArity(name))
		}
		return n.publishNodeAddr(ctx, string(args[1]), string(args[2]))
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
			n.publishNodeAddr(ctx, string(args[1]), string(args[3]))
		}
		return command.OK
	case cmdPromote:
		if len(args) != 3 {
			return command.Error(command.ErrArity(name))
		}
		reported, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil {
			return command.Error(command.ErrNotInteger)
		}
		if lag := n.promoteLag(reported); lag > n.cfg.PromoteLag {
			n.st.promotionsRefused.Add(1)
			return fixed("TRYAGAIN not promoted: " + string(args[1]) + " is " + itoa(lag) +
				" entries behind the leader (promote-lag " + itoa(n.cfg.PromoteLag) + ")")
		}
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return raftError("promote", err)
		}
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == string(args[1]) {
				if s.Suffrage == raft.Voter {
					return command.OK
				}
				if err := n.raft.AddVoter(s.ID, s.Address, 0, timeout).Error(); err != nil {
					return raftError("promote", err)
				}
				n.log.Info("promoted member to voter", "id", s.ID)
				return command.OK
			}
		}
		return command.Error("ERR no member with id " + string(args[1]))
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
	case "raft.transfer":
		var fut raft.Future
		switch len(args) {
		case 1:
			fut = n.raft.LeadershipTransfer()
		case 2:
			s, ok := n.server(string(args[1]))
			if !ok {
				return command.Error("ERR no member with id " + string(args[1]))
			}
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
		return fixed("TRYAGAIN " + what + ": " + err.Error() + ", retry")
	}
	if errors.Is(err, raft.ErrLeadershipLost) {
		// The change was appended and may still commit under a new leader.
		return fixed("CLUSTERDOWN " + what + ": " + err.Error() + "; its outcome is unknown, check RAFT.INFO")
	}
	return fixed("ERR " + what + ": " + err.Error())
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

// sentinel answers the Sentinel queries clients use to find the master
// (any master name): get-master-addr-by-name, sentinels, replicas/slaves,
// master/masters.
func (n *Node) sentinel(args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity("sentinel"))
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "get-master-addr-by-name", "master", "replicas", "slaves", "sentinels":
		if len(args) > 2 {
			n.rememberMasterName(string(args[2])) // for +switch-master (switch.go)
		}
	}
	switch sub {
	case "get-master-addr-by-name":
		if len(args) != 3 {
			return command.Error(command.ErrArity("sentinel|" + sub))
		}
		_, addr := n.leaderClient()
		if addr == "" {
			return command.NullArray
		}
		host, port := splitAddr(addr)
		out := command.AppendArray(nil, 2)
		out = command.AppendBulkString(out, host)
		return command.AppendBulkString(out, port)
	case "sentinels":
		return command.AppendArray(nil, 0)
	case "replicas", "slaves":
		lid, _ := n.leaderClient()
		var reps []raft.Server
		f := n.raft.GetConfiguration()
		if f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if string(s.ID) != lid {
					reps = append(reps, s)
				}
			}
		}
		out := command.AppendArray(nil, len(reps))
		for _, s := range reps {
			host, port := n.clientHostPort(s)
			kvs := []string{"name", host + ":" + port, "ip", host, "port", port, "runid", string(s.ID),
				"flags", "slave", "master-link-status", "ok"}
			out = command.AppendArray(out, len(kvs))
			for _, v := range kvs {
				out = command.AppendBulkString(out, v)
			}
		}
		return out
	case "master", "masters":
		lid, addr := n.leaderClient()
		if addr == "" {
			if sub == "masters" {
				return command.AppendArray(nil, 0)
			}
			return command.Error("ERR No such master with that name")
		}
		host, port := splitAddr(addr)
		name := "mymaster"
		if len(args) > 2 {
			name = string(args[2])
		}
		kvs := []string{"name", name, "ip", host, "port", port, "runid", lid, "flags", "master"}
		out := []byte{}
		if sub == "masters" {
			out = command.AppendArray(out, 1)
		}
		out = command.AppendArray(out, len(kvs))
		for _, v := range kvs {
			out = command.AppendBulkString(out, v)
		}
		return out
	}
	return command.Error("ERR unknown subcommand '" + string(args[1]) + "'. Try SENTINEL HELP.")
}
