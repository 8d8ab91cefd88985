package cluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel's "+switch-master" (issue #5): Sentinel-aware clients (go-redis's
// failover client, Jedis's sentinel pool) subscribe to it on the sentinel
// they asked for the master, and move their connections when it says
// "<name> <old-ip> <old-port> <new-ip> <new-port>". Without it they would
// keep talking to a deposed leader, which forwards: correct, but an extra
// hop for every command. Each node publishes it to its own subscribers when
// it sees the leader change (not when it first learns of a leader), once
// the new leader's client address is known, for every master name a client
// asked this node about (the client ignores other names) and
// Config.MasterName (sentinel-master-name), "mymaster" if none.

const (
	switchChannel = "+switch-master"
	// maxMasterNames bounds the master names remembered.
	maxMasterNames = 16
	// switchRecheck is how often a pending notice is retried while the new
	// leader's client address is unknown.
	switchRecheck = 100 * time.Millisecond
)

// switchNotices is the node's +switch-master state.
type switchNotices struct {
	publish atomic.Pointer[func(channel string, message []byte) int]
	mu      sync.Mutex
	names   []string // master names asked about, oldest first
}

// SetPublish is given the front end's PUBLISH (cmd/raftset wires resp.Server.Publish).
func (n *Node) SetPublish(publish func(channel string, message []byte) int) {
	n.sw.publish.Store(&publish)
}

// rememberMasterName records a master name a Sentinel query used.
func (n *Node) rememberMasterName(name string) {
	n.sw.mu.Lock()
	defer n.sw.mu.Unlock()
	for _, s := range n.sw.names {
		if s == name {
			return
		}
	}
	if len(n.sw.names) == maxMasterNames {
		n.sw.names = n.sw.names[1:]
	}
	n.sw.names = append(n.sw.names, name)
}

// masterNames are the names +switch-master goes out under: those asked
// about, and Config.MasterName.
func (n *Node) masterNames() []string {
	n.sw.mu.Lock()
	names := append([]string(nil), n.sw.names...)
	n.sw.mu.Unlock()
	if cfg := n.cfg.MasterName; cfg != "" && !slices.Contains(names, cfg) {
		names = append(names, cfg)
	}
	if len(names) == 0 {
		names = []string{"mymaster"}
	}
	return names
}

// runSwitchNotices publishes +switch-master when the leader changes.
func (n *Node) runSwitchNotices() {
	defer n.wg.Done()
	ch, stop := n.leaderObservations()
	defer stop()
	t := time.NewTicker(switchRecheck)
	defer t.Stop()
	_, known := n.Leader() // the leader last announced (or first seen)
	for {
		select {
		case <-ch:
		case <-t.C:
		case <-n.stopCh:
			return
		}
		_, lid := n.Leader()
		if lid == "" || lid == known {
			continue
		}
		if known == "" {
			known = lid // the first leader this node sees is no switch
			continue
		}
		newAddr := n.memberClientAddr(lid)
		if newAddr == "" {
			continue // retried on the next tick, once it is published
		}
		n.announceSwitch(n.memberClientAddr(known), newAddr)
		known = lid
	}
}

// announceSwitch publishes one +switch-master per remembered master name.
func (n *Node) announceSwitch(oldAddr, newAddr string) {
	pub := n.sw.publish.Load()
	if pub == nil {
		return
	}
	oldHost, oldPort := splitAddr(oldAddr)
	newHost, newPort := splitAddr(newAddr)
	for _, name := range n.masterNames() {
		msg := name + " " + oldHost + " " + oldPort + " " + newHost + " " + newPort
		receivers := (*pub)(switchChannel, []byte(msg))
		n.log.Info("published +switch-master", "message", msg, "receivers", receivers)
	}
}

// memberClientAddr is a member's client address: its published one, or
// this node's own, empty if unknown.
func (n *Node) memberClientAddr(id string) string {
	if id == n.cfg.NodeID && n.cfg.ClientAddr != "" {
		return n.cfg.ClientAddr
	}
	return n.ClientAddr(id)
}
