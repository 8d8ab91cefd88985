//go:build jepsen

package integration

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// memberCluster is a Cluster whose membership the nemesis can change.
type memberCluster interface {
	Cluster
	// Remove asks the cluster (through a node other than node, the
	// leader when known) to remove node; the node keeps running.
	Remove(node string) error
	// Rejoin stops node, empties its data dir when wipe is set, and
	// starts it with --join instead of --peers.
	Rejoin(node string, wipe bool) error
	// WaitVoter polls (bounded) until node is a voter again.
	WaitVoter(node string, within time.Duration) error
}

// viaNode picks the node to send a membership command through: the
// leader unless it is the excluded node, else any other running one.
func (c *procCluster) viaNode(exclude string) string {
	if l := c.Leader(3 * time.Second); l != "" && l != exclude {
		return l
	}
	for _, id := range c.order {
		if id != exclude && c.Running(id) && !c.Paused(id) {
			return id
		}
	}
	return ""
}

// errRemovedDespiteTryAgain: RAFT.REMOVE said -TRYAGAIN, and a retry
// found the node already removed: the first attempt did happen.
var errRemovedDespiteTryAgain = errors.New("RAFT.REMOVE answered -TRYAGAIN, yet the node was removed")

func (c *procCluster) Remove(node string) error {
	var last error
	// The nemesis may retry: it is not a client under test. -TRYAGAIN
	// should mean the removal was not proposed (no leader at that moment).
	for i := 0; i < 20; i++ {
		via := c.viaNode(node)
		if via == "" {
			return fmt.Errorf("remove %s: no other node is running", node)
		}
		err := adminCommand(c.Addr(via), "RAFT.REMOVE", node)
		if err != nil && last != nil && strings.Contains(err.Error(), "no member with id") {
			if strings.Contains(last.Error(), "CLUSTERDOWN") {
				return nil // the indeterminate attempt did happen
			}
			return fmt.Errorf("%w: %v, then %v", errRemovedDespiteTryAgain, last, err)
		}
		last = err
		// -CLUSTERDOWN: leadership was lost after the change was appended;
		// it may or may not have committed, so ask again.
		if last == nil || !strings.Contains(last.Error(), "TRYAGAIN") && !strings.Contains(last.Error(), "CLUSTERDOWN") {
			return last
		}
		time.Sleep(250 * time.Millisecond)
	}
	return last
}

func (c *procCluster) Rejoin(node string, wipe bool) error {
	via := c.viaNode(node)
	if via == "" {
		return fmt.Errorf("rejoin %s: no other node is running", node)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[node]
	if err := c.stopNode(n); err != nil {
		return err
	}
	if wipe {
		if err := os.RemoveAll(n.dir); err != nil {
			return fmt.Errorf("wipe %s: %w", n.dir, err)
		}
	}
	n.join = c.nodes[via].peerAddr
	return c.start(n)
}

func (c *procCluster) WaitVoter(node string, within time.Duration) error {
	return waitVoter(c, node, within)
}

// waitVoter polls node's RAFT.INFO until the node follows or leads and its
// configuration lists it as a voter.
func waitVoter(cl Cluster, node string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for i := 0; i < 1000; i++ {
		info, err := raftInfo(cl.Addr(node), time.Second)
		if err == nil {
			last = fmt.Sprintf("role %s, members %v", info.role, info.members)
			if (info.role == "follower" || info.role == "leader") && info.members[node] == "voter" {
				return nil
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not a voter again within %v: %s", node, within, last)
}

// raftInfoReply is the part of RAFT.INFO the harness reads.
type raftInfoReply struct {
	id, role, leader string
	term             uint64
	members          map[string]string // id → suffrage
}

func raftInfo(addr string, timeout time.Duration) (raftInfoReply, error) {
	c, err := dialConn(addr, timeout)
	if err != nil {
		return raftInfoReply{}, err
	}
	defer c.Close()
	return doRaftInfo(c)
}

func doRaftInfo(c *conn) (raftInfoReply, error) {
	r, err := c.Do("RAFT.INFO")
	if err != nil {
		return raftInfoReply{}, err
	}
	if r.Kind != '$' {
		return raftInfoReply{}, errors.New("RAFT.INFO: " + r.Str)
	}
	return parseRaftInfo(r.Str), nil
}

func parseRaftInfo(s string) raftInfoReply {
	out := raftInfoReply{members: map[string]string{}}
	for _, line := range strings.Split(s, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch {
		case k == "node_id":
			out.id = v
		case k == "role":
			out.role = v
		case k == "leader_id":
			out.leader = v
		case k == "term":
			fmt.Sscan(v, &out.term)
		case strings.HasPrefix(k, "member"):
			var id, suffrage string
			for _, kv := range strings.Split(v, ",") {
				a, b, _ := strings.Cut(kv, "=")
				switch a {
				case "id":
					id = b
				case "suffrage":
					suffrage = b
				}
			}
			out.members[id] = suffrage
		}
	}
	return out
}
