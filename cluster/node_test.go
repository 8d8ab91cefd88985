package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.NodeID, c.RaftBind, c.DataDir = "n1", "127.0.0.1:7000", "/tmp/x"
		return c
	}
	tests := []struct {
		name string
		mod  func(c *Config)
		want string // substring of the error, "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no id", func(c *Config) { c.NodeID = "" }, "NodeID is empty"},
		{"no dir", func(c *Config) { c.DataDir = "" }, "DataDir is empty"},
		{"no bind", func(c *Config) { c.RaftBind = "" }, "RaftBind is empty"},
		{"bad bind", func(c *Config) { c.RaftBind = "nope" }, "RaftBind"},
		{"unspecified advertise", func(c *Config) { c.RaftAdvertise = "0.0.0.0:7000" }, "not a dialable"},
		{"bad peer", func(c *Config) { c.Peers = []Peer{{ID: "n2"}} }, "peer 0"},
		{"lease over heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, "LeaderLeaseTimeout"},
		{"election under heartbeat", func(c *Config) { c.ElectionTimeout = 100 * time.Millisecond }, "ElectionTimeout 100ms is below HeartbeatTimeout"},
		{"heartbeat too short", func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = time.Millisecond, time.Millisecond }, "HeartbeatTimeout 1ms is below Raft's minimum"},
		{"commit timeout too short", func(c *Config) { c.CommitTimeout = time.Microsecond }, "CommitTimeout"},
		{"append entries too large", func(c *Config) { c.MaxAppendEntries = 1025 }, "MaxAppendEntries 1025"},
		{"in memory needs no dir", func(c *Config) { c.InMemory, c.DataDir, c.RaftBind = true, "", "" }, ""},
		{"zero tunables are defaults", func(c *Config) { *c = Config{NodeID: "n", InMemory: true} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteRepliesInOrder(t *testing.T) {
	n := mustNode(t, fastConfig(t, "n1"), newFakeFSM(), true)
	ctx := context.Background()
	tests := []struct {
		name string
		ops  []command.Op
		want []string
	}{
		{"one", []command.Op{cmd("sadd", "s", "a")}, []string{":1\r\n"}},
		{"several", []command.Op{cmd("sadd", "s", "a", "b"), cmd("sadd", "s", "c"), cmd("srem", "s", "a", "z")},
			[]string{":1\r\n", ":1\r\n", ":1\r\n"}},
		{"syntax error in the middle keeps its place", []command.Op{cmd("sadd", "t", "1"), cmd("bogus"), cmd("sadd", "t", "1", "2")},
			[]string{":1\r\n", "-ERR syntax error\r\n", ":1\r\n"}},
		{"pre-decided error op", []command.Op{{Kind: command.OpReply, Reply: command.Error("ERR x")}, cmd("sadd", "u", "1")},
			[]string{"-ERR x\r\n", ":1\r\n"}},
		{"transaction", []command.Op{{Kind: command.OpTx, Tx: &command.Tx{Ops: []command.Op{cmd("sadd", "v", "1"), cmd("bogus"), cmd("sadd", "v", "1", "2")}}}},
			[]string{"*3\r\n:1\r\n-ERR syntax error\r\n:1\r\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := n.Write(ctx, tt.ops)
			if len(got) != len(tt.want) {
				t.Fatalf("Write returned %d replies, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if string(got[i]) != tt.want[i] {
					t.Errorf("reply %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	if got := string(n.Read(ctx, args("smembers", "s"), false)); got != "*2\r\n$1\r\nb\r\n$1\r\nc\r\n" {
		t.Errorf("SMEMBERS s = %q", got)
	}
}

func TestWriteAllErrorsNeverReachTheLog(t *testing.T) {
	f := newFakeFSM()
	n := mustNode(t, fastConfig(t, "n1"), f, true)
	before := n.st.entries.Load()
	got := n.Write(context.Background(), []command.Op{cmd("bogus"), cmd("expire", "k", "notanumber")})
	want := []string{"-ERR syntax error\r\n", "-" + command.ErrNotInteger + "\r\n"}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("reply %d = %q, want %q", i, got[i], want[i])
		}
	}
	if after := n.st.entries.Load(); after != before {
		t.Errorf("entries proposed went from %d to %d, want no entry for an all-error write", before, after)
	}
}

func TestConcurrentWritesAreBatched(t *testing.T) {
	f := newFakeFSM()
	n := mustNode(t, fastConfig(t, "n1"), f, true)
	const writers, perWriter = 64, 40
	before := f.entryCount()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				m := fmt.Sprintf("%d-%d", w, i)
				got := n.Write(context.Background(), []command.Op{cmd("sadd", "big", m), cmd("sadd", "w"+m, "x")})
				if string(got[0]) != ":1\r\n" || string(got[1]) != ":1\r\n" {
					errs <- fmt.Errorf("Write(sadd big %s) = %q", m, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ops := writers * perWriter * 2
	entries := f.entryCount() - before
	t.Logf("%d ops in %d entries (%.1f ops/entry)", ops, entries, float64(ops)/float64(entries))
	if entries >= writers*perWriter {
		t.Errorf("%d Write calls took %d entries, want fewer (group commit)", writers*perWriter, entries)
	}
	if got, want := string(n.Read(context.Background(), args("scard", "big"), false)), fmt.Sprintf(":%d\r\n", writers*perWriter); got != want {
		t.Errorf("SCARD big = %q, want %q", got, want)
	}
}

func TestOversizedWrites(t *testing.T) {
	cfg := fastConfig(t, "n1")
	cfg.MaxEntryBytes = 4096
	cfg.MaxOpBytes = 8192
	f := newFakeFSM()
	n := mustNode(t, cfg, f, true)
	ctx := context.Background()

	huge := strings.Repeat("x", 9000)
	before := n.st.entries.Load()
	// Over the group-commit target but under MaxOpBytes: alone in an entry.
	if got := n.Write(ctx, []command.Op{cmd("sadd", "big", strings.Repeat("z", 6000))}); string(got[0]) != ":1\r\n" {
		t.Errorf("Write(6000-byte member) = %q, want :1", got[0])
	}
	before = n.st.entries.Load()
	got := n.Write(ctx, []command.Op{cmd("sadd", "k", huge)})
	if !strings.HasPrefix(string(got[0]), "-ERR the command is") {
		t.Errorf("Write(huge) = %q, want the entry-limit error", got[0])
	}
	if after := n.st.entries.Load(); after != before {
		t.Errorf("an oversized command was proposed (%d entries, was %d)", after, before)
	}

	// A request bigger than one entry but made of ops that fit is split
	// over entries, replies still in order.
	var ops []command.Op
	for i := range 20 {
		ops = append(ops, cmd("sadd", "split", fmt.Sprintf("%03d-%s", i, strings.Repeat("y", 500))))
	}
	ops = append(ops, cmd("sadd", "split", huge))
	got = n.Write(ctx, ops)
	for i := range 20 {
		if string(got[i]) != ":1\r\n" {
			t.Errorf("reply %d = %q, want :1", i, got[i])
		}
	}
	if !strings.HasPrefix(string(got[20]), "-ERR the command is") {
		t.Errorf("reply 20 = %q, want the entry-limit error", got[20])
	}
	if entries := n.st.entries.Load() - before; entries < 3 {
		t.Errorf("a 10 KB request went into %d entries of at most 4 KB", entries)
	}
	if got := string(n.Read(ctx, args("scard", "split"), false)); got != ":20\r\n" {
		t.Errorf("SCARD split = %q, want :20", got)
	}
}

func TestWriteCanceledBeforeProposing(t *testing.T) {
	n := mustNode(t, fastConfig(t, "n1"), newFakeFSM(), true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Either the proposer took it first (then it ran) or the caller gave up
	// first (then it must say it was not proposed): never a wrong "unknown"
	// when it was not proposed, and never a success reply that did not run.
	got := n.Write(ctx, []command.Op{cmd("sadd", "c", "1")})
	switch s := string(got[0]); {
	case s == ":1\r\n":
		if r := string(n.Read(context.Background(), args("scard", "c"), false)); r != ":1\r\n" {
			t.Errorf("write acknowledged but SCARD c = %q", r)
		}
	case strings.HasPrefix(s, "-TRYAGAIN"):
		if r := string(n.Read(context.Background(), args("scard", "c"), false)); r != ":0\r\n" {
			t.Errorf("write refused as not proposed but SCARD c = %q", r)
		}
	case strings.HasPrefix(s, "-CLUSTERDOWN"):
	default:
		t.Errorf("Write with a canceled context = %q", s)
	}
}

func TestReadsAreBatchedAndSeeWrites(t *testing.T) {
	n := mustNode(t, fastConfig(t, "n1"), newFakeFSM(), true)
	ctx := context.Background()
	const readers = 32
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("r%d", r)
			for i := range 20 {
				n.Write(ctx, []command.Op{cmd("sadd", key, fmt.Sprint(i))})
				// A linearizable read right after an acknowledged write
				// must see it.
				if got, want := string(n.Read(ctx, args("scard", key), false)), fmt.Sprintf(":%d\r\n", i+1); got != want {
					errs <- fmt.Errorf("SCARD %s after %d adds = %q, want %q", key, i+1, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reads, rounds := n.st.reads.Load(), n.st.readBarriers.Load()
	t.Logf("%d linearizable reads, %d VerifyLeader rounds", reads, rounds)
	if rounds > reads {
		t.Errorf("%d barrier rounds for %d reads", rounds, reads)
	}
	got := n.ReadBatch(ctx, [][][]byte{args("scard", "r0"), args("exists", "r0"), args("exists", "nope")}, false)
	want := []string{":20\r\n", ":1\r\n", ":0\r\n"}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("ReadBatch reply %d = %q, want %q", i, got[i], want[i])
		}
	}
	ws, reply := n.Watch(ctx, args("r0", "nope"))
	if reply != nil || len(ws) != 2 || !ws[0].Exists || ws[1].Exists {
		t.Errorf("Watch = %+v, %q", ws, reply)
	}
}

func TestActiveExpiry(t *testing.T) {
	f := newFakeFSM()
	n := mustNode(t, fastConfig(t, "n1"), f, true)
	ctx := context.Background()
	for i := range 50 {
		k := fmt.Sprintf("tmp%d", i)
		n.Write(ctx, []command.Op{cmd("sadd", k, "m"), cmd("pexpireat", k, "1")})
	}
	n.Write(ctx, []command.Op{cmd("sadd", "keep", "m")})
	testutil.WaitFor(t, 5*time.Second, "active expiry", func() bool {
		keys, _ := f.KeyspaceCounts()
		return keys == 1 && n.st.expired.Load() >= 50
	})

	// Switched off, nothing is deleted in the background.
	if got := string(n.Admin(ctx, args("debug", "set-active-expire", "0"))); got != "+OK\r\n" {
		t.Fatalf("DEBUG SET-ACTIVE-EXPIRE 0 = %q", got)
	}
	n.Write(ctx, []command.Op{cmd("sadd", "late", "m"), cmd("pexpireat", "late", "1")})
	if keys, _ := f.KeyspaceCounts(); keys != 2 {
		t.Errorf("keys = %d, want 2 (the expired key stays stored while active expiry is off)", keys)
	}
	if got := string(n.Read(ctx, args("exists", "late"), false)); got != ":0\r\n" {
		t.Errorf("EXISTS late = %q, want :0 (lazy expiry hides it)", got)
	}
}

func TestAdmin(t *testing.T) {
	f := newFakeFSM()
	n := mustNode(t, fastConfig(t, "n1"), f, true)
	ctx := context.Background()
	n.Write(ctx, []command.Op{cmd("sadd", "k", "a")})
	tests := []struct {
		args []string
		want string // exact reply, or prefix when it ends with "…"
	}{
		{[]string{"config", "get", "set-max-intset-entries"}, "*2\r\n$22\r\nset-max-intset-entries\r\n$3\r\n512\r\n"},
		{[]string{"config", "set", "set-max-intset-entries", "100", "set-max-listpack-value", "32"}, "+OK\r\n"},
		{[]string{"config", "get", "set-max-i*"}, "*2\r\n$22\r\nset-max-intset-entries\r\n$3\r\n100\r\n"},
		{[]string{"CONFIG", "GET", "set-max-listpack-value"}, "*2\r\n$22\r\nset-max-listpack-value\r\n$2\r\n32\r\n"},
		{[]string{"config", "set", "set-max-intset-entries", "-1"}, "-ERR CONFIG SET failed…"},
		{[]string{"config", "set", "nope", "1"}, "-ERR Unknown option…"},
		{[]string{"config", "set", "snapshot-threshold", "100", "snapshot-interval", "5"}, "+OK\r\n"},
		{[]string{"config", "get", "snapshot-*"}, "*8\r\n$18\r\nsnapshot-threshold\r\n$3\r\n100\r\n$17\r\nsnapshot-interval\r\n$2\r\n5s\r\n" +
			"$17\r\nsnapshot-log-size\r\n$8\r\n33554432\r\n$23\r\nsnapshot-log-percentage\r\n$3\r\n100\r\n"},
		{[]string{"config", "set", "snapshot-log-size", "64mb", "snapshot-log-percentage", "0"}, "+OK\r\n"},
		{[]string{"config", "get", "snapshot-log-*"}, "*4\r\n$17\r\nsnapshot-log-size\r\n$8\r\n67108864\r\n$23\r\nsnapshot-log-percentage\r\n$1\r\n0\r\n"},
		{[]string{"config", "set", "snapshot-log-size", "0"}, "+OK\r\n"},
		{[]string{"config", "get", "snapshot-log-size"}, "*2\r\n$17\r\nsnapshot-log-size\r\n$1\r\n0\r\n"},
		{[]string{"config", "set", "snapshot-log-size", "lots"}, "-ERR CONFIG SET failed (possibly related to argument 'snapshot-log-size') - argument must be a memory value\r\n"},
		{[]string{"config", "set", "snapshot-log-percentage", "-5"}, "-ERR CONFIG SET failed (possibly related to argument 'snapshot-log-percentage') - argument must be a non-negative integer\r\n"},
		{[]string{"config", "get", "appendonly"}, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"},
		{[]string{"config", "set", "appendonly", "YES", "save", ""}, "+OK\r\n"},
		{[]string{"config", "get", "appendonly"}, "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"},
		{[]string{"config", "set", "save", "900 1 300 10"}, "+OK\r\n"},
		{[]string{"config", "get", "save"}, "*2\r\n$4\r\nsave\r\n$12\r\n900 1 300 10\r\n"},
		{[]string{"config", "set", "appendonly", "maybe"}, "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'\r\n"},
		{[]string{"config", "set", "save", "900"}, "-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters\r\n"},
		{[]string{"role"}, "*3\r\n$6\r\nmaster\r\n:…"},
		{[]string{"raft.shard", "0", "role"}, "*3\r\n$6\r\nmaster\r\n:…"},
		{[]string{"raft.shard", "1", "role"}, "-ERR this node holds no replica of shard 1\r\n"},
		{[]string{"raft.shard", "map"}, "-ERR RAFT.SHARD MAP needs a sharded node (shard-map)\r\n"},
		{[]string{"raft.shard", "moveslots", "0", "1", "1"}, "-ERR RAFT.SHARD MOVESLOTS needs a sharded node (shard-map)\r\n"},
		{[]string{"raft.shard", "removeshard", "1"}, "-ERR RAFT.SHARD REMOVESHARD needs a sharded node (shard-map)\r\n"},
		{[]string{"raft.shard", "0", "raft.shard", "0", "role"}, "-ERR this node holds no replica of shard 0\r\n"},
		{[]string{"wait", "0", "0"}, ":0\r\n"},
		{[]string{"wait", "1", "10"}, ":0\r\n"},
		{[]string{"save"}, "+OK\r\n"},
		{[]string{"lastsave"}, ":…"},
		{[]string{"debug", "digest"}, "$8\r\ndigest-1\r\n"},
		{[]string{"debug", "nope"}, "-ERR unknown subcommand…"},
		{[]string{"bgsave", "now"}, "-ERR syntax error\r\n"},
	}
	for _, tt := range tests {
		got := string(n.Admin(ctx, args(tt.args...)))
		if p, ok := strings.CutSuffix(tt.want, "…"); ok {
			if !strings.HasPrefix(got, p) {
				t.Errorf("%s = %q, want prefix %q", tt.args, got, p)
			}
		} else if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := f.Limits().MaxListpackValue; got != 32 {
		t.Errorf("replicated set-max-listpack-value = %d, want 32", got)
	}
	if got := string(n.Admin(ctx, args("bgsave"))); got != "+Background saving started\r\n" && !strings.HasPrefix(got, "-ERR Background save already") {
		t.Errorf("BGSAVE = %q", got)
	}
	testutil.WaitFor(t, 5*time.Second, "bgsave to finish", func() bool { return !n.bgsave.Load() })
}

func TestInfo(t *testing.T) {
	n := mustNode(t, fastConfig(t, "n1"), newFakeFSM(), true)
	n.Write(context.Background(), []command.Op{cmd("sadd", "k", "a"), cmd("pexpireat", "k", "99999999999999")})
	secs := map[string]map[string]string{}
	for _, s := range n.Info() {
		m := map[string]string{}
		for _, f := range s.Fields {
			m[f[0]] = f[1]
		}
		secs[s.Name] = m
	}
	checks := []struct{ sec, field, want string }{
		{"Replication", "role", "master"},
		{"Keyspace", "db0", "keys=1,expires=1,avg_ttl=0"},
		{"Raft", "raft_state", "leader"},
		{"Raft", "raft_leader_id", "n1"},
		{"Raft", "raft_num_peers", "0"},
		{"Persistence", "aof_enabled", "0"},
		{"Persistence", "rdb_bgsave_in_progress", "0"},
	}
	for _, c := range checks {
		if got := secs[c.sec][c.field]; got != c.want {
			t.Errorf("INFO %s %s = %q, want %q", c.sec, c.field, got, c.want)
		}
	}
	for _, f := range []string{"used_memory", "used_memory_human", "used_memory_rss", "used_memory_peak"} {
		if secs["Memory"][f] == "" || secs["Memory"][f] == "0" {
			t.Errorf("INFO Memory %s = %q, want a value", f, secs["Memory"][f])
		}
	}
}

func TestCloseRefusesWrites(t *testing.T) {
	n := mustNode(t, fastConfig(t, "n1"), newFakeFSM(), true)
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := n.Write(context.Background(), []command.Op{cmd("sadd", "k", "a")})
	if !strings.HasPrefix(string(got[0]), "-TRYAGAIN") {
		t.Errorf("Write after Close = %q, want -TRYAGAIN", got[0])
	}
	if got := n.Read(context.Background(), args("scard", "k"), false); !strings.HasPrefix(string(got), "-TRYAGAIN") {
		t.Errorf("Read after Close = %q, want -TRYAGAIN", got)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// diskConfig is a single-node config on a real data dir (raft-boltdb, file
// snapshots, TCP transport on a free loopback port).
func diskConfig(t testing.TB, dir string) Config {
	cfg := fastConfig(t, "n1")
	cfg.InMemory = false
	cfg.DataDir = dir
	cfg.RaftBind = "127.0.0.1:0"
	return cfg
}

func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := mustNode(t, diskConfig(t, dir), newFakeFSM(), true)
	var acked []string
	for i := range 100 {
		m := fmt.Sprint(i)
		if got := n.Write(ctx, []command.Op{cmd("sadd", "s", m)}); string(got[0]) == ":1\r\n" {
			acked = append(acked, m)
		}
	}
	if len(acked) != 100 {
		t.Fatalf("%d of 100 writes acknowledged", len(acked))
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	n2 := mustNode(t, diskConfig(t, dir), newFakeFSM(), true)
	if got := string(n2.Read(ctx, args("scard", "s"), false)); got != ":100\r\n" {
		t.Errorf("after restart SCARD s = %q, want :100", got)
	}
}

func TestSnapshotTruncationRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := diskConfig(t, dir)
	cfg.TrailingLogs = 5
	cfg.SnapshotThreshold = 1 << 30 // only on request
	n := mustNode(t, cfg, newFakeFSM(), true)
	for i := range 50 {
		n.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(i))})
	}
	if got := string(n.Admin(ctx, args("save"))); got != "+OK\r\n" {
		t.Fatalf("SAVE = %q", got)
	}
	first, err := n.logs.FirstIndex()
	if err != nil || first <= 1 {
		t.Errorf("after SAVE the log starts at %d (%v), want it truncated", first, err)
	}
	for i := 50; i < 70; i++ {
		n.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(i))})
	}
	n.Close()

	n2 := mustNode(t, cfg, newFakeFSM(), true)
	if got := string(n2.Read(ctx, args("scard", "s"), false)); got != ":70\r\n" {
		t.Errorf("after snapshot + restart SCARD s = %q, want :70", got)
	}
	if got := n2.rd.floor.Load(); got == 0 {
		t.Errorf("restored snapshot index = 0, want the SAVE's")
	}
}

// snapshotFiles returns every file under dir/snapshots with its content.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join(dir, snapshotsDir)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCorruptLatestSnapshotStopsStart(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t *testing.T, snapDir string)
		fsmErr  error
	}{
		{"flipped byte", func(t *testing.T, snapDir string) {
			p := filepath.Join(snapDir, "state.bin")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"unreadable meta", func(t *testing.T, snapDir string) {
			if err := os.WriteFile(filepath.Join(snapDir, "meta.json"), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"state machine refuses it", func(*testing.T, string) {}, errRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			cfg := diskConfig(t, dir)
			n := mustNode(t, cfg, newFakeFSM(), true)
			for round := range 2 { // two snapshots: an older good one stays
				for i := range 10 {
					n.Write(ctx, []command.Op{cmd("sadd", "s", fmt.Sprint(round, i))})
				}
				if got := string(n.Admin(ctx, args("save"))); got != "+OK\r\n" {
					t.Fatalf("SAVE = %q", got)
				}
			}
			n.Close()
			list, err := n.snaps.List()
			if err != nil || len(list) != 2 {
				t.Fatalf("snapshots: %d, %v; want 2", len(list), err)
			}
			tt.corrupt(t, filepath.Join(dir, snapshotsDir, list[0].ID))
			before := snapshotFiles(t, dir)

			f := newFakeFSM()
			f.restoreErr = tt.fsmErr
			n2, err := newNode(cfg, f)
			if err == nil {
				n2.Close()
				t.Fatal("newNode with a corrupt latest snapshot succeeded")
			}
			if !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), list[0].ID) {
				t.Errorf("newNode error = %v, want ErrCorruptSnapshot naming %s", err, list[0].ID)
			}
			t.Logf("error: %v", err)
			after := snapshotFiles(t, dir)
			if len(after) != len(before) {
				t.Errorf("snapshot files changed: %d before, %d after", len(before), len(after))
			}
			for p, b := range before {
				if after[p] != b {
					t.Errorf("%s changed", p)
				}
			}
		})
	}
}

// Every write acknowledged before or during Close survives a restart, every
// writer returns, and the node's goroutines stop.
func TestCloseUnderLoadKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	before := runtime.NumGoroutine()
	cfg := diskConfig(t, dir)
	n := mustNode(t, cfg, newFakeFSM(), true)

	const writers = 16
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	started := make(chan struct{}, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				m := fmt.Sprintf("%d-%d", w, i)
				got := string(n.Write(ctx, []command.Op{cmd("sadd", "s", m)})[0])
				switch {
				case got == ":1\r\n":
					mu.Lock()
					acked = append(acked, m)
					mu.Unlock()
				case strings.HasPrefix(got, "-TRYAGAIN"), strings.HasPrefix(got, "-CLUSTERDOWN"):
					return
				default:
					t.Errorf("Write = %q", got)
					return
				}
				if i == 20 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range writers {
		<-started
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait() // every writer got an answer
	testutil.WaitFor(t, 5*time.Second, "the node's goroutines to stop", func() bool {
		return runtime.NumGoroutine() <= before+2
	})

	f := newFakeFSM()
	n2 := mustNode(t, cfg, f, true)
	n2.Read(ctx, args("scard", "s"), false) // barrier: the log is replayed
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range acked {
		if !f.sets["s"][m] {
			t.Errorf("acknowledged member %s lost across Close and restart", m)
		}
	}
	t.Logf("%d acknowledged writes, all kept", len(acked))
}

// State loaded outside the log (an import) is not reported as saved before
// Raft can snapshot it; once the node leads, SAVE persists it.
func TestSaveOfStateOutsideTheLog(t *testing.T) {
	ctx := context.Background()
	preloaded := func() *fakeFSM {
		f := newFakeFSM()
		f.sets["imported"] = map[string]bool{"a": true}
		return f
	}
	cfg := fastConfig(t, "n1")
	cfg.Bootstrap = false // never leads: nothing is ever applied
	n := mustNode(t, cfg, preloaded(), false)
	if got := string(n.Admin(ctx, args("save"))); !strings.HasPrefix(got, "-ERR snapshot failed: this node has applied no log entry") {
		t.Errorf("SAVE before any entry was applied = %q, want an error", got)
	}

	dir := t.TempDir()
	n2 := mustNode(t, diskConfig(t, dir), preloaded(), false)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := n2.WaitLeader(wctx); err != nil {
		t.Fatal(err)
	}
	if got := string(n2.Admin(ctx, args("save"))); got != "+OK\r\n" {
		t.Fatalf("SAVE on the leader = %q", got)
	}
	n2.Close()
	f := newFakeFSM()
	n3 := mustNode(t, diskConfig(t, dir), f, true)
	if got := string(n3.Read(ctx, args("exists", "imported"), false)); got != ":1\r\n" {
		t.Errorf("after SAVE and restart EXISTS imported = %q, want :1", got)
	}
}

// A Raft port another process holds is a clear start-up error (it used to
// panic closing a nil transport).
func TestRaftPortInUseIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := diskConfig(t, t.TempDir())
	cfg.RaftBind = l.Addr().String()
	n, err := newNode(cfg, newFakeFSM())
	if err == nil {
		n.Close()
		t.Fatal("newNode on a port in use: no error")
	}
	if !strings.Contains(err.Error(), "listen on "+cfg.RaftBind) {
		t.Fatalf("error = %v, want it to name the address", err)
	}
}
