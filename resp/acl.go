package resp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"raftset/internal/acl"
	"raftset/internal/command"
	"raftset/internal/glob"
)

// ACL users. The users live in the store (Store.Users: the state machine
// applies ACL SETUSER, DELUSER and LOAD from the log); the front end
// authenticates connections against them, checks every command before it
// runs or is queued, answers the other ACL subcommands from the node's copy,
// and keeps the node's ACL LOG.
//
// A connection holds its *acl.User and looks it up again only when the
// registry's generation moved, so the check costs one atomic load for a user
// allowed everything (the default user, normally). A connection whose user
// was deleted is closed, by its next command or by the ticker, as Redis
// frees the clients of a deleted user.

// aclState is the server's side of ACL users.
type aclState struct {
	users *acl.Registry
	file  string // aclfile: ACL LOAD and ACL SAVE; empty: none

	logMu sync.Mutex
	log   *acl.Log // node-local, as in Redis

	lastGen uint64 // the generation the ticker last swept at (ticker only)
}

func globMatch(pattern, s []byte) bool { return glob.Match(pattern, s, false) }

// initACL takes the store's users, or keeps users of its own for a store
// without them, and applies requirepass as the default user's password.
func (s *Server) initACL() {
	users := s.store.Users()
	if users == nil {
		var err error
		users, err = acl.New(acl.TableCommands(s.table), globMatch)
		if err != nil {
			panic("resp: ACL command table: " + err.Error())
		}
	}
	s.acl.users = users
	s.acl.file = s.cfg.ACLFile
	s.acl.log = acl.NewLog(0, nil)
	s.setPass(s.cfg.RequirePass)
}

// aclUser returns the connection's user as it is now, or nil when it was
// deleted.
func (c *client) aclUser() *acl.User {
	users := c.s.acl.users
	if g := users.Generation(); g != c.ugen || c.u == nil {
		c.ugen = g
		u, _ := users.User(c.userName())
		c.u = u
	}
	return c.u
}

func (c *client) userName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user
}

// setUser makes the connection run as user (after AUTH).
func (c *client) setUser(user string) {
	c.mu.Lock()
	c.user = user
	c.mu.Unlock()
	c.u = nil
}

// aclExempt reports whether the connection's commands skip the ACL:
// another node's, proven by the node secret (it can write anything through
// Raft anyway).
func (c *client) aclExempt() bool { return c.node && c.s.cfg.NodeSecret != "" }

// aclCheck checks a command against the connection's user before it runs
// or is queued: the error text (a -NOPERM reply), or "". A denial goes to
// the ACL LOG. A connection whose user was deleted is closed (gone true).
func (c *client) aclCheck(spec *command.Spec, args [][]byte, context string) (msg string, gone bool) {
	if spec.Has(command.Internal) || c.aclExempt() {
		return "", false
	}
	u := c.aclUser()
	if u == nil {
		c.dropDeletedUser()
		return "", true
	}
	if u.Unrestricted() {
		return "", false
	}
	cmd, sub, keys := aclArgs(spec, args)
	err := c.s.acl.users.CheckUser(u, cmd, sub, keys)
	if err == nil {
		return "", false
	}
	d, ok := err.(*acl.DeniedError)
	if !ok {
		return "ERR " + err.Error(), false
	}
	c.aclLogEvent(d.Event(context, string(c.infoLine(nil))))
	return d.Error(), false
}

// aclRecheck is EXEC's check of a queued command: the rules may have
// changed since it was queued. Redis answers it in EXEC's array with this
// text and runs the others.
func (c *client) aclRecheck(spec *command.Spec, args [][]byte) []byte {
	if spec.Has(command.Internal) || c.aclExempt() {
		return nil
	}
	u := c.aclUser()
	if u == nil || u.Unrestricted() {
		return nil // a deleted user's connection is closed by the ticker
	}
	cmd, sub, keys := aclArgs(spec, args)
	err := c.s.acl.users.CheckUser(u, cmd, sub, keys)
	d, ok := err.(*acl.DeniedError)
	if !ok {
		return nil
	}
	c.aclLogEvent(d.Event("multi", string(c.infoLine(nil))))
	reason := "no permission"
	switch d.Reason {
	case acl.ReasonCommand:
		reason = "no permission to execute the command or subcommand"
	case acl.ReasonKey:
		reason = "no permission to touch the specified keys"
	case acl.ReasonChannel:
		reason = "no permission to access one of the channels used as arguments"
	}
	return command.Error("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. " +
		"This command is no longer allowed for the following reason: " + reason)
}

// aclArgs gives Registry.Check what it needs of a command line: the
// top-level name, the first argument, and the keys and channels with the
// access their key specifications say (Redis's ACCESS: read; INSERT,
// UPDATE, DELETE: write).
func aclArgs(spec *command.Spec, args [][]byte) (cmd, sub string, keys []acl.KeyAccess) {
	cmd = spec.Name
	if i := strings.IndexByte(cmd, '|'); i >= 0 {
		cmd = cmd[:i]
	}
	if len(args) > 1 {
		sub = string(args[1])
	}
	switch spec.Name {
	case "subscribe", "psubscribe":
		for _, a := range args[1:] {
			keys = append(keys, acl.KeyAccess{Key: a, Channel: true, Pattern: spec.Name == "psubscribe"})
		}
		return cmd, sub, keys
	case "publish":
		return cmd, sub, []acl.KeyAccess{{Key: args[1], Channel: true}}
	}
	pos, flags, _ := spec.FindKeys(args)
	for i, p := range pos {
		fl := flags[i]
		if spec.Name == "set" {
			fl = setKeyFlags(args)
		}
		k := acl.KeyAccess{Key: args[p]}
		for _, f := range fl {
			switch f {
			case "access":
				k.Read = true
			case "insert", "update", "delete":
				k.Write = true
			}
		}
		keys = append(keys, k)
	}
	return cmd, sub, keys
}

