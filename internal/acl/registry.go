package acl

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Matcher reports whether s matches a glob pattern with Redis's rules
// (stringmatchlen). The server passes its own matcher, so key patterns
// match here exactly as KEYS and SCAN MATCH do.
type Matcher func(pattern, s []byte) bool

// Registry holds the ACL users of one node. Every node applies the same
// SETUSER and DELUSER in the same order (they travel through the Raft log),
// and the result depends on nothing else, so all nodes hold the same users.
// It is safe for concurrent use: checks run on connection goroutines while
// the state machine changes users.
type Registry struct {
	t     *table
	match Matcher
	// gen counts changes, so that a connection can keep its *User and
	// look it up again only after one.
	gen atomic.Uint64

	mu    sync.RWMutex
	users map[string]*User // replicated
	// requirePass is this node's requirepass: a local overlay that stands in
	// for the default user's passwords until the replicated users set them
	// (pinned). It is never marshaled.
	requirePass string
	// pinned is replicated: an ACL SETUSER default with a password rule, or
	// an ACL LOAD of a file defining the default user, happened.
	pinned bool
	// def is the default user as checked and shown: users["default"] with
	// the overlay applied.
	def *User
}

// New returns a registry holding only the default user (on, nopass, ~*, &*,
// +@all), for the given command table and glob matcher.
func New(cmds Commands, match Matcher) (*Registry, error) {
	if match == nil {
		return nil, errors.New("acl: a glob matcher is required")
	}
	t, err := compile(cmds)
	if err != nil {
		return nil, err
	}
	r := &Registry{t: t, match: match}
	r.users = map[string]*User{"default": newDefaultUser(t)}
	r.changedLocked()
	return r, nil
}

// SetUserError is a refused ACL SETUSER; its text is Redis's, without the
// "ERR " prefix of the reply.
type SetUserError struct {
	Modifier string
	Reason   string
}

func (e *SetUserError) Error() string {
	return "Error in ACL SETUSER modifier '" + e.Modifier + "': " + e.Reason
}

// ErrUsernameSpaces is Redis's reply text for a user name with spaces.
var ErrUsernameSpaces = errors.New("Usernames can't contain spaces or null characters")

// ErrDeleteDefault is Redis's reply text for ACL DELUSER default.
var ErrDeleteDefault = errors.New("The 'default' user cannot be removed")

// SetUser is ACL SETUSER: it creates the user if needed and applies the
// rules in order, all or nothing.
func (r *Registry) SetUser(name string, rules [][]byte) error {
	if hasSpaces([]byte(name)) {
		return ErrUsernameSpaces
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var u *User
	if old, ok := r.users[name]; ok {
		u = old.clone()
	} else {
		u = newUser(name, r.t)
	}
	for _, op := range rules {
		if err := u.apply(r.t, op); err != nil {
			return &SetUserError{Modifier: string(op), Reason: err.Error()}
		}
	}
	r.users[name] = u
	if name == "default" && touchesPasswords(rules) {
		r.pinned = true
	}
	r.changedLocked()
	return nil
}

// touchesPasswords reports whether rules set or clear passwords: after
// such a SETUSER of the default user, requirepass no longer applies.
func touchesPasswords(rules [][]byte) bool {
	for _, op := range rules {
		s := string(op)
		if len(op) > 0 && strings.IndexByte("><#!", op[0]) >= 0 ||
			strings.EqualFold(s, "nopass") || strings.EqualFold(s, "resetpass") || strings.EqualFold(s, "reset") {
			return true
		}
	}
	return false
}

// changedLocked rebuilds the default user as checked and counts a change;
// r.mu is held for writing (or r is not shared yet).
func (r *Registry) changedLocked() {
	d := r.users["default"]
	if r.requirePass != "" && !r.pinned {
		d = d.clone()
		d.nopass = false
		d.passwords = []string{hashPassword([]byte(r.requirePass))}
	}
	r.def = d
	r.gen.Add(1)
}

// userLocked is a user as checked and shown; r.mu is held.
func (r *Registry) userLocked(name string) (*User, bool) {
	if name == "default" {
		return r.def, true
	}
	u, ok := r.users[name]
	return u, ok
}

// Generation changes whenever the users do (SetUser, DelUser, LoadFile,
// Unmarshal, SetRequirePass): a caller holding a *User from User looks it
// up again only when the generation moved.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

// RequirePassPinned reports whether the replicated users set the default
// user's passwords, so that requirepass no longer applies.
func (r *Registry) RequirePassPinned() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pinned
}

