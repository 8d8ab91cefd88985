package cluster

import (
	"raftset/fsm"
	"raftset/internal/acl"
)

// Users returns the ACL users the state machine keeps (replicated through
// the log), for the front end to authenticate and check commands. It is nil
// for a state machine without users (the node's own test fakes).
func (n *Node) Users() *acl.Registry {
	if u, ok := n.fsm.(interface{ Users() *acl.Registry }); ok {
		return u.Users()
	}
	return nil
}

// OnWritten has fn called, on every replica, with the keys each applied
// entry changed (and whether it emptied the keyspace), for the front end's
// CLIENT TRACKING; nil stops the calls. fn runs on the apply path and must
// only hand the keys over. A state machine that cannot tell does nothing.
func (n *Node) OnWritten(fn func(keys [][]byte, flushed bool)) {
	w, ok := n.fsm.(interface{ OnWritten(fsm.WrittenFunc) })
	if !ok {
		return
	}
	if fn == nil {
		w.OnWritten(nil)
		return
	}
	w.OnWritten(fn)
}
