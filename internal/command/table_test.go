package command

import "testing"

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
