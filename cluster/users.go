package cluster

import "raftset/internal/acl"

// Users returns the ACL users the state machine keeps (replicated through
// the log), for the front end to authenticate and check commands. It is nil
// for a state machine without users (the node's own test fakes).
func (n *Node) Users() *acl.Registry {
	if u, ok := n.fsm.(interface{ Users() *acl.Registry }); ok {
		return u.Users()
	}
	return nil
}