// CheckSetUser reports whether SetUser would succeed, without changing
// anything: a proposer can refuse a bad SETUSER before it reaches the log.
func (r *Registry) CheckSetUser(name string, rules [][]byte) error {
	if hasSpaces([]byte(name)) {
		return ErrUsernameSpaces
	}
	r.mu.RLock()
	old, ok := r.users[name] // the replicated user: the overlay is not the state
	r.mu.RUnlock()
	u := newUser(name, r.t)
	if ok {
		u = old.clone()
	}
	for _, op := range rules {
		if err := u.apply(r.t, op); err != nil {
			return &SetUserError{Modifier: string(op), Reason: err.Error()}
		}
	}
	return nil
}

// DelUser is ACL DELUSER: it removes the named users and returns how many
// existed. Naming "default" removes nothing. The caller disconnects the
// clients authenticated as a removed user (Redis does).
func (r *Registry) DelUser(names ...string) (int, error) {
	for _, n := range names {
		if n == "default" {
			return 0, ErrDeleteDefault
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := r.users[name]; ok {
			delete(r.users, name)
			n++
		}
	}
	if n > 0 {
		r.changedLocked()
	}
	return n, nil
}

// User returns a user by name, the default user with requirepass applied
// (SetRequirePass). The returned value does not change.
func (r *Registry) User(name string) (*User, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.userLocked(name)
}

// Names returns the user names in ACL USERS's order (byte-wise, as Redis's
// radix tree).
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sortedNamesLocked()
}

func (r *Registry) sortedNamesLocked() []string {
	names := make([]string, 0, len(r.users))
	for n := range r.users {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SetRequirePass is this node's requirepass directive: the default user's
// only password, or nopass when pass is empty (Redis's
// ACLUpdateDefaultUserPassword). It is a local overlay, not replicated
// state: Marshal leaves it out, and it applies only until the replicated
// users set the default user's passwords themselves (an ACL SETUSER default
// with >, <, #, !, nopass, resetpass or reset, or an ACL LOAD of a file that
// defines the default user); from then on it is ignored.
func (r *Registry) SetRequirePass(pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requirePass = pass
	r.changedLocked()
}

// Authentication errors, with Redis's reply texts.
var (
	ErrWrongPass         = errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	ErrNoDefaultPassword = errors.New("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	ErrAuthSyntax        = errors.New("ERR syntax error")
)

// Authenticate is Redis's ACLCheckUserCredentials: the user exists, is on,
// and is nopass or has a password whose hash matches (compared in constant
// time).
func (r *Registry) Authenticate(user, pass []byte) bool {
	u, ok := r.User(string(user))
	if !ok || !u.enabled {
		return false
	}
	if u.nopass {
		return true
	}
	h := []byte(hashPassword(pass))
	match := 0
	for _, p := range u.passwords {
		match |= subtle.ConstantTimeCompare(h, []byte(p))
	}
	return match == 1
}

// Auth is the AUTH command: args are the whole command line ("AUTH",
// [user,] password). It returns the user the connection is now
// authenticated as, or an error whose text is the reply (without the
// leading '-'). After ErrWrongPass the caller adds an "auth" entry to the
// ACL log (AuthEvent).
func (r *Registry) Auth(args [][]byte) (string, error) {
	switch len(args) {
	case 2:
		d, _ := r.User("default")
		if d.nopass {
			return "", ErrNoDefaultPassword
		}
		if !r.Authenticate([]byte("default"), args[1]) {
			return "", ErrWrongPass
		}
		return "default", nil
	case 3:
		if !r.Authenticate(args[1], args[2]) {
			return "", ErrWrongPass
		}
		return string(args[1]), nil
	}
	return "", ErrAuthSyntax
}

// DefaultNoPass reports whether the default user needs no password, so a
// new connection starts authenticated.
func (r *Registry) DefaultNoPass() bool {
	u, _ := r.User("default")
	return u.nopass && u.enabled
}

func (r *Registry) String() string {
	return fmt.Sprintf("acl.Registry(%d users)", len(r.Names()))
}