// aclResolve is ACL DRYRUN's view of a command line, with Redis's errors.
func (s *Server) aclResolve(args [][]byte) (string, string, []acl.KeyAccess, error) {
	spec := s.table.Lookup(args[0])
	if spec != nil && len(spec.Subs) > 0 && len(args) > 1 {
		spec = s.sub(spec, args[1])
	}
	if spec == nil || spec.Has(command.Internal) {
		return "", "", nil, fmt.Errorf("ERR Command '%s' not found", args[0])
	}
	if !spec.CheckArity(len(args)) {
		return "", "", nil, fmt.Errorf("ERR wrong number of arguments for '%s' command", spec.Name)
	}
	cmd, sub, keys := aclArgs(spec, args)
	return cmd, sub, keys, nil
}

func (c *client) aclLogEvent(ev acl.Event) {
	l := &c.s.acl
	l.logMu.Lock()
	l.log.Add(ev)
	l.logMu.Unlock()
}

// dropDeletedUser closes a connection whose user no longer exists.
func (c *client) dropDeletedUser() {
	c.quit = true
	_ = c.fc.Conn.Close()
}

// dropDeletedUsers closes the connections of deleted users once the users
// changed (the ticker), so that an idle connection does not outlive its
// user.
func (s *Server) dropDeletedUsers() {
	g := s.acl.users.Generation()
	if g == s.acl.lastGen {
		return
	}
	s.acl.lastGen = g
	for _, c := range s.clientList() {
		// Node connections run as the default user, which cannot be
		// deleted; c.node belongs to the connection's goroutine.
		if _, ok := s.acl.users.User(c.userName()); !ok {
			s.log.Info("closing a connection: its ACL user was deleted", "addr", c.addr, "user", c.userName())
			_ = c.fc.Conn.Close()
		}
	}
}

// cmdACL answers the ACL subcommands that do not change the users (those
// go through the log) from this node's copy.
func (c *client) cmdACL(dst []byte, spec *command.Spec, args [][]byte) []byte {
	s := c.s
	switch spec.Name {
	case "acl|save":
		return s.aclSave(dst)
	case "acl|log":
		s.acl.logMu.Lock()
		defer s.acl.logMu.Unlock()
	}
	return s.acl.users.Exec(dst, args, acl.Session{User: c.userName(), Log: s.acl.log, Resolve: s.aclResolve})
}

// aclLoadArgs turns ACL LOAD into the command the log carries: "acl load
// <filename> <contents>", read here from this node's aclfile, so that every
// replica loads the same users. The file is checked first so that an error
// is answered without a log entry. It returns the error reply instead when
// there is nothing to propose.
func (s *Server) aclLoadArgs(args [][]byte) ([][]byte, []byte) {
	if s.acl.file == "" {
		return nil, command.Error(acl.NoFileError)
	}
	data, err := os.ReadFile(s.acl.file)
	if err != nil {
		s.log.Warn("ACL LOAD: cannot read the aclfile", "file", s.acl.file, "error", err)
		return nil, command.Error("ERR Error loading ACLs, opening file '" + s.acl.file + "': " + errText(err))
	}
	if _, msg := s.acl.users.ParseFile(s.acl.file, data); msg != "" {
		return nil, command.Error("ERR " + msg + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	return [][]byte{args[0], args[1], []byte(s.acl.file), data}, nil
}

// errText is an os error's cause as C's strerror words it.
func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	s := err.Error()
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// aclSave is ACL SAVE: this node's users, written to its aclfile (through a
// temporary file and a rename, as Redis does).
func (s *Server) aclSave(dst []byte) []byte {
	if s.acl.file == "" {
		return command.AppendError(dst, acl.NoFileError)
	}
	if err := writeFileAtomic(s.acl.file, s.acl.users.FormatFile()); err != nil {
		s.log.Warn("ACL SAVE failed", "file", s.acl.file, "error", err)
		return command.AppendError(dst, "ERR There was an error trying to save the ACLs. Please check the server logs for more information")
	}
	return append(dst, command.OK...)
}

func writeFileAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("rename to %s: %w", name, err)
	}
	return nil
}

// authenticate checks a user's password (AUTH user pass, HELLO ... AUTH):
// the error text, or "" once the connection runs as user. A failure is
// logged, counted and added to the ACL LOG, and leaves the connection as it
// was. cmd is the command as the client typed it (the log's object).
func (c *client) authenticate(user, pass, cmd []byte) string {
	users := c.s.acl.users
	if !users.Authenticate(user, pass) {
		reason := "wrong password"
		if u, ok := users.User(string(user)); !ok {
			reason = "unknown user"
		} else if !u.Enabled() {
			reason = "user is disabled"
		}
		c.authFailed(user, reason)
		c.aclLogEvent(acl.AuthEvent(string(user), string(cmd), "toplevel", string(c.infoLine(nil))))
		return command.ErrWrongPass
	}
	c.authed = true
	c.setUser(string(user))
	return ""
}

// isACLLoad reports whether spec is ACL LOAD (rewritten before the log).
func isACLLoad(spec *command.Spec) bool { return spec.Name == "acl|load" }
