package acl

import (
	"strings"
)

// Reason is why a command was denied, with Redis's ACL_DENIED_* meaning.
type Reason uint8

// Denial reasons; their String is ACL LOG's "reason" field.
const (
	ReasonCommand Reason = iota + 1
	ReasonKey
	ReasonAuth
	ReasonChannel
)

func (r Reason) String() string {
	switch r {
	case ReasonCommand:
		return "command"
	case ReasonKey:
		return "key"
	case ReasonAuth:
		return "auth"
	case ReasonChannel:
		return "channel"
	}
	return "unknown"
}

// KeyAccess is one key (or Pub/Sub channel) a command names, with how the
// command uses it. The server derives it from its key specs: Read for
// Redis's ACCESS flag, Write for INSERT, UPDATE or DELETE; a key with
// neither (EXISTS, TYPE) needs only a matching pattern.
type KeyAccess struct {
	Key   []byte
	Read  bool
	Write bool
	// Channel marks a Pub/Sub channel, checked against the & patterns after
	// all keys; Pattern marks a PSUBSCRIBE pattern, which must equal an &
	// pattern literally.
	Channel bool
	Pattern bool
}

// DeniedError is a command the user may not run. Error is the reply text
// (without the leading '-'), as Redis 7.2 words it.
type DeniedError struct {
	Reason  Reason
	User    string
	Command string // full command name, e.g. "get" or "config|get"
	Object  string // the command, key or channel, as ACL LOG shows it
}

func (e *DeniedError) Error() string {
	switch e.Reason {
	case ReasonKey:
		return "NOPERM No permissions to access a key"
	case ReasonChannel:
		return "NOPERM No permissions to access a channel"
	}
	return "NOPERM User " + e.User + " has no permissions to run the '" + e.Command + "' command"
}

// Verbose is the text ACL DRYRUN answers, naming the key or channel.
func (e *DeniedError) Verbose() string {
	switch e.Reason {
	case ReasonKey:
		return "User " + e.User + " has no permissions to access the '" + e.Object + "' key"
	case ReasonChannel:
		return "User " + e.User + " has no permissions to access the '" + e.Object + "' channel"
	}
	return "User " + e.User + " has no permissions to run the '" + e.Command + "' command"
}

// Event is the ACL LOG entry for this denial; context is "toplevel",
// "multi" or "lua", clientInfo the CLIENT INFO line of the connection.
func (e *DeniedError) Event(context, clientInfo string) Event {
	return Event{Reason: e.Reason, Context: context, Object: e.Object, Username: e.User, ClientInfo: clientInfo}
}

// Check is Redis's ACLCheckAllUserCommandPerm for a user's root selector:
// may user run cmd with these keys and channels? sub is the command's first
// argument ("" when there is none): for a command with subcommands it picks
// the subcommand, for others it is matched against +cmd|first-arg rules.
// The error is a *DeniedError; a user that no longer exists (deleted while
// a connection was authenticated as it) is denied every command.
func (r *Registry) Check(user, cmd, sub string, keys []KeyAccess) error {
	u, ok := r.User(user)
	if !ok {
		return &DeniedError{Reason: ReasonCommand, User: user, Command: strings.ToLower(cmd), Object: strings.ToLower(cmd)}
	}
	return r.checkUser(u, cmd, sub, keys)
}

func (r *Registry) checkUser(u *User, cmd, sub string, keys []KeyAccess) error {
	t := r.t
	id := t.lookup(cmd)
	if id < 0 || strings.IndexByte(cmd, '|') >= 0 {
		name := strings.ToLower(cmd)
		return &DeniedError{Reason: ReasonCommand, User: u.name, Command: name, Object: name}
	}
	if sub != "" && len(t.cmds[id].subs) > 0 {
		if sid := t.lookup(t.cmds[id].name + "|" + sub); sid >= 0 {
			id = sid
		}
	}
	c := &t.cmds[id]
	if !u.allCommands && !c.noAuth && !u.allowed[id] {
		allowed := false
		if sub != "" && c.parent < 0 {
			for _, a := range u.firstArgs[id] {
				if strings.EqualFold(a, sub) {
					allowed = true
					break
				}
			}
		}
		if !allowed {
			return &DeniedError{Reason: ReasonCommand, User: u.name, Command: c.name, Object: c.name}
		}
	}
	if !u.allKeys {
		for _, k := range keys {
			if !k.Channel && !r.keyAllowed(u, k) {
				return &DeniedError{Reason: ReasonKey, User: u.name, Command: c.name, Object: string(k.Key)}
			}
		}
	}
	if !u.allChannels {
		for _, k := range keys {
			if k.Channel && !r.channelAllowed(u, k) {
				return &DeniedError{Reason: ReasonChannel, User: u.name, Command: c.name, Object: string(k.Key)}
			}
		}
	}
	return nil
}

// keyAllowed is Redis's ACLSelectorCheckKey.
func (r *Registry) keyAllowed(u *User, k KeyAccess) bool {
	var need uint8
	if k.Read {
		need |= permRead
	}
	if k.Write {
		need |= permWrite
	}
	for _, p := range u.keys {
		if p.perm&need == need && r.match(p.pattern, k.Key) {
			return true
		}
	}
	return false
}

// channelAllowed is Redis's ACLCheckChannelAgainstList.
func (r *Registry) channelAllowed(u *User, k KeyAccess) bool {
	for _, p := range u.channels {
		if k.Pattern {
			if p == string(k.Key) {
				return true
			}
		} else if r.match([]byte(p), k.Key) {
			return true
		}
	}
	return false
}

// CheckKey is Redis's ACLUserCheckKeyPerm, for commands whose keys are
// known only while they run (SORT ... BY, scripts): may user access key
// for reading and/or writing?
func (r *Registry) CheckKey(user string, k KeyAccess) bool {
	u, ok := r.User(user)
	if !ok {
		return false
	}
	if k.Channel {
		return u.allChannels || r.channelAllowed(u, k)
	}
	return u.allKeys || r.keyAllowed(u, k)
}
