package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRESP is a tiny RESP listener: it reads each command (an array of bulk
// strings) and writes reply(cmd) verbatim. A nil reply from the handler
// means "never answer".
type fakeRESP struct {
	ln   net.Listener
	mu   sync.Mutex
	cmds []string
}

func startFakeRESP(t *testing.T, reply func(cmd []string) []byte) *fakeRESP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRESP{ln: ln}
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				go func() { <-done; conn.Close() }()
				r := bufio.NewReader(conn)
				for {
					cmd, err := readFakeCommand(r)
					if err != nil {
						return
					}
					f.mu.Lock()
					f.cmds = append(f.cmds, strings.Join(cmd, " "))
					f.mu.Unlock()
					out := reply(cmd)
					if out == nil {
						<-done
						return
					}
					if _, err := conn.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return f
}

func (f *fakeRESP) addr() string { return f.ln.Addr().String() }

func (f *fakeRESP) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func readFakeCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, n)
	for i := range cmd {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		cmd[i] = string(buf[:l])
	}
	return cmd, nil
}

func bulk(s string) []byte { return []byte(fmt.Sprintf("$%d\r\n%s\r\n", len(s), s)) }

func raftInfo(state, leaderID string) []byte {
	return bulk("# Raft\r\nraft_node_id:n1\r\nraft_state:" + state + "\r\nraft_term:3\r\nraft_leader_id:" +
		leaderID + "\r\nraft_leader_addr:\r\n")
}

// server answers PING with PONG and INFO raft / ROLE with the given replies.
func server(info, role []byte) func([]string) []byte {
	return func(cmd []string) []byte {
		switch strings.ToUpper(cmd[0]) {
		case "PING":
			return []byte("+PONG\r\n")
		case "INFO":
			return info
		case "ROLE":
			return role
		}
		return []byte("-ERR unknown command\r\n")
	}
}

func runHC(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"healthcheck"}, args...), &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestHealthcheck(t *testing.T) {
	follower := raftInfo("follower", "n2")
	cases := []struct {
		name     string
		reply    func([]string) []byte
		writable bool
		want     int
		wantCmds []string
	}{
		{"pong", server(nil, nil), false, 0, []string{"PING"}},
		{"error reply", func([]string) []byte { return []byte("-LOADING still loading\r\n") }, false, 1, nil},
		{"wrong reply", func([]string) []byte { return []byte("+NOPE\r\n") }, false, 1, nil},
		{"garbage", func([]string) []byte { return []byte("hello\r\n") }, false, 1, nil},
		{"leader", server(raftInfo("leader", "n1"), nil), true, 0, []string{"PING", "INFO raft"}},
		{"follower with leader", server(follower, nil), true, 0, nil},
		{"candidate without leader", server(raftInfo("candidate", ""), nil), true, 1, nil},
		{"follower without leader, not writable asked", server(raftInfo("follower", ""), nil), false, 0, []string{"PING"}},
		{"INFO error", server([]byte("-ERR no\r\n"), nil), true, 1, nil},
		{"no raft section, ROLE master", server(bulk("# Server\r\nredis_version:7.2\r\n"),
			[]byte("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n")), true, 0, []string{"PING", "INFO raft", "ROLE"}},
		{"no raft section, ROLE slave connected", server(bulk(""),
			[]byte("*5\r\n$5\r\nslave\r\n$2\r\nn1\r\n:6379\r\n$9\r\nconnected\r\n:0\r\n")), true, 0, nil},
		{"no raft section, ROLE slave connecting", server(bulk(""),
			[]byte("*5\r\n$5\r\nslave\r\n$0\r\n\r\n:0\r\n$7\r\nconnect\r\n:-1\r\n")), true, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeRESP(t, tc.reply)
			args := []string{"--addr", f.addr(), "--timeout", "2s"}
			if tc.writable {
				args = append(args, "--writable")
			}
			code, out := runHC(t, args...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d; output: %s", code, tc.want, out)
			}
			if tc.wantCmds != nil {
				if got := f.commands(); strings.Join(got, "|") != strings.Join(tc.wantCmds, "|") {
					t.Errorf("commands %q, want %q", got, tc.wantCmds)
				}
			}
		})
	}
}

func TestHealthcheckTimeout(t *testing.T) {
	f := startFakeRESP(t, func([]string) []byte { return nil }) // accepts, never answers
	start := time.Now()
	code, out := runHC(t, "--addr", f.addr(), "--timeout", "200ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1; output: %s", code, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with --timeout 200ms", d)
	}
}

func TestHealthcheckNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if code, out := runHC(t, "--addr", addr, "--timeout", "1s"); code != 1 {
		t.Fatalf("exit %d, want 1; output: %s", code, out)
	}
}

func TestHealthcheckEnvAndAuth(t *testing.T) {
	f := startFakeRESP(t, func(cmd []string) []byte {
		switch strings.ToUpper(cmd[0]) {
		case "AUTH":
			if len(cmd) == 2 && cmd[1] == "s3cret" {
				return []byte("+OK\r\n")
			}
			return []byte("-WRONGPASS invalid password\r\n")
		case "PING":
			return []byte("+PONG\r\n")
		}
		return []byte("-ERR unknown\r\n")
	})
	t.Setenv("RAFTSET_HEALTH_ADDR", f.addr())
	t.Setenv("RAFTSET_HEALTH_PASSWORD", "s3cret")
	if code, out := runHC(t); code != 0 {
		t.Fatalf("exit %d, want 0; output: %s", code, out)
	}
	if got := f.commands(); strings.Join(got, "|") != "AUTH s3cret|PING" {
		t.Errorf("commands %q", got)
	}
	if code, out := runHC(t, "--password", "wrong"); code != 1 {
		t.Fatalf("wrong password: exit %d, want 1; output: %s", code, out)
	}
}

func TestHealthcheckBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--timeout", "0s"}, {"--timeout", "x"}} {
		if code, out := runHC(t, args...); code != 1 {
			t.Errorf("%q: exit %d, want 1; output: %s", args, code, out)
		}
	}
	if code, _ := runHC(t, "--help"); code != 0 {
		t.Errorf("--help: exit %d, want 0", code)
	}
}

// TestHealthcheckRealNode probes a real single-node raftset.
func TestHealthcheckRealNode(t *testing.T) {
	addr, _ := startNode(t, "")
	for _, args := range [][]string{{"--addr", addr}, {"--addr", addr, "--writable"}} {
		if code, out := runHC(t, args...); code != 0 {
			t.Errorf("%q: exit %d, want 0; output: %s", args, code, out)
		}
	}
}
