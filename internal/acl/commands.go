package acl

import (
	"fmt"
	"strings"
)

// categoryNames are Redis's ACL categories in Redis's order (acl.c's
// ACLCommandCategories): ACL CAT lists them in this order, and a category's
// bit in a command's mask is its index here.
var categoryNames = [...]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
}

// Categories returns Redis's ACL category names, in ACL CAT's order.
func Categories() []string { return append([]string(nil), categoryNames[:]...) }

// categoryBit returns the mask bit of a category name (case-insensitive,
// without the '@'), or 0 when Redis has no such category.
func categoryBit(name string) uint32 {
	for i, c := range categoryNames {
		if strings.EqualFold(c, name) {
			return 1 << i
		}
	}
	return 0
}

// Commands is the command table the ACL rules refer to. The package does
// not own the table: the server implements this over its own, so that
// +@category and +command mean exactly the commands the server runs.
type Commands interface {
	// Names lists every command and subcommand by its full lower-case name
	// ("sadd", "config", "config|get"); a subcommand's parent is listed
	// too. The order is the order of ACL CAT's replies.
	Names() []string
	// Categories returns the ACL categories of a command or subcommand, with
	// or without the leading '@' ("@read" or "read"), and whether the name
	// is in the table.
	Categories(name string) ([]string, bool)
}

// NoAuthCommands is implemented by a Commands whose table marks commands
// that every user may run whatever its rules, as Redis's no-auth flag does
// for AUTH and HELLO. Without it no command is exempt.
type NoAuthCommands interface {
	NoAuth(name string) bool
}

// cmdEntry is one entry of the compiled table; its index is its id in a
// user's permission bitmap.
type cmdEntry struct {
	name   string
	cats   uint32
	parent int // -1 for a top-level command
	subs   []int
	noAuth bool
}

// table is a Commands compiled once: ids, category masks and the
// parent/subcommand links the rules need.
type table struct {
	cmds   []cmdEntry
	byName map[string]int
	top    []int // top-level ids in Names order
}

func compile(c Commands) (*table, error) {
	t := &table{byName: make(map[string]int)}
	na, _ := c.(NoAuthCommands)
	for _, raw := range c.Names() {
		name := strings.ToLower(raw)
		if _, dup := t.byName[name]; dup {
			return nil, fmt.Errorf("acl: command %q listed twice", name)
		}
		cats, ok := c.Categories(raw)
		if !ok {
			return nil, fmt.Errorf("acl: command %q listed but has no entry", name)
		}
		var mask uint32
		for _, cat := range cats {
			bit := categoryBit(strings.TrimPrefix(cat, "@"))
			if bit == 0 {
				return nil, fmt.Errorf("acl: command %q: unknown category %q", name, cat)
			}
			mask |= bit
		}
		t.byName[name] = len(t.cmds)
		t.cmds = append(t.cmds, cmdEntry{name: name, cats: mask, parent: -1, noAuth: na != nil && na.NoAuth(raw)})
	}
	for id := range t.cmds {
		name := t.cmds[id].name
		i := strings.IndexByte(name, '|')
		if i < 0 {
			t.top = append(t.top, id)
			continue
		}
		pid, ok := t.byName[name[:i]]
		if !ok || strings.IndexByte(name[i+1:], '|') >= 0 || t.cmds[pid].parent >= 0 {
			return nil, fmt.Errorf("acl: subcommand %q has no parent command in the table", name)
		}
		t.cmds[id].parent = pid
		t.cmds[pid].subs = append(t.cmds[pid].subs, id)
	}
	return t, nil
}

// lookup finds a command as Redis's lookupCommandBySdsLogic does: "name"
// or "parent|sub", case-insensitively; -1 when absent.
func (t *table) lookup(name string) int {
	name = strings.ToLower(name)
	if strings.Count(name, "|") > 1 {
		return -1
	}
	if i := strings.IndexByte(name, '|'); i >= 0 {
		pid, ok := t.byName[name[:i]]
		if !ok || len(t.cmds[pid].subs) == 0 {
			return -1
		}
	}
	id, ok := t.byName[name]
	if !ok {
		return -1
	}
	return id
}

// inCategory lists, in ACL CAT's order, the commands and subcommands of a
// category: each top-level command, then its subcommands.
func (t *table) inCategory(bit uint32) []string {
	var out []string
	for _, id := range t.top {
		c := &t.cmds[id]
		if c.cats&bit != 0 {
			out = append(out, c.name)
		}
		for _, sid := range c.subs {
			if t.cmds[sid].cats&bit != 0 {
				out = append(out, t.cmds[sid].name)
			}
		}
	}
	return out
}
