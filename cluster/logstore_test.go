package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// logIn reports where dir's log lives and how many entries raft.db's log
// bucket holds (the node must be closed).
func logIn(t *testing.T, dir string) (hasWAL bool, boltLast uint64) {
	t.Helper()
	hasWAL, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		t.Fatal(err)
	}
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, raftDBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if boltLast, err = b.LastIndex(); err != nil {
		t.Fatal(err)
	}
	return hasWAL, boltLast
}

// writeMembers SADDs members [from, to) to s and fails unless each is
// acknowledged as new.
func writeMembers(t *testing.T, n *Node, from, to int) {
	t.Helper()
	writePaddedMembers(t, n, from, to, "")
}

// writePaddedMembers SADDs to s the members i+pad for i in [from, to), one
// entry each.
func writePaddedMembers(t *testing.T, n *Node, from, to int, pad string) {
	t.Helper()
	for i := from; i < to; i++ {
		if got := string(n.Write(context.Background(), []command.Op{cmd("sadd", "s", fmt.Sprint(i, pad))})[0]); got != ":1\r\n" {
			t.Fatalf("SADD s %d = %q", i, got)
		}
	}
}

func scard(t *testing.T, n *Node) string {
	t.Helper()
	return string(n.Read(context.Background(), args("scard", "s"), false))
}

func TestWALRestartKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(t, dir)
	cfg.LogStore = LogStoreWAL
	n := mustNode(t, cfg, newFakeFSM(), true)
	writeMembers(t, n, 0, 100)
	// Each acknowledged write waited for an fsync of its own.
	if syncs, err := strconv.Atoi(infoField(n, "Raft", "raft_log_syncs")); err != nil || syncs < 100 {
		t.Errorf("INFO raft_log_syncs = %d (%v) after 100 writes one at a time, want at least 100", syncs, err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if hasWAL, boltLast := logIn(t, dir); !hasWAL || boltLast != 0 {
		t.Fatalf("wal/ present %v, raft.db's last log index %d: want the log in wal/ only", hasWAL, boltLast)
	}
	n2 := mustNode(t, cfg, newFakeFSM(), true)
	if got := scard(t, n2); got != ":100\r\n" {
		t.Errorf("after restart SCARD s = %q, want :100", got)
	}
}

// A directory moves between the stores by restarting with the other
// setting, keeping every acknowledged write, also when its log starts after
// a snapshot rather than at index 1.
func TestLogStoreMigration(t *testing.T) {
	dir := t.TempDir()
	cfg := diskConfig(t, dir)
	cfg.TrailingLogs = 5
	cfg.SnapshotThreshold = 1 << 30 // only on request
	cfg.LogStore = LogStoreBolt
	n := mustNode(t, cfg, newFakeFSM(), true)
	writeMembers(t, n, 0, 40)
	if got := string(n.Admin(context.Background(), args("save"))); got != "+OK\r\n" {
		t.Fatalf("SAVE = %q", got)
	}
	writeMembers(t, n, 40, 60)
	n.Close()
	_, boltLast := logIn(t, dir)
	if boltLast == 0 {
		t.Fatal("the bolt node left no log to migrate")
	}

	steps := []struct {
		store    string
		wantWAL  bool
		from, to int
	}{
		{LogStoreWAL, true, 60, 80},
		{LogStoreWAL, true, 80, 90}, // no migration the second time
		{LogStoreBolt, false, 90, 100},
		{LogStoreWAL, true, 100, 110},
	}
	for _, st := range steps {
		cfg.LogStore = st.store
		n := mustNode(t, cfg, newFakeFSM(), true)
		if got, want := scard(t, n), fmt.Sprintf(":%d\r\n", st.from); got != want {
			t.Fatalf("on %s after the restart SCARD s = %q, want %q", st.store, got, want)
		}
		if first, err := n.logs.FirstIndex(); err != nil || first <= 1 {
			t.Errorf("on %s the log starts at %d (%v), want after the snapshot", st.store, first, err)
		}
		writeMembers(t, n, st.from, st.to)
		if err := n.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		hasWAL, boltLast := logIn(t, dir)
		if hasWAL != st.wantWAL || (st.wantWAL && boltLast != 0) || (!st.wantWAL && boltLast == 0) {
			t.Fatalf("on %s: wal/ present %v, raft.db's last log index %d", st.store, hasWAL, boltLast)
		}
	}
	n = mustNode(t, cfg, newFakeFSM(), true)
	if got := scard(t, n); got != ":110\r\n" {
		t.Errorf("at the end SCARD s = %q, want :110", got)
	}
}

func testLogs(first, last uint64) []*raft.Log {
	var out []*raft.Log
	for i := first; i <= last; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d", i))})
	}
	return out
}

