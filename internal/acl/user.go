package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Key pattern permissions, as Redis's ACL_READ_PERMISSION and
// ACL_WRITE_PERMISSION: "~p" grants both, "%R~p" and "%W~p" one each.
const (
	permRead  = 1
	permWrite = 2
	permAll   = permRead | permWrite
)

// sanitize is the user's RESTORE payload flag: unset, skip-sanitize-payload
// or sanitize-payload. raftset has no RESTORE; the flag is kept so that ACL
// LIST shows what Redis shows for the same rules.
const (
	sanitizeUnset = iota
	sanitizeSkip
	sanitizeOn
)

type keyPattern struct {
	pattern []byte
	perm    uint8
}

// User is one ACL user: Redis's user with its root selector (raftset has no
// further selectors). A User held by a Registry is never modified in place:
// SETUSER builds a new one, so a connection checking against the old value
// sees a consistent user.
type User struct {
	name      string
	enabled   bool
	nopass    bool
	sanitize  uint8
	passwords []string // SHA-256 hex digests, in the order they were added

	allKeys     bool
	keys        []keyPattern
	allChannels bool
	channels    []string

	// allCommands is Redis's SELECTOR_FLAG_ALLCOMMANDS (no bit to test);
	// future is its reserved "+@all was the base" bit, which decides whether
	// the description starts with +@all or -@all.
	allCommands bool
	future      bool
	// rules are the command rules after the base, verbatim and lower-cased,
	// as Redis 7.2 keeps them: re-applying them to the table rebuilds
	// allowed, so they are what snapshots and ACL LIST carry.
	rules     []string
	allowed   []bool           // by command id
	firstArgs map[int][]string // command id -> allowed first arguments
}

// Name is the user's name.
func (u *User) Name() string { return u.name }

// Enabled reports whether the user can authenticate ("on").
func (u *User) Enabled() bool { return u.enabled }

// newUser is Redis's ACLCreateUser: off, no passwords, no keys, no
// channels (acl-pubsub-default resetchannels), no commands.
func newUser(name string, t *table) *User {
	return &User{name: name, allowed: make([]bool, len(t.cmds))}
}

// newDefaultUser is Redis's ACLCreateDefaultUser.
func newDefaultUser(t *table) *User {
	u := newUser("default", t)
	for _, op := range []string{"+@all", "~*", "&*", "on", "nopass"} {
		if err := u.apply(t, []byte(op)); err != nil {
			panic("acl: default user rule " + op + ": " + err.Error())
		}
	}
	return u
}

func (u *User) clone() *User {
	c := *u
	c.passwords = append([]string(nil), u.passwords...)
	c.keys = append([]keyPattern(nil), u.keys...)
	c.channels = append([]string(nil), u.channels...)
	c.rules = append([]string(nil), u.rules...)
	c.allowed = append([]bool(nil), u.allowed...)
	c.firstArgs = nil
	for id, args := range u.firstArgs {
		if c.firstArgs == nil {
			c.firstArgs = make(map[int][]string)
		}
		c.firstArgs[id] = append([]string(nil), args...)
	}
	return &c
}

// ruleError is why one SETUSER modifier was refused; its text is Redis's
// ACLSetUserStringError.
type ruleError string

const (
	errUnknownName  ruleError = "Unknown command or category name in ACL"
	errSyntax       ruleError = "Syntax error"
	errKeyAfterAll  ruleError = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	errChanAfterAll ruleError = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	errNoSuchPass   ruleError = "The password you are trying to remove from the user does not exist"
	errBadHash      ruleError = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	errSubFirstArg  ruleError = "Allowing first-arg of a subcommand is not supported"
	errSelectors    ruleError = "Selectors are not supported"
)

func (e ruleError) Error() string { return string(e) }

