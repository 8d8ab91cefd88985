package acl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The user set's binary form, for snapshots and log entries:
//
//	magic "RSACL" | version byte (2) | flags byte | uvarint user count |
//	per user, by name (byte-wise): uvarint len, name, uvarint len, rules
//
// where rules is the user's Describe line (what ACL LIST shows after the
// name). Applying those rules to a new user rebuilds it exactly, so the
// form carries no internal state, and the same users always marshal to the
// same bytes. Flag bit 0 says the default user's passwords were set through
// ACL (requirepass no longer applies); version 1 had no flags byte.
const (
	marshalMagic   = "RSACL"
	marshalVersion = 2
	flagPinned     = 1
	// maxField bounds a name or rules line read back, so a corrupt length
	// cannot ask for gigabytes.
	maxField = 1 << 20
)

// Marshal returns the user set's binary form.
func (r *Registry) Marshal() []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.sortedNamesLocked()
	var flags byte
	if r.pinned {
		flags |= flagPinned
	}
	out := append([]byte(marshalMagic), marshalVersion, flags)
	out = binary.AppendUvarint(out, uint64(len(names)))
	for _, n := range names {
		d := r.users[n].Describe()
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
		out = binary.AppendUvarint(out, uint64(len(d)))
		out = append(out, d...)
	}
	return out
}

// ErrCorrupt marks a user set that cannot be read back.
var ErrCorrupt = errors.New("acl: corrupt user set")

// Unmarshal replaces the user set with the one in b (from Marshal). On any
// error nothing changes. A rule naming a command this node's table does
// not have is an error: the node cannot enforce what it does not know.
func (r *Registry) Unmarshal(b []byte) error {
	if len(b) < len(marshalMagic)+1 || string(b[:len(marshalMagic)]) != marshalMagic {
		return fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	v := b[len(marshalMagic)]
	if v < 1 || v > marshalVersion {
		return fmt.Errorf("%w: format version %d, this node reads up to %d (written by a newer raftset?)", ErrCorrupt, v, marshalVersion)
	}
	b = b[len(marshalMagic)+1:]
	pinned := false
	if v >= 2 {
		if len(b) == 0 || b[0]&^flagPinned != 0 {
			return fmt.Errorf("%w: bad flags", ErrCorrupt)
		}
		pinned = b[0]&flagPinned != 0
		b = b[1:]
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return fmt.Errorf("%w: bad user count", ErrCorrupt)
	}
	b = b[k:]
	users := make(map[string]*User, n)
	prev := ""
	for i := uint64(0); i < n; i++ {
		var name, rules []byte
		var err error
		if name, b, err = field(b); err != nil {
			return fmt.Errorf("%w: user %d name: %v", ErrCorrupt, i, err)
		}
		if rules, b, err = field(b); err != nil {
			return fmt.Errorf("%w: user %q rules: %v", ErrCorrupt, name, err)
		}
		if i > 0 && string(name) <= prev {
			return fmt.Errorf("%w: user %q out of order", ErrCorrupt, name)
		}
		prev = string(name)
		u, err := r.parseUser(string(name), splitRules(rules))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		users[u.name] = u
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last user", ErrCorrupt, len(b))
	}
	if _, ok := users["default"]; !ok {
		return fmt.Errorf("%w: no default user", ErrCorrupt)
	}
	r.mu.Lock()
	r.users, r.pinned = users, pinned
	r.changedLocked()
	r.mu.Unlock()
	return nil
}

func field(b []byte) (f, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, errors.New("bad length")
	}
	if n > maxField || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("length %d past the end", n)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func splitRules(line []byte) [][]byte {
	var out [][]byte
	for _, op := range bytes.Split(line, []byte(" ")) {
		if len(op) > 0 {
			out = append(out, op)
		}
	}
	return out
}

// parseUser builds a user from scratch with rules.
func (r *Registry) parseUser(name string, rules [][]byte) (*User, error) {
	if name == "" || hasSpaces([]byte(name)) {
		return nil, fmt.Errorf("user name %q is empty or has spaces", name)
	}
	u := newUser(name, r.t)
	for _, op := range rules {
		if err := u.apply(r.t, op); err != nil {
			return nil, fmt.Errorf("user %q: rule %q: %v", name, op, err)
		}
	}
	return u, nil
}

// FormatFile returns the user set as an ACL file (ACL SAVE): one
// "user <name> <rules>" line per user, as ACL LIST shows them.
func (r *Registry) FormatFile() []byte {
	var b bytes.Buffer
	for _, l := range r.listLines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// LoadFile is ACL LOAD: it replaces every user with those of an ACL file's
// contents (filename only names the file in errors), creating the default
// user if the file does not define it. On any error nothing changes and the
// error's text is Redis's reply (without "ERR ").
func (r *Registry) LoadFile(filename string, data []byte) error {
	users, definesDefault, errs := r.parseFile(filename, data)
	if errs != "" {
		return errors.New(errs + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	r.mu.Lock()
	r.users = users
	if definesDefault {
		r.pinned = true
	}
	r.changedLocked()
	r.mu.Unlock()
	return nil
}

// ParseFile reads an ACL file as Redis's ACLLoadFromFile does, returning
// the users or Redis's error text (empty when there is none).
func (r *Registry) ParseFile(filename string, data []byte) (map[string]*User, string) {
	users, _, errs := r.parseFile(filename, data)
	return users, errs
}

// parseFile is ParseFile that also says whether the file defines the
// default user.
func (r *Registry) parseFile(filename string, data []byte) (map[string]*User, bool, string) {
	users := make(map[string]*User)
	var errs strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		linenum := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", filename, linenum)
			continue
		}
		name := argv[1]
		if hasSpaces([]byte(name)) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", filename, linenum, name)
			continue
		}
		if _, dup := users[name]; dup {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", name, linenum)
			continue
		}
		u := newUser(name, r.t)
		users[name] = u
		syntaxErr := false
		for _, op := range argv[2:] {
			op = strings.Trim(op, "\t\r\n")
			err := u.apply(r.t, []byte(op))
			if err == nil {
				continue
			}
			if err == errUnknownName {
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", filename, linenum, op, err)
			} else if !syntaxErr {
				fmt.Fprintf(&errs, "%s:%d: %s. ", filename, linenum, err)
				syntaxErr = true
			}
		}
	}
	if errs.Len() > 0 {
		return nil, false, errs.String()
	}
	_, defines := users["default"]
	if !defines {
		users["default"] = newDefaultUser(r.t)
	}
	return users, defines, ""
}
