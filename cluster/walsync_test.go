package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/testutil"
)

// heldSyncFS is a syncFS that decides as a process with one P and one log
// would, on a disk as quick as quickBelow says (an hour: always quick).
func heldSyncFS(stats *syncStats, alone bool, quickBelow time.Duration) syncFS {
	vfs := newSyncFS(stats)
	vfs.alone = func() bool { return alone }
	vfs.quickBelow = quickBelow
	return vfs
}

// Which fsyncs of a segment file hold the CPU: never the file's first
// (raft-wal's own Sync, which also syncs a new file's directory), never
// with more Ps or logs, and on a slow disk only one in probeEvery.
func TestSegmentSyncHoldsCPUOnlyWhenItPays(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fsyncs hold the CPU on Linux only")
	}
	cases := []struct {
		name       string
		alone      bool
		quickBelow time.Duration
		syncs      int
		held       uint64
	}{
		{"one P and log, quick disk", true, time.Hour, 3, 2},
		{"more Ps or logs, quick disk", false, time.Hour, 3, 0},
		// The second Sync is held (nothing measured yet), then none until
		// the probe: Syncs 2 and 65 of 70.
		{"one P and log, slow disk", true, time.Nanosecond, 70, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stats := &syncStats{}
			f, err := heldSyncFS(stats, c.alone, c.quickBelow).Create(t.TempDir(), "seg", 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := range c.syncs {
				if _, err := f.WriteAt([]byte("entry"), int64(i*8)); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatalf("sync %d: %v", i, err)
				}
			}
			if got := stats.syncs.Load(); got != uint64(c.syncs) {
				t.Errorf("syncs = %d, want %d", got, c.syncs)
			}
			if got := stats.held.Load(); got != c.held {
				t.Errorf("syncs holding the CPU = %d, want %d", got, c.held)
			}
		})
	}
}

// A failed fsync on the held path is an error naming the file, not a
// silent success: Raft must not count an entry stored that the disk may
// not have. A pipe cannot be fsynced (EINVAL).
func TestHeldSyncReportsTheDisksError(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fsyncs hold the CPU on Linux only")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stats := &syncStats{}
	f := &syncFile{WritableFile: w, fs: heldSyncFS(stats, true, time.Hour), firstDone: true}
	err = f.Sync()
	var pe *os.PathError
	if !errors.Is(err, syscall.EINVAL) || !errors.As(err, &pe) || pe.Path != w.Name() {
		t.Fatalf("held fsync of a pipe = %v, want a sync error naming %s with EINVAL", err, w.Name())
	}
	if stats.held.Load() != 1 {
		t.Errorf("the failed fsync was not the held one (held %d)", stats.held.Load())
	}
}

// A closed segment file's Sync fails as os says it does.
func TestHeldSyncOfClosedFileFails(t *testing.T) {
	f, err := heldSyncFS(&syncStats{}, true, time.Hour).Create(t.TempDir(), "seg", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := f.Sync(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Sync of a closed segment file = %v, want os.ErrClosed", err)
	}
}

// A whole log on held fsyncs keeps what it stored across a reopen, and
// every fsync but each segment's first held the CPU.
func TestWALOnHeldSyncsKeepsEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), walDir)
	logger := testutil.Logger(t, "wal")
	open := func() walStore {
		w, err := openWALOn(dir, logger, heldSyncFS(&syncStats{}, true, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	const batches, per = 50, 4
	for b := range batches {
		var logs []*raft.Log
		for i := range per {
			idx := uint64(b*per + i + 1)
			logs = append(logs, &raft.Log{Index: idx, Term: 1, Data: []byte(fmt.Sprintf("sadd s %d", idx))})
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
	syncs, held := w.syncs.syncs.Load(), w.syncs.held.Load()
	if syncs < batches {
		t.Errorf("%d fsyncs for %d batches", syncs, batches)
	}
	if runtime.GOOS == "linux" && held != syncs-1 {
		t.Errorf("%d of %d fsyncs held the CPU, want all but the segment's first", held, syncs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open()
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil || last != batches*per {
		t.Fatalf("last index after reopening = %d, %v; want %d", last, err, batches*per)
	}
	for idx := uint64(1); idx <= last; idx++ {
		var l raft.Log
		if err := w.GetLog(idx, &l); err != nil {
			t.Fatalf("entry %d: %v", idx, err)
		}
		if want := []byte(fmt.Sprintf("sadd s %d", idx)); !bytes.Equal(l.Data, want) {
			t.Fatalf("entry %d = %q, want %q", idx, l.Data, want)
		}
	}
}

// The process counts its open logs, whichever way they close.
func TestOpenLogsCounted(t *testing.T) {
	before := openLogs.Load()
	w, err := openWAL(filepath.Join(t.TempDir(), walDir), testutil.Logger(t, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	if got := openLogs.Load(); got != before+1 {
		t.Errorf("open logs after opening one = %d, want %d", got, before+1)
	}
	w.Close()
	w.Close() // a second Close must not count the log out twice
	if got := openLogs.Load(); got != before {
		t.Errorf("open logs after closing it = %d, want %d", got, before)
	}
}
