package cluster

import (
	"maps"

	"raftset/internal/command"
)

// The fake state machine's node metadata, as fsm keeps it.

// setNode runs with f.mu held. The map is replaced, not changed, like
// fsm's, so a restored fakeState never shares it.
func (f *fakeFSM) setNode(a *command.NodeAddr) {
	m := maps.Clone(f.nodes)
	if m == nil {
		m = map[string]string{}
	}
	m[a.ID] = a.Addr
	f.nodes = m
}

func (f *fakeFSM) ClientAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

func (f *fakeFSM) Halted() <-chan struct{} { return nil }

func (f *fakeFSM) HaltErr() error { return nil }
