package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// A slot moves between two Raft groups through their logs, as the
// migration driver will move it (docs/sharding.md, Moving a slot): A
// freezes it, A's leader exports it in batches that B's leader proposes as
// imports, B owns it, A drops it. Every replica of each group ends in the
// same state; B serves the keys with their values and deadlines, A holds
// none of them and refuses the slot.
func TestSlotMovesBetweenGroups(t *testing.T) {
	a, b := newServedCluster(t, 3, nil), newServedCluster(t, 3, nil)
	la, lb := a.leader(), b.leader()
	a.published()
	b.published()
	ctx := t.Context()
	const tag = "{moved}"
	s := slot.Of([]byte("moved"))
	for i := range 40 {
		write1(t, la.node, "sadd", fmt.Sprintf("%sset%d", tag, i), "a", "b", fmt.Sprint(i))
	}
	write1(t, la.node, "set", tag+"ttl", "v", "px", "600000")
	write1(t, la.node, "set", "stays", "v")
	step := func(n *Node, op command.SlotOp, want string) {
		t.Helper()
		var got string
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("slot step %d to be proposed", op.Action), func() bool {
			got = string(n.ProposeSlot(ctx, op))
			return !strings.HasPrefix(got, "-TRYAGAIN")
		})
		if got != want {
			t.Fatalf("slot step %+v = %q, want %q", op, got, want)
		}
	}
	step(lb.node, command.SlotOp{Action: command.SlotDrop, First: 0, Last: slot.Count - 1, Epoch: 1}, ":0\r\n")
	step(la.node, command.SlotOp{Action: command.SlotFreeze, First: s, Last: s, Epoch: 2}, "+OK\r\n")
	if got := write1(t, la.node, "sadd", tag+"set0", "late"); got != "-TRYAGAIN Multiple keys request during rehashing of slot\r\n" {
		t.Fatalf("write to the frozen slot = %q", got)
	}
	var after []byte
	imported := 0
	for {
		batch, last, done, err := la.fsm.ExportSlot(s, after, 512)
		if err != nil {
			t.Fatal(err)
		}
		reply := string(lb.node.ProposeSlot(ctx, command.SlotOp{Action: command.SlotImport, First: s, Last: s, Epoch: 2, Batch: batch}))
		var n int
		if _, err := fmt.Sscanf(reply, ":%d\r\n", &n); err != nil {
			t.Fatalf("import = %q", reply)
		}
		imported += n
		if after = last; done {
			break
		}
	}
	if imported != 41 {
		t.Errorf("%d keys imported, want 41", imported)
	}
	if got := string(lb.node.Read(ctx, args("scard", tag+"set7"), true)); got != "-TRYAGAIN Multiple keys request during rehashing of slot\r\n" {
		t.Errorf("B before own: SCARD = %q", got)
	}
	step(lb.node, command.SlotOp{Action: command.SlotOwn, First: s, Last: s, Epoch: 3}, "+OK\r\n")
	step(la.node, command.SlotOp{Action: command.SlotDrop, First: s, Last: s, Epoch: 3}, ":41\r\n")

	if got := string(lb.node.Read(ctx, args("smembers", tag+"set7"), true)); !strings.Contains(got, "$1\r\n7\r\n") {
		t.Errorf("B: SMEMBERS = %q", got)
	}
	var pttl int
	if got := string(lb.node.Read(ctx, args("pttl", tag+"ttl"), true)); func() bool {
		_, err := fmt.Sscanf(got, ":%d\r\n", &pttl)
		return err != nil || pttl <= 500_000 || pttl > 600_000
	}() {
		t.Errorf("B: PTTL = %q, want just under 600000 (the deadline travelled)", got)
	}
	if got := write1(t, lb.node, "sadd", tag+"set0", "new"); got != ":1\r\n" {
		t.Errorf("B: SADD after own = %q", got)
	}
	if got := string(la.node.Read(ctx, args("exists", tag+"set0"), true)); got != "-TRYAGAIN Multiple keys request during rehashing of slot\r\n" {
		t.Errorf("A after drop: EXISTS = %q", got)
	}
	if got := string(la.node.Read(ctx, args("get", "stays"), true)); got != "$1\r\nv\r\n" {
		t.Errorf("A: GET of another slot = %q", got)
	}
	a.converged(la)
	b.converged(lb)
	for _, m := range append(a.members, b.members...) {
		testutil.WaitFor(t, 10*time.Second, m.id+" to apply the move", func() bool {
			return m.fsm.AppliedIndex() >= map[bool]*member{true: la, false: lb}[contains(a.members, m)].fsm.AppliedIndex()
		})
		want := map[bool]int{true: 0, false: 41}[contains(a.members, m)]
		if n := m.fsm.CountKeysInSlot(s); n != want {
			t.Errorf("%s holds %d keys of slot %d, want %d", m.id, n, s, want)
		}
	}
}

func contains(ms []*member, m *member) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}