// hashPassword is Redis's ACLHashPassword: the lower-case hex SHA-256.
func hashPassword(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

// validHash is Redis's ACLCheckPasswordHash.
func validHash(h []byte) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range h {
		if (c < 'a' || c > 'f') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// hasSpaces is Redis's ACLStringHasSpaces (C's isspace, or NUL).
func hasSpaces(s []byte) bool {
	for _, c := range s {
		switch c {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}

// apply is Redis's ACLSetUser for one modifier.
func (u *User) apply(t *table, op []byte) error {
	if len(op) == 0 {
		return nil
	}
	s := string(op)
	switch {
	case strings.EqualFold(s, "on"):
		u.enabled = true
	case strings.EqualFold(s, "off"):
		u.enabled = false
	case strings.EqualFold(s, "skip-sanitize-payload"):
		u.sanitize = sanitizeSkip
	case strings.EqualFold(s, "sanitize-payload"):
		u.sanitize = sanitizeOn
	case strings.EqualFold(s, "nopass"):
		u.nopass = true
		u.passwords = nil
	case strings.EqualFold(s, "resetpass"):
		u.nopass = false
		u.passwords = nil
	case op[0] == '>' || op[0] == '#':
		var h string
		if op[0] == '>' {
			h = hashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errBadHash
			}
			h = string(op[1:])
		}
		if !contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		var h string
		if op[0] == '<' {
			h = hashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errBadHash
			}
			h = string(op[1:])
		}
		i := index(u.passwords, h)
		if i < 0 {
			return errNoSuchPass
		}
		u.passwords = append(u.passwords[:i:i], u.passwords[i+1:]...)
	case op[0] == '(':
		return errSelectors
	case strings.EqualFold(s, "clearselectors"):
	case strings.EqualFold(s, "reset"):
		for _, r := range []string{"resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "clearselectors", "-@all"} {
			if err := u.apply(t, []byte(r)); err != nil {
				return err
			}
		}
	default:
		return u.applySelector(t, op)
	}
	return nil
}

// applySelector is Redis's ACLSetSelector for the root selector.
func (u *User) applySelector(t *table, op []byte) error {
	s := string(op)
	switch {
	case strings.EqualFold(s, "allkeys") || s == "~*":
		u.allKeys = true
		u.keys = nil
	case strings.EqualFold(s, "resetkeys"):
		u.allKeys = false
		u.keys = nil
	case strings.EqualFold(s, "allchannels") || s == "&*":
		u.allChannels = true
		u.channels = nil
	case strings.EqualFold(s, "resetchannels"):
		u.allChannels = false
		u.channels = nil
	case strings.EqualFold(s, "allcommands") || strings.EqualFold(s, "+@all"):
		u.setAll(true)
	case strings.EqualFold(s, "nocommands") || strings.EqualFold(s, "-@all"):
		u.setAll(false)
	case op[0] == '~' || op[0] == '%':
		return u.addKeyPattern(op)
	case op[0] == '&':
		if u.allChannels {
			return errChanAfterAll
		}
		if hasSpaces(op[1:]) {
			return errSyntax
		}
		if !contains(u.channels, s[1:]) {
			u.channels = append(u.channels, s[1:])
		}
		u.allChannels = false
	case op[0] == '+' && (len(op) < 2 || op[1] != '@'):
		return u.allowCommand(t, s[1:])
	case op[0] == '-' && (len(op) < 2 || op[1] != '@'):
		id := t.lookup(s[1:])
		if id < 0 {
			return errUnknownName
		}
		u.changePerm(t, id, false)
		u.updateRules(t.cmds[id].name, false)
	case op[0] == '+' || op[0] == '-':
		bit := categoryBit(s[2:])
		if bit == 0 {
			return errUnknownName
		}
		allow := op[0] == '+'
		u.updateRules(s[1:], allow)
		for _, id := range t.top {
			c := &t.cmds[id]
			if c.cats&bit != 0 {
				u.changePerm(t, id, allow)
			}
			for _, sid := range c.subs {
				if t.cmds[sid].cats&bit != 0 {
					u.changePerm(t, sid, allow)
				}
			}
		}
	default:
		return errSyntax
	}
	return nil
}

func (u *User) addKeyPattern(op []byte) error {
	if u.allKeys {
		return errKeyAfterAll
	}
	perm := uint8(0)
	off := 1
	if op[0] == '%' {
		for ; off < len(op); off++ {
			c := op[off]
			switch {
			case (c == 'R' || c == 'r') && perm&permRead == 0:
				perm |= permRead
			case (c == 'W' || c == 'w') && perm&permWrite == 0:
				perm |= permWrite
			case c == '~' && perm != 0:
				off++
				goto done
			default:
				return errSyntax
			}
		}
		// A '%' modifier without '~' names no pattern; Redis then stores
		// an empty pattern (and with no permission at all, panics when
		// describing it), which is refused here.
		if perm == 0 {
			return errSyntax
		}
	} else {
		perm = permAll
	}
done:
	pat := op[off:]
	if hasSpaces(pat) {
		return errSyntax
	}
	for i := range u.keys {
		if string(u.keys[i].pattern) == string(pat) {
			u.keys[i].perm |= perm
			u.allKeys = false
			return nil
		}
	}
	u.keys = append(u.keys, keyPattern{pattern: append([]byte(nil), pat...), perm: perm})
	u.allKeys = false
	return nil
}

// allowCommand is the "+command" and "+command|subcommand-or-first-arg"
// branch of ACLSetSelector.
func (u *User) allowCommand(t *table, name string) error {
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		id := t.lookup(name)
		if id < 0 {
			return errUnknownName
		}
		u.changePerm(t, id, true)
		u.updateRules(t.cmds[id].name, true)
		return nil
	}
	base, sub := name[:i], name[i+1:]
	id := t.lookup(base)
	if id < 0 {
		return errUnknownName
	}
	if t.cmds[id].parent >= 0 {
		return errSubFirstArg
	}
	if sub == "" {
		return errSyntax
	}
	if len(t.cmds[id].subs) > 0 {
		sid := t.lookup(name)
		if sid < 0 {
			return errUnknownName
		}
		u.changePerm(t, sid, true)
	} else {
		// Redis would store a first argument with spaces and then write an
		// ACL LIST line that does not parse back; refused here.
		if hasSpaces([]byte(sub)) {
			return errSyntax
		}
		u.addFirstArg(id, sub)
	}
	u.updateRules(name, true)
	return nil
}

func (u *User) addFirstArg(id int, sub string) {
	for _, a := range u.firstArgs[id] {
		if strings.EqualFold(a, sub) {
			return
		}
	}
	if u.firstArgs == nil {
		u.firstArgs = make(map[int][]string)
	}
	u.firstArgs[id] = append(u.firstArgs[id], sub)
}

func (u *User) setAll(allow bool) {
	for i := range u.allowed {
		u.allowed[i] = allow
	}
	u.allCommands = allow
	u.future = allow
	u.rules = nil
	u.firstArgs = nil
}

func (u *User) setBit(id int, allow bool) {
	u.allowed[id] = allow
	if !allow {
		u.allCommands = false
	}
}

// changePerm is Redis's ACLChangeSelectorPerm: a command and all its
// subcommands, and the command's first arguments are forgotten.
func (u *User) changePerm(t *table, id int, allow bool) {
	u.setBit(id, allow)
	delete(u.firstArgs, id)
	for _, sid := range t.cmds[id].subs {
		u.setBit(sid, allow)
	}
}

// updateRules is Redis 7.2's ACLUpdateCommandRules: the rule replaces any
// earlier rule for the same command (or category), and any earlier rule
// for one of its subcommands or first arguments, and goes last.
func (u *User) updateRules(rule string, allow bool) {
	rule = strings.ToLower(rule)
	kept := u.rules[:0]
	for _, r := range u.rules {
		body := r[1:]
		if body == rule || (len(body) > len(rule) && strings.HasPrefix(body, rule) && body[len(rule)] == '|') {
			continue
		}
		kept = append(kept, r)
	}
	sign := "-"
	if allow {
		sign = "+"
	}
	u.rules = append(kept, sign+rule)
}

// commandRules is the "commands" field of ACL GETUSER: the base (+@all or
// -@all) and the rules after it.
func (u *User) commandRules() string {
	var b strings.Builder
	if u.future {
		b.WriteString("+@all")
	} else {
		b.WriteString("-@all")
	}
	for _, r := range u.rules {
		b.WriteByte(' ')
		b.WriteString(r)
	}
	return b.String()
}

func (k keyPattern) String() string {
	switch k.perm {
	case permRead:
		return "%R~" + string(k.pattern)
	case permWrite:
		return "%W~" + string(k.pattern)
	}
	return "~" + string(k.pattern)
}

// flagNames are the user's flags in Redis's ACLUserFlags order.
func (u *User) flagNames() []string {
	var out []string
	if u.enabled {
		out = append(out, "on")
	} else {
		out = append(out, "off")
	}
	if u.nopass {
		out = append(out, "nopass")
	}
	switch u.sanitize {
	case sanitizeSkip:
		out = append(out, "skip-sanitize-payload")
	case sanitizeOn:
		out = append(out, "sanitize-payload")
	}
	return out
}

// keysField and channelsField are ACL GETUSER's "keys" and "channels".
func (u *User) keysField() string {
	if u.allKeys {
		return "~*"
	}
	parts := make([]string, len(u.keys))
	for i, k := range u.keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " ")
}

func (u *User) channelsField() string {
	if u.allChannels {
		return "&*"
	}
	parts := make([]string, len(u.channels))
	for i, c := range u.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// Describe is Redis's ACLDescribeUser: the user's rules as one line that
// ACL SETUSER (and an ACL file) accepts back, e.g.
// "on nopass ~* &* +@all".
func (u *User) Describe() string {
	var b strings.Builder
	for _, f := range u.flagNames() {
		b.WriteString(f)
		b.WriteByte(' ')
	}
	for _, p := range u.passwords {
		b.WriteByte('#')
		b.WriteString(p)
		b.WriteByte(' ')
	}
	if u.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range u.keys {
			b.WriteString(k.String())
			b.WriteByte(' ')
		}
	}
	if u.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range u.channels {
			b.WriteByte('&')
			b.WriteString(c)
			b.WriteByte(' ')
		}
	}
	b.WriteString(u.commandRules())
	return b.String()
}

func contains(list []string, s string) bool { return index(list, s) >= 0 }

func index(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
