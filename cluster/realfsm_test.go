package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/testutil"
)

// Tests on the real state machine: the node and package fsm together.

func mustRealNode(t *testing.T, cfg Config) (*Node, *fsm.FSM) {
	t.Helper()
	f := fsm.New(fsm.Config{Logger: cfg.Logger})
	n, err := New(cfg, f)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	testutil.WaitFor(t, 5*time.Second, "leadership", n.IsLeader)
	return n, f
}

func digest(t *testing.T, n *Node) string {
	t.Helper()
	d := string(n.Admin(context.Background(), args("debug", "digest")))
	if len(d) != 43 || d[0] != '+' {
		t.Fatalf("DEBUG DIGEST = %q", d)
	}
	return d
}

func TestRealFSMRestartSnapshotAndReload(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := diskConfig(t, dir)
	cfg.TrailingLogs = 10
	n, _ := mustRealNode(t, cfg)

	write := func(n *Node, a ...string) string {
		t.Helper()
		return string(n.Write(ctx, []command.Op{cmd(a...)})[0])
	}
	for i := range 300 { // intset → hashtable
		write(n, "SADD", "ints", strconv.Itoa(i))
	}
	for i := range 40 {
		write(n, "SADD", "lp", fmt.Sprintf("m%d", i))
	}
	if got := write(n, "EXPIRE", "lp", "1000"); got != ":1\r\n" {
		t.Fatalf("EXPIRE = %q", got)
	}
	if got := string(n.Admin(ctx, args("save"))); got != "+OK\r\n" {
		t.Fatalf("SAVE = %q", got)
	}
	for i := range 30 { // after the snapshot: replayed from the log
		write(n, "SADD", "after", strconv.Itoa(i*1000000))
	}
	before := digest(t, n)
	enc := string(n.Read(ctx, args("object", "encoding", "lp"), false))

	if got := string(n.Admin(ctx, args("debug", "reload"))); got != "+OK\r\n" {
		t.Fatalf("DEBUG RELOAD = %q", got)
	}
	if got := digest(t, n); got != before {
		t.Errorf("digest after DEBUG RELOAD = %q, want %q", got, before)
	}
	if got := string(n.Read(ctx, args("object", "encoding", "lp"), false)); got != enc {
		t.Errorf("OBJECT ENCODING lp after DEBUG RELOAD = %q, want %q", got, enc)
	}
	if got := write(n, "SADD", "after", "x"); got != ":1\r\n" {
		t.Errorf("SADD after DEBUG RELOAD = %q", got)
	}
	before = digest(t, n)
	n.Close()

	n2, f2 := mustRealNode(t, cfg)
	if got := digest(t, n2); got != before {
		t.Errorf("digest after restart = %q, want %q", got, before)
	}
	ttl, _ := strconv.Atoi(strings.Trim(string(n2.Read(ctx, args("ttl", "lp"), false)), ":\r\n"))
	if ttl <= 0 || ttl > 1000 {
		t.Errorf("TTL lp after restart = %d, want in (0, 1000]", ttl)
	}
	var members string
	for _, a := range f2.RestoredAux() {
		if a.Key == AuxMembers {
			members = a.Value
		}
	}
	if !strings.HasPrefix(members, "voter:n1=127.0.0.1:") || strings.Contains(members, ",") {
		t.Errorf("restored %s = %q, want this node as the only voter", AuxMembers, members)
	}
}

func TestRealFSMActiveExpiry(t *testing.T) {
	cfg := fastConfig(t, "n1")
	n, f := mustRealNode(t, cfg)
	ctx := context.Background()
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		n.Write(ctx, []command.Op{cmd("SADD", k, "m"), cmd("PEXPIRE", k, "1")})
	}
	n.Write(ctx, []command.Op{cmd("SADD", "live", "m")})
	testutil.WaitFor(t, 10*time.Second, "active expiry", func() bool {
		keys, _ := f.KeyspaceCounts()
		return keys == 1
	})

	if got := string(n.Read(ctx, args("DBSIZE"), false)); got != ":1\r\n" {
		t.Errorf("DBSIZE = %q, want :1", got)
	}
}

func TestRealFSMReplicasAgree(t *testing.T) {
	c := newTestClusterOf(t, 3, func() stateMachine { return fsm.New(fsm.Config{}) })
	ctx := context.Background()
	l := c.nodes[c.leader(t)]
	for i := range 200 {
		l.Write(ctx, []command.Op{cmd("SADD", fmt.Sprintf("s%d", i%7), strconv.Itoa(i*i)), cmd("SPOP", "s3")})
	}
	want := digest(t, l)
	for _, n := range c.nodes {
		testutil.WaitFor(t, 5*time.Second, "replica "+n.ID()+" to catch up", func() bool {
			return string(n.Read(ctx, args("debug", "digest"), true)) == want
		})

	}
}

func TestRealFSMConfigSet(t *testing.T) {
	n, f := mustRealNode(t, fastConfig(t, "n1"))
	ctx := context.Background()
	if got := string(n.Admin(ctx, args("CONFIG", "SET", "set-max-listpack-entries", "2", "SET-MAX-INTSET-ENTRIES", "3"))); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET = %q", got)
	}
	if got := f.Limits(); got.MaxListpackEntries != 2 || got.MaxIntsetEntries != 3 {
		t.Errorf("limits after CONFIG SET = %+v", got)
	}
	n.Write(ctx, []command.Op{cmd("SADD", "s", "1", "2", "3", "4")})
	if got := string(n.Read(ctx, args("OBJECT", "ENCODING", "s"), false)); got != "$9\r\nhashtable\r\n" {
		t.Errorf("OBJECT ENCODING s = %q, want hashtable (4 integers: over both limits)", got)
	}
}
