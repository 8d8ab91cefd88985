package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// TestUndecodableEntryExits: a node whose log holds an entry written by a
// newer raftset stops applying when it reaches it and exits non-zero, saying
// so, instead of panicking.
func TestUndecodableEntryExits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// The test writes the entry into raft.db's log directly.
	p := startProc(t, dir, "--raft-log-store", "bolt")
	waitWritable(t, p.addr)
	c := dial(t, p.addr)
	if r := do(t, c, "SADD", "s", "a"); r != ":1\r\n" {
		t.Fatalf("SADD = %q", r)
	}
	p.stop(t)

	// Append the entry as a newer leader would have replicated it.
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	bad := &raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand,
		Data: []byte{command.Version + 1, byte(command.TypeBatch), 0, 0}}
	if err := store.StoreLog(bad); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "--port", fmt.Sprint(testutil.FreePort(t)),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--dir", dir, "--raft-log-store", "bolt")
	cmd.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
	cmd.Stderr = &syncWriter{w: &out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("raftset kept running past an entry it cannot decode:\n%s", out.String())
	}
	logs := out.String()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", code, logs)
	}
	if strings.Contains(logs, "panic") {
		t.Errorf("raftset panicked:\n%s", logs)
	}
	for _, want := range []string{
		"entry written by a newer raftset (format version 4, this binary reads up to 3)",
		fmt.Sprintf("index=%d", bad.Index), fmt.Sprintf("format_version=%d", command.Version+1),
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("output lacks %q:\n%s", want, logs)
		}
	}
	t.Logf("exit: %s", lastLine(logs))
}
