package command

import (
	"slices"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	tb := Commands()
	for name, s := range tb {
		if s.Name != name {
			t.Errorf("table key %q holds spec %q", name, s.Name)
		}
		kinds := 0
		for _, f := range []Flags{Write, ReadOnly, Admin, Conn} {
			if s.Flags&f != 0 {
				kinds++
			}
		}
		if kinds > 1 || (kinds == 0 && len(s.Subs) == 0) {
			t.Errorf("%s: needs exactly one of Write, ReadOnly, Admin, Conn", name)
		}
		for _, sub := range s.Subs {
			if got := s.Sub(sub.Name[len(name)+1:]); got != sub {
				t.Errorf("Sub(%q) = %v", sub.Name, got)
			}
		}
	}
	for _, tc := range []struct {
		name string
		argc int
		ok   bool
	}{{"sadd", 2, false}, {"sadd", 3, true}, {"sadd", 9, true}, {"scard", 2, true}, {"scard", 3, false}} {
		if got := tb[tc.name].CheckArity(tc.argc); got != tc.ok {
			t.Errorf("%s.CheckArity(%d) = %v, want %v", tc.name, tc.argc, got, tc.ok)
		}
	}
	if tb.Lookup([]byte("SaDd")) != tb["sadd"] {
		t.Errorf("Lookup is not case-insensitive")
	}
	argv := [][]byte{[]byte("mset"), []byte("a"), []byte("1"), []byte("b"), []byte("2")}
	if got := tb["mset"].Keys(argv); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("mset Keys = %v, want [1 3]", got)
	}
}

// TestKeySpecsAgreeWithKeys checks that the key specifications derived from
// the argument lines find the same keys as the table's first/last/step, for
// every command with fixed key positions.
func TestKeySpecsAgreeWithKeys(t *testing.T) {
	for name, s := range Commands() {
		for _, spec := range append([]*Spec{s}, s.Subs...) {
			if spec.Has(MovableKeys) || spec.FirstKey == 0 {
				if spec.FirstKey == 0 && !spec.Has(MovableKeys) && len(spec.KeySpecs) > 0 {
					t.Errorf("%s: key specs %v but no keys in the table", spec.Name, spec.KeySpecs)
				}
				continue
			}
			n := spec.Arity
			if n < 0 {
				n = max(-n, 7)
			}
			argv := [][]byte{[]byte(name)}
			for len(argv) < n {
				argv = append(argv, []byte{byte('a' + len(argv))})
			}
			got, _, ok := spec.FindKeys(argv)
			if want := spec.Keys(argv); !ok || !slices.Equal(got, want) {
				t.Errorf("%s %q: FindKeys = %v, %v; Keys = %v", spec.Name, argv, got, ok, want)
			}
		}
	}
}

func TestParseArgs(t *testing.T) {
	args, keys, err := parseArgs("dst:key{OW,update} [TYPE kind: A | B-C]@5.0.0 (pair: k:key{RO} v:string)...+ [N]")
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 4 || len(keys) != 2 || keys[1][0] != "RO" {
		t.Fatalf("parsed %d args, keys %v", len(args), keys)
	}
	kind := args[1]
	if kind.Type != "oneof" || kind.Token != "TYPE" || kind.Since != "5.0.0" || !kind.Optional ||
		len(kind.Args) != 2 || kind.Args[1].Name != "b-c" || kind.Args[1].Token != "B-C" {
		t.Errorf("oneof parsed as %+v", kind)
	}
	pair := args[2]
	if pair.Type != "block" || pair.Optional || !pair.Multiple || !pair.MultipleToken || pair.Args[0].KeySpec != 1 {
		t.Errorf("block parsed as %+v", pair)
	}
	for _, bad := range []string{"x", "x:nosuchtype", "[a:string b:string]", "[l: a:string", "k:key", "k:key{RO}@", "(l: a:string | b:string c:string)"} {
		if _, _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) succeeded", bad)
		}
	}
}

func TestShebang(t *testing.T) {
	cases := []struct {
		body     string
		flags    ScriptFlags
		msg      string
		noWrites bool
	}{
		{"return 1", 0, "", false},
		{"#!lua\nreturn 1", ScriptShebang, "", false},
		{"#!lua flags=no-writes,allow-stale\nreturn 1", ScriptShebang | ScriptNoWrites | ScriptAllowStale, "", true},
		{"#!lua flags=\nreturn 1", ScriptShebang, "", false},
		{"#!lua", 0, "ERR Invalid script shebang", false},
		{"#!foo\nreturn 1", 0, "ERR Unexpected engine in script shebang: #!foo", false},
		{"#!lua name=x\nreturn 1", 0, "ERR Unknown lua shebang option: name=x", false},
		{"#!lua flags=no-writes allow-stale\nreturn 1", 0, "ERR Unknown lua shebang option: allow-stale", false},
		{"#!lua flags=foo\nreturn 1", 0, "ERR Unexpected flag in script shebang: foo", false},
	}
	for _, c := range cases {
		flags, code, msg := ParseShebang([]byte(c.body))
		if flags != c.flags || msg != c.msg {
			t.Errorf("%q: flags %b msg %q, want %b %q", c.body, flags, msg, c.flags, c.msg)
		}
		if msg == "" && (len(code) != len(c.body) || strings.Count(string(code), "\n") != strings.Count(c.body, "\n")) {
			t.Errorf("%q: code %q keeps neither length nor lines", c.body, code)
		}
		if got := NoWritesScript([]byte(c.body)); got != c.noWrites {
			t.Errorf("%q: NoWritesScript = %v", c.body, got)
		}
	}
}
