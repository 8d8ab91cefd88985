package acl

import (
	"errors"
	"sort"
	"strings"
	"testing"
)

// globMatch is a small glob for tests ('*', '?', literal bytes): the server
// injects Redis's full matcher.
func globMatch(p, s []byte) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// fakeCommands is a command table given as name -> categories.
type fakeCommands struct {
	names  []string
	cats   map[string][]string
	noAuth map[string]bool
}

func (f *fakeCommands) Names() []string { return f.names }
func (f *fakeCommands) Categories(n string) ([]string, bool) {
	c, ok := f.cats[n]
	return c, ok
}
func (f *fakeCommands) NoAuth(n string) bool { return f.noAuth[n] }

func (f *fakeCommands) add(name string, noAuth bool, cats ...string) {
	if f.cats == nil {
		f.cats = map[string][]string{}
		f.noAuth = map[string]bool{}
	}
	f.names = append(f.names, name)
	f.cats[name] = cats
	f.noAuth[name] = noAuth
}

// smallTable is a few of Redis's commands with Redis's categories.
func smallTable() *fakeCommands {
	f := &fakeCommands{}
	f.add("get", false, "@read", "@string", "@fast")
	f.add("set", false, "@write", "@string", "@slow")
	f.add("sadd", false, "@write", "@set", "@fast")
	f.add("smembers", false, "@read", "@set", "@slow")
	f.add("exists", false, "@keyspace", "@read", "@fast")
	f.add("keys", false, "@keyspace", "@read", "@slow", "@dangerous")
	f.add("publish", false, "@pubsub", "@fast")
	f.add("select", false, "@fast", "@connection")
	f.add("ping", false, "@fast", "@connection")
	f.add("auth", true, "@fast", "@connection")
	f.add("config", false, "@slow")
	f.add("config|get", false, "@admin", "@slow", "@dangerous")
	f.add("config|set", false, "@admin", "@slow", "@dangerous")
	return f
}

// testKeys says which arguments of the test commands are keys or channels.
var testKeys = map[string]struct {
	pos         int
	read, write bool
	channel     bool
}{
	"get": {pos: 1, read: true}, "smembers": {pos: 1, read: true}, "sismember": {pos: 1, read: true},
	"set": {pos: 1, write: true}, "sadd": {pos: 1, write: true}, "del": {pos: 1, write: true},
	"exists": {pos: 1}, "publish": {pos: 1, channel: true},
}

func testResolver(names map[string]bool) Resolver {
	return func(args [][]byte) (string, string, []KeyAccess, error) {
		name := strings.ToLower(string(args[0]))
		if !names[name] {
			return "", "", nil, errors.New("ERR Command '" + string(args[0]) + "' not found")
		}
		sub := ""
		if len(args) > 1 {
			sub = string(args[1])
		}
		var keys []KeyAccess
		if k, ok := testKeys[name]; ok && k.pos < len(args) {
			keys = append(keys, KeyAccess{Key: args[k.pos], Read: k.read, Write: k.write, Channel: k.channel})
		}
		return name, sub, keys, nil
	}
}

func mustNew(t testing.TB, c Commands) *Registry {
	t.Helper()
	r, err := New(c, globMatch)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		out = append(out, []byte(w))
	}
	return out
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
