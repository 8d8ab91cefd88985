package cluster

import (
	"context"
	"testing"

	"raftset/internal/command"
)

// TestNoopWritesAreNotLogged: a run of writes whose leading SPOPs and SREMs
// find no key is answered without a log entry; the rest of the run, and a
// run that starts with a write that changes something, go through the log
// in order.
func TestNoopWritesAreNotLogged(t *testing.T) {
	n, _ := mustRealNode(t, fastConfig(t, "n1"))
	ctx := context.Background()
	run := func(cmds ...[]string) ([]string, uint64) {
		t.Helper()
		ops := make([]command.Op, len(cmds))
		for i, c := range cmds {
			ops[i] = cmd(c...)
		}
		before := n.st.ops.Load()
		replies := n.Write(ctx, ops)
		out := make([]string, len(replies))
		for i, r := range replies {
			out[i] = string(r)
		}
		return out, n.st.ops.Load() - before
	}
	cases := []struct {
		name   string
		cmds   [][]string
		want   []string
		logged uint64 // ops proposed
	}{
		{"absent keys", [][]string{{"spop", "q"}, {"srem", "q", "a"}, {"spop", "other"}},
			[]string{"$-1\r\n", ":0\r\n", "$-1\r\n"}, 0},
		{"a write after the no-ops", [][]string{{"spop", "q"}, {"sadd", "q", "a"}, {"spop", "q"}},
			[]string{"$-1\r\n", ":1\r\n", "$1\r\na\r\n"}, 2},
		{"a write before: order holds", [][]string{{"sadd", "q", "b"}, {"spop", "q"}, {"spop", "q"}},
			[]string{":1\r\n", "$1\r\nb\r\n", "$-1\r\n"}, 3},
		{"a set that exists", [][]string{{"sadd", "s", "x"}}, []string{":1\r\n"}, 1},
		{"SREM of a member it lacks", [][]string{{"srem", "s", "y"}}, []string{":0\r\n"}, 1},
		{"SPOP with a count", [][]string{{"spop", "q", "2"}}, []string{"*0\r\n"}, 1},
		{"a bad count still errs", [][]string{{"spop", "q", "-1"}},
			[]string{"-ERR value is out of range, must be positive\r\n"}, 0}, // refused before proposing
	}
	for _, c := range cases {
		got, logged := run(c.cmds...)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d replies, want %d", c.name, len(got), len(c.want))
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: reply %d = %q, want %q", c.name, i, got[i], c.want[i])
			}
		}
		if logged != c.logged {
			t.Errorf("%s: %d ops proposed, want %d", c.name, logged, c.logged)
		}
	}
}
