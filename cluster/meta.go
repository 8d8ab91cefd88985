package cluster

import (
	"bytes"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/snapshot"
)

// Node metadata (design brief §1): every node knows every other node's
// client address, so that a follower can forward to the leader and ROLE,
// INFO and SENTINEL can name it.
//
// Each node, once it sees a leader, proposes the internal write
// "raftset.node <id> <client-addr>" whenever the replicated value differs
// from its own (a follower sends it to the leader, which proposes it). The
// state machine does not know the command (it answers an error reply, which
// nobody reads, and changes nothing); metaFSM, the wrapper Raft applies
// entries through, records it in an id→address map before handing the entry
// on. The map travels in every snapshot as the AUX field AuxNodes and is
// read back on restore, so it is part of the replicated state: every node
// applies the same entries and ends with the same map.

// CmdNode is the internal node-metadata command.
const CmdNode = "raftset.node"

// AuxNodes is the snapshot AUX field holding the id→client-address map:
// "id=addr,id=addr" sorted by id.
const AuxNodes = "raftset-nodes"

var cmdNodeBytes = []byte(CmdNode)

// metaFSM wraps the state machine to track node metadata.
type metaFSM struct {
	stateMachine
	mu    sync.Mutex
	addrs map[string]string

	// checkRestore, when set, may refuse a restore before it starts
	// (stalesnap.go).
	checkRestore func() error
}

func newMetaFSM(f stateMachine) *metaFSM {
	return &metaFSM{stateMachine: f, addrs: map[string]string{}}
}

// observe records the raftset.node ops of l. User data almost never holds
// the command's name, so most entries cost one bytes.Contains.
func (m *metaFSM) observe(l *raft.Log) {
	if l.Type != raft.LogCommand || !bytes.Contains(l.Data, cmdNodeBytes) {
		return
	}
	e, err := command.Decode(l.Data)
	if err != nil {
		return // the state machine panics on it
	}
	for _, op := range e.Ops {
		if op.Kind == command.OpCommand && len(op.Args) == 3 && string(op.Args[0]) == CmdNode {
			m.mu.Lock()
			m.addrs[string(op.Args[1])] = string(op.Args[2])
			m.mu.Unlock()
		}
	}
}

func (m *metaFSM) Apply(l *raft.Log) interface{} {
	m.observe(l)
	return m.stateMachine.Apply(l)
}

// ApplyBatch keeps the state machine's batching (raft.BatchingFSM).
func (m *metaFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	for _, l := range logs {
		m.observe(l)
	}
	if b, ok := m.stateMachine.(raft.BatchingFSM); ok {
		return b.ApplyBatch(logs)
	}
	// As Raft does for a state machine without ApplyBatch: commands only.
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = m.stateMachine.Apply(l)
		}
	}
	return out
}

// Restore restores the state machine, then the map from its AUX field.
func (m *metaFSM) Restore(rc io.ReadCloser) error {
	if m.checkRestore != nil {
		if err := m.checkRestore(); err != nil {
			rc.Close()
			return err
		}
	}
	if err := m.stateMachine.Restore(rc); err != nil {
		return err
	}
	addrs := map[string]string{}
	if a, ok := m.stateMachine.(interface{ RestoredAux() []snapshot.AuxField }); ok {
		for _, f := range a.RestoredAux() {
			if f.Key == AuxNodes {
				addrs = parseNodes(f.Value)
			}
		}
	}
	m.mu.Lock()
	m.addrs = addrs
	m.mu.Unlock()
	return nil
}

// clientAddr returns the replicated client address of node id.
func (m *metaFSM) clientAddr(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addrs[id]
}

// aux encodes the map for a snapshot. Raft takes snapshots on its FSM
// goroutine, so the map is the one of the snapshot's index.
func (m *metaFSM) aux() snapshot.AuxField {
	m.mu.Lock()
	ids := make([]string, 0, len(m.addrs))
	for id := range m.addrs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id + "=" + m.addrs[id])
	}
	m.mu.Unlock()
	return snapshot.AuxField{Key: AuxNodes, Value: b.String()}
}

func parseNodes(v string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if id, addr, ok := strings.Cut(kv, "="); ok && id != "" {
			out[id] = addr
		}
	}
	return out
}

// ClientAddr returns the client address node id published, empty if
// unknown.
func (n *Node) ClientAddr(id string) string { return n.meta.clientAddr(id) }

// leaderClient returns the leader's id and client address ("" if unknown).
func (n *Node) leaderClient() (id, addr string) {
	_, lid := n.Leader()
	if lid == "" {
		return "", ""
	}
	if lid == n.cfg.NodeID && n.cfg.ClientAddr != "" {
		return lid, n.cfg.ClientAddr
	}
	return lid, n.meta.clientAddr(lid)
}
