package fsm

import (
	"fmt"
	"strings"
	"testing"
)

// ReadBatch answers each command byte for byte as Read does, errors
// included, and a reply stays intact while later replies grow the shared
// buffer past its capacity.
func TestReadBatchRepliesAsRead(t *testing.T) {
	f := newTestFSM(t)
	const now = 1_000_000
	for i := range 300 {
		applyCmd(t, f, now, "sadd", "big", fmt.Sprintf("member-%04d", i))
	}
	applyCmd(t, f, now, "sadd", "s", "a", "b")
	applyCmd(t, f, now, "set", "k", "v")
	applyCmd(t, f, now, "set", "gone", "v", "pxat", fmt.Sprint(now+10))
	var cmds [][][]byte
	for _, c := range []string{
		"sismember s a", "sismember s z", "get k", "get gone", "smembers big", "scard big",
		"sadd s c", "nosuchcmd x", "sismember s", "smembers big", "get k", "exists s k gone nokey",
	} {
		cmds = append(cmds, toArgs(strings.Fields(c)...))
	}
	out := make([][]byte, len(cmds))
	f.ReadBatch(cmds, now+20, newTestSource(1), out)
	for i, c := range cmds {
		want := string(f.Read(c, now+20, newTestSource(1), nil))
		if got := string(out[i]); got != want {
			t.Errorf("%q: ReadBatch %q, Read %q", c, got, want)
		}
	}
	if got := string(out[3]); got != "$-1\r\n" {
		t.Errorf("GET of an expired key = %q, want a null bulk", got)
	}
	if got := string(out[6]); !strings.HasPrefix(got, "-ERR write command") {
		t.Errorf("SADD on the read path = %q, want refused", got)
	}
	// The state is unchanged by the refused write.
	if got := doCmd(t, f, now+20, "scard", "s"); got != ":2\r\n" {
		t.Errorf("SCARD s = %q, want :2", got)
	}
}
