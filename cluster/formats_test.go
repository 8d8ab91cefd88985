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

// A leader whose entries need a newer log format than a member reads
// (simulated: every node reads and writes "format 2" but n3, which reads up
// to 1, as a node of the previous release would) holds writes back with
// -TRYAGAIN (before it knows every member's format, too) instead of proposing entries n3 would halt on; once n3 is
// restarted reading format 2 (upgraded), writes go through again.
func TestLeaderWritesNothingAMemberCannotRead(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		cfg.writeFormat, cfg.readFormat = 2, 2
		if cfg.NodeID == "n3" {
			cfg.readFormat = 1
		}
	})
	l := c.leader()
	c.published()
	testutil.WaitFor(t, 10*time.Second, "the leader to learn n3's format", func() bool {
		return l.node.formats.floor.Load() == 1
	})
	got := write1(t, l.node, "sadd", "s", "a")
	want := "-TRYAGAIN the write was not proposed: a member reads an older log format: member n3 reads log formats up to 1, this leader writes 2; upgrade it first\r\n"
	if got != want {
		t.Fatalf("write with an older member = %q, want %q", got, want)
	}
	// The write was not proposed: nobody has the key.
	for _, m := range c.members {
		if r := string(m.node.Read(t.Context(), args("exists", "s"), true)); r != ":0\r\n" {
			t.Errorf("%s: EXISTS s = %q after a held write", m.id, r)
		}
	}

	// "Upgrade" n3: restart it reading format 2.
	c.restartReading("n3", 2)
	l = c.leader()
	testutil.WaitFor(t, 10*time.Second, "writes to go through after the upgrade", func() bool {
		got = write1(t, l.node, "sadd", "s", "a")
		return got == ":1\r\n"
	})
	c.converged(l)
}

// A member of a release before the advertisement answers "unknown
// command": it counts as format 1, which this release writes its batches in.
func TestFormatOfAnOlderRelease(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	for _, f := range c.followers(l) {
		v, err := l.node.askFormat(t.Context(), f.cfg.ClientAddr)
		if err != nil || v != command.Version {
			t.Errorf("format of %s = %d, %v; want %d", f.id, v, err, command.Version)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the floor to be known", func() bool { return l.node.formats.floor.Load() == command.Version })
	if got := write1(t, l.node, "sadd", "s", "a"); got != ":1\r\n" {
		t.Errorf("write = %q", got)
	}
	// The reply of an older release to the unknown internal command.
	o := answered([]byte(fmt.Sprintf("-ERR unknown command '%s', with args beginning with: \r\n", cmdFormats)))
	if o.kind != refused {
		t.Fatalf("outcome = %v", o.kind)
	}
}

// Slot entries need format 2: with a member that reads only format 1 (a
// node of the previous release), batches (format 1) still go through but
// ProposeSlot is refused with -TRYAGAIN and nothing is proposed; once that
// member reads format 2, a freeze is applied on every node and writes to
// the slot get Redis's -TRYAGAIN while reads and other slots are served.
func TestSlotEntriesWaitForEveryMember(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n3" {
			cfg.readFormat = 1
		}
	})
	l := c.leader()
	c.published()
	testutil.WaitFor(t, 10*time.Second, "the leader to learn n3's format", func() bool {
		return l.node.formats.floor.Load() == 1
	})
	if got := write1(t, l.node, "sadd", "user:1", "a"); got != ":1\r\n" {
		t.Fatalf("SADD with a format-1 member = %q, want :1", got)
	}
	s := slot.Of([]byte("user:1"))
	freeze := command.SlotOp{Action: command.SlotFreeze, First: s, Last: s, Epoch: 1}
	got := string(l.node.ProposeSlot(t.Context(), freeze))
	want := fmt.Sprintf("-TRYAGAIN slot %d-%d was not changed: a member reads an older log format: member n3 reads log formats up to 1, this leader writes 2; upgrade it first\r\n", s, s)
	if got != want {
		t.Fatalf("ProposeSlot with a format-1 member = %q, want %q", got, want)
	}
	for _, m := range c.members {
		if st, _ := m.fsm.SlotState(s); st != "owned" {
			t.Errorf("%s: slot %d is %s after a held freeze", m.id, s, st)
		}
	}

	c.restartReading("n3", 0)
	l = c.leader()
	testutil.WaitFor(t, 10*time.Second, "the freeze to be proposed after the upgrade", func() bool {
		got = string(l.node.ProposeSlot(t.Context(), freeze))
		return got == "+OK\r\n"
	})
	if got := write1(t, l.node, "sadd", "user:1", "b"); got != "-TRYAGAIN Multiple keys request during rehashing of slot\r\n" {
		t.Errorf("SADD to a frozen slot = %q", got)
	}
	if got := write1(t, l.node, "sadd", "other", "b"); got != ":1\r\n" {
		t.Errorf("SADD to another slot = %q", got)
	}
	if got := string(l.node.Read(t.Context(), args("smembers", "user:1"), true)); got != "*1\r\n$1\r\na\r\n" {
		t.Errorf("SMEMBERS of a frozen slot's key = %q", got)
	}
	c.converged(l)
	for _, m := range c.members {
		testutil.WaitFor(t, 10*time.Second, m.id+" to apply the freeze", func() bool {
			st, ep := m.fsm.SlotState(s)
			return st == "frozen" && ep == 1
		})
	}
}

