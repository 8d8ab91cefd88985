package fsm

import (
	"bytes"
	"fmt"
	"strings"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/glob"
)

// ACL users are replicated state: ACL SETUSER, ACL DELUSER and ACL LOAD
// travel through the log as "acl ..." command ops and every replica applies
// them to its Registry in log order, so all nodes enforce the same rules.
// The front end reads the registry (Users) to authenticate and check each
// command, and answers the other ACL subcommands from it.
//
// ACL LOAD reaches the log as "acl load <filename> <contents>": the node that
// ran it read its own aclfile, and every replica applies the same contents
// (the two-argument form from clients never reaches the log: the front end
// rewrites it).
//
// Snapshots carry the users as the AUX field AuxACL (Registry.Marshal) when
// they differ from a new node's, so a snapshot of a cluster that never used
// ACL is byte for byte what it was before users existed. The users are not
// in DEBUG DIGEST: the digest is Redis's digest of the dataset, comparable
// with a redis-server holding the same keys, and Redis leaves users out too.
//
// requirepass is not replicated: it is a local overlay of the node on the
// default user (acl.Registry.SetRequirePass), set by the node at start.

// AuxACL is the snapshot AUX field holding the users.
const AuxACL = "raftset-acl"

// newUsers returns the registry of a new node: only the default user.
func newUsers() *acl.Registry {
	r, err := acl.New(acl.TableCommands(command.Commands()), globMatch)
	if err != nil {
		panic("fsm: ACL command table: " + err.Error())
	}
	return r
}

// globMatch matches key and channel patterns as KEYS does.
func globMatch(pattern, s []byte) bool { return glob.Match(pattern, s, false) }

// Users returns the node's ACL users. The registry is safe for concurrent
// use; only the state machine changes it (besides the node-local
// requirepass overlay).
func (f *FSM) Users() *acl.Registry { return f.users }

// cmdACL applies ACL SETUSER, DELUSER and LOAD.
func cmdACL(c *execCtx, args [][]byte) {
	if strings.EqualFold(string(args[1]), "load") {
		if len(args) != 4 {
			c.err(command.ErrArity("acl|load"))
			return
		}
		if err := c.f.users.LoadFile(string(args[2]), args[3]); err != nil {
			c.err("ERR " + err.Error())
			return
		}
		c.out = append(c.out, command.OK...)
		return
	}
	if !acl.Writes(args) {
		c.err("ERR ACL " + strings.ToUpper(string(args[1])) + " does not change the users: it is not applied through the log")
		return
	}
	c.out = c.f.users.Exec(c.out, args, acl.Session{})
}

// prepareACL refuses, before it reaches the log, an ACL SETUSER this
// node's users would refuse, and an ACL LOAD of a file that does not parse,
// with the replies they would get. The users may still change before the
// entry applies; applying is all or nothing, so a refusal then is the same
// on every replica.
func (f *FSM) prepareACL(args [][]byte) command.Op {
	ok := command.Op{Kind: command.OpCommand, Args: args}
	switch {
	case len(args) >= 3 && strings.EqualFold(string(args[1]), "setuser"):
		if err := f.users.CheckSetUser(string(args[2]), args[3:]); err != nil {
			return command.Op{Kind: command.OpReply, Reply: acl.AppendError(nil, err)}
		}
	case len(args) == 4 && strings.EqualFold(string(args[1]), "load"):
		if _, msg := f.users.ParseFile(string(args[2]), args[3]); msg != "" {
			return errOp("ERR " + msg + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
		}
	}
	return ok
}

// restoreUsers replaces the users with a snapshot's (nil: a new node's).
func (f *FSM) restoreUsers(b []byte) error {
	if b == nil {
		b = f.noUsers
	}
	if err := f.users.Unmarshal(b); err != nil {
		return fmt.Errorf("%w: AUX %s: %w", ErrSnapshot, AuxACL, err)
	}
	return nil
}

// usersAux is the users' AUX value for a snapshot, nil when they are a new
// node's; f.mu is held.
func (f *FSM) usersAux() []byte {
	b := f.users.Marshal()
	if bytes.Equal(b, f.noUsers) {
		return nil
	}
	return b
}
