package resp

import (
	"strings"
	"testing"

	"raftset/internal/command"
)

// TestEveryConnCommandIsHandled checks the pairing of the command table with
// the front end: a Conn command (or subcommand) without a case in run1 or
// local would answer "unknown command". Each is sent with the fewest
// arguments its arity allows, on a connection of its own (QUIT and SUBSCRIBE
// change the connection); whatever it answers, error or not, must be its own.
func TestEveryConnCommandIsHandled(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	checked := 0
	for _, parent := range command.Commands() {
		for _, spec := range append([]*command.Spec{parent}, parent.Subs...) {
			if !spec.Has(command.Conn) || spec.Has(command.Internal) || len(spec.Subs) > 0 {
				continue
			}
			args := strings.Split(spec.Name, "|")
			n := spec.Arity
			if n < 0 {
				n = -n
			}
			for len(args) < n {
				args = append(args, "x")
			}
			tc := dial(t, addr)
			if got := tc.do(args...); strings.HasPrefix(got, "-ERR unknown command") {
				t.Errorf("%s: %q; the table has it, the front end does not", spec.Name, got)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Errorf("checked %d Conn commands only", checked)
	}
}