// restartReading restarts member id reading log formats up to read (0:
// this build's), as an upgrade of that node would.
func (c *servedCluster) restartReading(id string, read int) {
	for _, m := range c.members {
		if m.id == id {
			m.stop()
			cfg := m.cfg
			cfg.readFormat = read
			c.start(cfg)
			return
		}
	}
	panic("no member " + id)
}

// An abort's SlotAbort is log format 3. While a member reads only format 2
// (a rolling upgrade), ProposeSlot writes it as the format-2 SlotUnfreeze,
// not held back: the slot is served, its epoch left as it was, and so a
// late freeze of an older epoch still freezes it (the rule before
// SlotAbort). Once that member reads format 3, the abort raises an owned
// slot's epoch and the late freeze is refused, on every member.
func TestAbortOfAFormat2Member(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		if cfg.NodeID == "n3" {
			cfg.readFormat = 2
		}
	})
	l := c.leader()
	c.published()
	testutil.WaitFor(t, 10*time.Second, "the leader to learn n3's format", func() bool {
		return l.node.formats.floor.Load() == 2
	})
	s := slot.Of([]byte("user:1"))
	step := func(a command.SlotAction, epoch uint64) string {
		t.Helper()
		var got string
		testutil.WaitFor(t, 10*time.Second, "the step to be proposed", func() bool {
			l = c.leader()
			got = string(l.node.ProposeSlot(t.Context(), command.SlotOp{Action: a, First: s, Last: s, Epoch: epoch}))
			return !strings.HasPrefix(got, "-TRYAGAIN") && !strings.HasPrefix(got, "-CLUSTERDOWN")
		})
		return got
	}
	everywhere := func(state string, epoch uint64) {
		t.Helper()
		c.converged(c.leader())
		for _, m := range c.members {
			testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%s to hold slot %d %s at epoch %d", m.id, s, state, epoch), func() bool {
				st, ep := m.fsm.SlotState(s)
				return st == state && ep == epoch
			})
		}
	}
	if got := step(command.SlotAbort, 5); got != "+OK\r\n" {
		t.Fatalf("SlotAbort with a format-2 member = %q, want +OK", got)
	}
	everywhere("owned", 0)
	if got := step(command.SlotFreeze, 4); got != "+OK\r\n" {
		t.Fatalf("a late freeze after a format-2 abort = %q, want +OK", got)
	}
	everywhere("frozen", 4)

	c.restartReading("n3", 0)
	l = c.leader()
	testutil.WaitFor(t, 10*time.Second, "the leader to learn n3's upgrade", func() bool {
		return c.leader().node.formats.floor.Load() == command.Version
	})
	if got := step(command.SlotAbort, 6); got != "+OK\r\n" {
		t.Fatalf("SlotAbort after the upgrade = %q, want +OK", got)
	}
	everywhere("owned", 6)
	if got := step(command.SlotAbort, 7); got != "+OK\r\n" {
		t.Fatalf("SlotAbort of an owned slot = %q, want +OK", got)
	}
	everywhere("owned", 7)
	want := fmt.Sprintf("-ERR slot %d is owned at epoch 7: cannot freeze it at epoch 6\r\n", s)
	if got := step(command.SlotFreeze, 6); got != want {
		t.Fatalf("a late freeze after a format-3 abort = %q, want %q", got, want)
	}
	everywhere("owned", 7)
}
