package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// The test binary doubles as the raftset binary: with RAFTSET_TEST_MAIN set
// it runs main's logic with the given arguments. That lets tests start real
// processes and kill -9 them without building anything else.
func TestMain(m *testing.M) {
	if os.Getenv("RAFTSET_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// proc is a raftset process started by a test.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
	done   chan struct{}
}

// startProc runs raftset in its own process on dir; the test's cleanup kills
// it by pid if it is still running.
func startProc(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	port := testutil.FreePort(t)
	args := append([]string{"--port", fmt.Sprint(port), "--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		"--dir", dir, "--loglevel", "info"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
	p := &proc{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &syncWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("raftset on %s logged:\n%s", dir, p.stderr)
		}
	})
	return p
}

func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("raftset exited %d after SIGTERM", code)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// writeUntilKilled runs writers that add unique members and set unique
// strings, until the process dies; it returns what was acknowledged.
func writeUntilKilled(t *testing.T, addr string, writers int, kill func()) (members, strs []string) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	acked := 0
	enough := make(chan struct{})
	var once sync.Once
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, err := testutil.DialRESP(addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := 0; ; i++ {
				m := fmt.Sprintf("w%d-%d", w, i)
				// Pipeline a set add and a string write: both must survive.
				if err := c.Send([][]byte{[]byte("SADD"), []byte(fmt.Sprintf("set:%d", w%4)), []byte(m)}); err != nil {
					return
				}
				if err := c.Send([][]byte{[]byte("SET"), []byte("str:" + m), []byte(m)}); err != nil {
					return
				}
				r1, err1 := c.Read()
				r2, err2 := c.Read()
				mu.Lock()
				if err1 == nil && r1 == ":1\r\n" {
					members = append(members, m)
					acked++
				}
				if err2 == nil && r2 == "+OK\r\n" {
					strs = append(strs, m)
				}
				if acked >= 3000 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
				if err1 != nil || err2 != nil {
					return
				}
			}
		}(w)
	}
	<-enough
	kill()
	wg.Wait()
	return members, strs
}

// checkAcked verifies that every acknowledged write is present.
func checkAcked(t *testing.T, addr string, members, strs []string) {
	t.Helper()
	c := dial(t, addr)
	have := map[string]bool{}
	for s := 0; s < 4; s++ {
		for _, m := range testutil.ParseReply(do(t, c, "SMEMBERS", fmt.Sprintf("set:%d", s))).Elems {
			have[m.Str] = true
		}
	}
	lost := 0
	for _, m := range members {
		if !have[m] {
			lost++
		}
	}
	for _, m := range strs {
		if got := do(t, c, "GET", "str:"+m); got != fmt.Sprintf("$%d\r\n%s\r\n", len(m), m) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost after restart", lost, len(members)+len(strs))
	}
}

// TestKill9KeepsAcknowledgedWrites: write under load, kill -9 the server,
// restart it on the same directory: every acknowledged write is there. The
// second case snapshots and truncates the log while the load runs.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"log only", []string{"--raft-log-store", "bolt"}},
		{"snapshots and truncation", []string{"--raft-log-store", "bolt",
			"--snapshot-threshold", "50", "--snapshot-interval", "100ms", "--trailing-logs", "10"}},
		{"wal log only", []string{"--raft-log-store", "wal"}},
		{"wal snapshots and truncation", []string{"--raft-log-store", "wal",
			"--snapshot-threshold", "50", "--snapshot-interval", "100ms", "--trailing-logs", "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := startProc(t, dir, tc.extra...)
			waitWritable(t, p.addr)
			members, strs := writeUntilKilled(t, p.addr, 8, func() { p.kill9(t) })
			if len(members) < 3000 {
				t.Fatalf("only %d writes acknowledged", len(members))
			}
			if strings.Contains(tc.name, "snapshots") && !strings.Contains(p.stderr.String(), "snapshot complete") {
				t.Fatalf("no snapshot was taken during the load")
			}
			p2 := startProc(t, dir, tc.extra...)
			waitWritable(t, p2.addr)
			checkAcked(t, p2.addr, members, strs)
			p2.stop(t)
		})
	}
}

// TestCorruptStateRefusesToStart: a damaged snapshot or log makes start-up
// fail with a clear message, and the files are left as they were.
func TestCorruptStateRefusesToStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(t *testing.T, dir string) string
		want   string
	}{
		{"snapshot", func(t *testing.T, dir string) string {
			files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
			if len(files) == 0 {
				t.Fatal("no snapshot written")
			}
			return files[len(files)-1]
		}, "snapshot"},
		{"log", func(t *testing.T, dir string) string { return filepath.Join(dir, "raft.db") }, "raft.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := startProc(t, dir)
			waitWritable(t, p.addr)
			c := dial(t, p.addr)
			for i := 0; i < 100; i++ {
				do(t, c, "SADD", "s", fmt.Sprint(i), fmt.Sprintf("m%d", i))
			}
			if r := do(t, c, "SAVE"); r != "+OK\r\n" {
				t.Fatalf("SAVE = %q", r)
			}
			p.stop(t)

			path := tc.target(t, dir)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Damage bytes in the middle of the file (for bbolt: its meta
			// pages, where a checksum guards them).
			bad := bytes.Clone(data)
			for _, off := range []int{16, 20, 4096 + 16, 4096 + 20, len(bad) / 2} {
				if off < len(bad) {
					bad[off] ^= 0x5a
				}
			}
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0], "--port", fmt.Sprint(testutil.FreePort(t)),
				"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--dir", dir)
			cmd.Env = append(os.Environ(), "RAFTSET_TEST_MAIN=1")
			cmd.Stderr = &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("raftset kept running on a corrupt %s", tc.name)
			}
			if err == nil {
				t.Fatalf("raftset started on a corrupt %s", tc.name)
			}
			t.Logf("start-up on a corrupt %s: %s", tc.name, lastLine(out.String()))
			if msg := out.String(); !strings.Contains(msg, tc.want) {
				t.Errorf("start-up error does not name the %s:\n%s", tc.want, msg)
			}
			after, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(after, bad) {
				t.Errorf("start-up changed the corrupt %s", tc.name)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
