package cluster

import (
	"fmt"
	"testing"
	"time"

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
	var n3 *member
	for _, m := range c.members {
		if m.id == "n3" {
			n3 = m
		}
	}
	n3.stop()
	cfg := n3.cfg
	cfg.readFormat = 2
	c.start(cfg)
	l = c.leader()
	testutil.WaitFor(t, 10*time.Second, "writes to go through after the upgrade", func() bool {
		got = write1(t, l.node, "sadd", "s", "a")
		return got == ":1\r\n"
	})
	c.converged(l)
}

// A member of a release before the advertisement answers "unknown
// command": it counts as format 1, which this release writes.
func TestFormatOfAnOlderRelease(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	c.published()
	for _, f := range c.followers(l) {
		v, err := l.node.askFormat(t.Context(), f.cfg.ClientAddr)
		if err != nil || v != 1 {
			t.Errorf("format of %s = %d, %v; want 1", f.id, v, err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the floor to be known", func() bool { return l.node.formats.floor.Load() == 1 })
	if got := write1(t, l.node, "sadd", "s", "a"); got != ":1\r\n" {
		t.Errorf("write = %q", got)
	}
	// The reply of an older release to the unknown internal command.
	o := answered([]byte(fmt.Sprintf("-ERR unknown command '%s', with args beginning with: \r\n", cmdFormats)))
	if o.kind != refused {
		t.Fatalf("outcome = %v", o.kind)
	}
}