// logEntries reads every entry of s as "index:data".
func logEntries(t *testing.T, s raft.LogStore) []string {
	t.Helper()
	first, last, err := bounds(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := first; i <= last && last > 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog %d: %v", i, err)
		}
		out = append(out, fmt.Sprintf("%d:%s", l.Index, l.Data))
	}
	return out
}

// The states a crash can leave a migration in, and what the next start
// makes of each: wal/ is the log whenever it exists.
func TestLogStoreInterruptedMigration(t *testing.T) {
	logger := testutil.Logger(t, t.Name())
	seed := func(t *testing.T, boltLogs, walLogs []*raft.Log, extra string) (string, *raftboltdb.BoltStore) {
		dir := t.TempDir()
		b, err := raftboltdb.NewBoltStore(filepath.Join(dir, raftDBFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if len(boltLogs) > 0 {
			if err := b.StoreLogs(boltLogs); err != nil {
				t.Fatal(err)
			}
		}
		if walLogs != nil {
			w, err := openWAL(filepath.Join(dir, walDir), logger)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.StoreLogs(walLogs); err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		if extra != "" {
			// An unfinished copy: a wal directory wal.Open would reject.
			if err := os.MkdirAll(filepath.Join(dir, extra), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, extra, "wal-meta.db"), []byte("torn"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir, b
	}
	open := func(t *testing.T, dir, kind string, b *raftboltdb.BoltStore) raft.LogStore {
		s, c, err := openLogStore(dir, kind, b, logger)
		if err != nil {
			t.Fatalf("openLogStore %s: %v", kind, err)
		}
		if c != nil {
			t.Cleanup(func() { c.Close() })
		}
		return s
	}
	want := func(t *testing.T, what string, got []string, first, last uint64) {
		t.Helper()
		var w []string
		for i := first; i <= last && last > 0; i++ {
			w = append(w, fmt.Sprintf("%d:entry %d", i, i))
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v", what, got, w)
		}
	}

	t.Run("copy to wal cut short", func(t *testing.T) {
		dir, b := seed(t, testLogs(3, 20), nil, walTmpDir)
		s := open(t, dir, LogStoreWAL, b)
		want(t, "the wal log", logEntries(t, s), 3, 20)
		want(t, "raft.db's log", logEntries(t, b), 0, 0)
	})
	t.Run("crash after the rename to wal", func(t *testing.T) {
		// raft.db still holds the entries it had (an older, shorter view).
		dir, b := seed(t, testLogs(3, 10), testLogs(3, 20), "")
		s := open(t, dir, LogStoreWAL, b)
		want(t, "the wal log", logEntries(t, s), 3, 20)
		want(t, "raft.db's log", logEntries(t, b), 0, 0)
	})
	t.Run("copy back to bolt cut short", func(t *testing.T) {
		dir, b := seed(t, testLogs(3, 7), testLogs(3, 20), "")
		s := open(t, dir, LogStoreBolt, b)
		want(t, "raft.db's log", logEntries(t, s), 3, 20)
		if has, _ := exists(filepath.Join(dir, walDir)); has {
			t.Error("wal/ still there after the copy back")
		}
	})
	t.Run("crash after the rename to wal.old", func(t *testing.T) {
		dir, b := seed(t, testLogs(3, 20), nil, walOldDir)
		s := open(t, dir, LogStoreBolt, b)
		want(t, "raft.db's log", logEntries(t, s), 3, 20)
		if has, _ := exists(filepath.Join(dir, walOldDir)); has {
			t.Error("wal.old/ still there")
		}
	})
	t.Run("unknown store", func(t *testing.T) {
		dir, b := seed(t, nil, nil, "")
		if _, _, err := openLogStore(dir, "lmdb", b, logger); err == nil {
			t.Error("openLogStore lmdb: no error")
		}
	})
}

// raft-wal refuses an append past a gap; after a follower installs a
// snapshot Raft must therefore empty its log (MonotonicLogStore, which the
// node's wrappers pass on), or the follower never accepts another entry.
func TestSnapshotInstallOnLaggingWALFollower(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		cfg.InMemory = false
		cfg.DataDir = t.TempDir()
		cfg.LogStore = LogStoreWAL
		cfg.TrailingLogs = 5
		cfg.SnapshotThreshold = 1 << 30
	})
	l := c.leader()
	ctx := context.Background()
	lag := c.followers(l)[0]
	c.published()
	if _, ok := lag.node.logs.(raft.MonotonicLogStore); !ok {
		t.Fatal("the node's log store hides raft-wal's MonotonicLogStore")
	}
	lag.trans.DisconnectAll()
	for _, m := range c.followers(lag) {
		m.trans.Disconnect(raft.ServerAddress(lag.id))
	}
	// Retried through elections a loaded machine holds (lag is cut off,
	// the other two must agree); SCARD below counts them all.
	for i := range 100 {
		addRetry(t, l.node, "s", fmt.Sprint(i))
	}
	for _, m := range c.followers(lag) {
		if got := string(m.node.Admin(ctx, args("raft.snapshot"))); got != "+OK\r\n" {
			t.Fatalf("RAFT.SNAPSHOT on %s = %q", m.id, got)
		}
	}
	for _, m := range c.followers(lag) {
		lag.trans.Connect(raft.ServerAddress(m.id), m.trans)
		m.trans.Connect(raft.ServerAddress(lag.id), lag.trans)
	}
	// hashicorp/raft's leader backs off a follower it failed to reach,
	// doubling up to 10.24 s after 12 failures (replication.go,
	// maxFailureScale): a partition longer than about 10 s, which the
	// writes above take at a load of 20, leaves up to that long before the
	// leader tries lag again, then the snapshot's transfer.
	testutil.WaitFor(t, 60*time.Second, "the installed snapshot in "+lag.id+"'s Raft stats", func() bool {
		return lag.node.raft.Stats()["last_snapshot_index"] != "0"
	})
	// Entries after the snapshot reach the follower's log.
	l = c.leader()
	for i := 100; i < 120; i++ {
		addRetry(t, l.node, "s", fmt.Sprint(i))
	}
	c.converged(l)
	if got := string(lag.node.Read(ctx, args("scard", "s"), false)); got != ":120\r\n" {
		t.Errorf("%s SCARD s = %q, want :120", lag.id, got)
	}
}

var _ raft.MonotonicLogStore = (*wal.WAL)(nil)

// BenchmarkLogStoreAppend appends batches of entries to each log store, as
// Raft's leader does with a group-committed batch: one StoreLogs call per
// batch, durable when it returns.
//
//	go test -run '^$' -bench LogStoreAppend -benchtime 2000x ./cluster/
func BenchmarkLogStoreAppend(b *testing.B) {
	for _, store := range []string{LogStoreBolt, LogStoreWAL} {
		for _, bc := range []struct{ batch, size int }{{1, 4096}, {16, 4096}, {1, 256}} {
			b.Run(fmt.Sprintf("store=%s/batch=%d/size=%d", store, bc.batch, bc.size), func(b *testing.B) {
				dir := b.TempDir()
				bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, raftDBFile))
				if err != nil {
					b.Fatal(err)
				}
				defer bolt.Close()
				s, c, err := openLogStore(dir, store, bolt, testutil.Logger(b, b.Name()))
				if err != nil {
					b.Fatal(err)
				}
				if c != nil {
					defer c.Close()
				}
				data := make([]byte, bc.size)
				batch := make([]*raft.Log, bc.batch)
				idx := uint64(1)
				b.SetBytes(int64(bc.batch * bc.size))
				b.ResetTimer()
				for range b.N {
					for j := range batch {
						batch[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
						idx++
					}
					if err := s.StoreLogs(batch); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
