package acl

import (
	"sort"

	"raftset/internal/command"
)

// TableCommands is the Commands of a command table: every command and
// subcommand but the internal ones (raftset.*, which no user may run: they
// are for nodes that proved the cluster secret), with the categories
// COMMAND INFO reports and the table's NoAuth flag.
func TableCommands(t command.Table) Commands { return tableCommands{t} }

type tableCommands struct{ t command.Table }

func (c tableCommands) Names() []string {
	var top []string
	for name, s := range c.t {
		if !s.Has(command.Internal) {
			top = append(top, name)
		}
	}
	sort.Strings(top)
	var out []string
	for _, name := range top {
		out = append(out, name)
		for _, sub := range c.t[name].Subs {
			out = append(out, sub.Name)
		}
	}
	return out
}

func (c tableCommands) spec(name string) *command.Spec {
	parent, sub, ok := cutPipe(name)
	s := c.t[parent]
	if s == nil || !ok {
		return s
	}
	for _, x := range s.Subs {
		if x.Name == parent+"|"+sub {
			return x
		}
	}
	return nil
}

func (c tableCommands) Categories(name string) ([]string, bool) {
	s := c.spec(name)
	if s == nil {
		return nil, false
	}
	return command.ACLCategories(s), true
}

func (c tableCommands) NoAuth(name string) bool {
	s := c.spec(name)
	return s != nil && s.Has(command.NoAuth)
}

func cutPipe(name string) (string, string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '|' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// CheckUser is Check for a user the caller already holds (from User): a
// connection keeps its *User between commands and looks it up again only
// when Generation moved.
func (r *Registry) CheckUser(u *User, cmd, sub string, keys []KeyAccess) error {
	return r.checkUser(u, cmd, sub, keys)
}

// Unrestricted reports whether the user may run every command on every key
// and channel, so that checking its commands can be skipped.
func (u *User) Unrestricted() bool { return u.allCommands && u.allKeys && u.allChannels }
