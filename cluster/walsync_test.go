package cluster

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/testutil"
)

func oneP() int  { return 1 }
func twoPs() int { return 2 }

// A segment file's Sync holds the processor only with one P, after the
// file's own first Sync (which also syncs the new file's directory), and
// while fsyncs are quick; each one still reaches the disk without error.
func TestSegmentSyncHoldsCPUOnlyWhenItPays(t *testing.T) {
	cases := []struct {
		name  string
		procs func() int
		avg   time.Duration // the fsyncs' average, forced before the second Sync
		held  uint64        // of two Syncs
	}{
		{"one P, quick disk", oneP, 100 * time.Microsecond, 1},
		{"two Ps, quick disk", twoPs, 100 * time.Microsecond, 0},
		{"one P, slow disk", oneP, time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stats := &syncStats{}
			vfs := newSyncFS(stats)
			vfs.procs = c.procs
			f, err := vfs.Create(t.TempDir(), "seg", 4096)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := range 2 {
				if _, err := f.WriteAt([]byte("entry"), int64(i*8)); err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					stats.avg.Store(int64(c.avg))
				}
				if err := f.Sync(); err != nil {
					t.Fatalf("sync %d: %v", i, err)
				}
			}
			if got := stats.syncs.Load(); got != 2 {
				t.Errorf("syncs = %d, want 2", got)
			}
			if runtime.GOOS != "linux" {
				c.held = 0
			}
			if got := stats.held.Load(); got != c.held {
				t.Errorf("syncs holding the CPU = %d, want %d", got, c.held)
			}
		})
	}
}

// A failed fsync on the held path is an error, not a silent success: Raft
// must not count an entry stored that the disk may not have.
func TestHeldSyncOfClosedFileFails(t *testing.T) {
	stats := &syncStats{}
	vfs := newSyncFS(stats)
	vfs.procs = oneP
	f, err := vfs.Create(t.TempDir(), "seg", 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	stats.avg.Store(int64(100 * time.Microsecond))
	if err := f.Sync(); err == nil {
		t.Fatal("Sync of a closed segment file returned nil")
	}
	if runtime.GOOS == "linux" && stats.held.Load() != 1 {
		t.Errorf("the failed fsync was not the held one (held %d)", stats.held.Load())
	}
}

// With one P the whole log goes through held fsyncs, and what was stored is
// there after the log is reopened.
func TestWALOnHeldSyncsKeepsEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), walDir)
	logger := testutil.Logger(t, "wal")
	open := func() walStore {
		vfs := newSyncFS(&syncStats{})
		vfs.procs = oneP
		w, err := openWALOn(dir, logger, vfs)
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
	if w.syncs.syncs.Load() < batches {
		t.Errorf("%d fsyncs for %d batches", w.syncs.syncs.Load(), batches)
	}
	if runtime.GOOS == "linux" && time.Duration(w.syncs.avg.Load()) < quickSyncBelow && w.syncs.held.Load() == 0 {
		t.Error("no fsync held the CPU with one P and quick fsyncs")
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
