package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// TestServerEndToEnd checks, through a real connection to a real node,
// replies that the differential test cannot compare against Redis 7.0.
func TestServerEndToEnd(t *testing.T) {
	addr, _ := startNode(t, "")
	c := dial(t, addr)
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SADD", "lp", "a", "b", "1"}, ":3\r\n"},
		{[]string{"OBJECT", "ENCODING", "lp"}, "$8\r\nlistpack\r\n"},
		{[]string{"SADD", "is", "1", "2", "3"}, ":3\r\n"},
		{[]string{"OBJECT", "ENCODING", "is"}, "$6\r\nintset\r\n"},
		{[]string{"SADD", "is", "x"}, ":1\r\n"},
		{[]string{"OBJECT", "ENCODING", "is"}, "$8\r\nlistpack\r\n"},
		{[]string{"SADD", "seed", "000000123456"}, ":1\r\n"},
		{[]string{"OBJECT", "ENCODING", "seed"}, "$8\r\nlistpack\r\n"},
		{[]string{"CONFIG", "SET", "set-max-listpack-entries", "2"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "set-max-listpack-entries"}, "*2\r\n$24\r\nset-max-listpack-entries\r\n$1\r\n2\r\n"},
		{[]string{"SADD", "lp", "c"}, ":1\r\n"},
		{[]string{"OBJECT", "ENCODING", "lp"}, "$9\r\nhashtable\r\n"},
		{[]string{"CONFIG", "SET", "set-max-listpack-entries", "128"}, "+OK\r\n"},
		{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"SELECT", "1"}, "-ERR DB index is out of range\r\n"},
		{[]string{"SELECT", "0"}, "+OK\r\n"},
		{[]string{"GET", "lp"}, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{[]string{"PING"}, "+PONG\r\n"}, // the connection stays usable after errors
	} {
		if got := do(t, c, tc.cmd...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.cmd, got, tc.want)
		}
	}
	// DEBUG RELOAD writes the RDB and loads it back: nothing may change.
	before := do(t, c, "DEBUG", "DIGEST")
	if got := do(t, c, "DEBUG", "RELOAD"); got != "+OK\r\n" {
		t.Fatalf("DEBUG RELOAD = %q", got)
	}
	if after := do(t, c, "DEBUG", "DIGEST"); after != before {
		t.Errorf("DEBUG DIGEST after RELOAD = %q, want %q", after, before)
	}
	if got := do(t, c, "OBJECT", "ENCODING", "lp"); got != "$9\r\nhashtable\r\n" {
		t.Errorf("encoding after RELOAD = %q, want hashtable (exact restore)", got)
	}
	if got := do(t, c, "SAVE"); got != "+OK\r\n" {
		t.Errorf("SAVE = %q", got)
	}
	last := testutil.ParseReply(do(t, c, "LASTSAVE"))
	if last.Kind != ':' || last.Str == "0" {
		t.Errorf("LASTSAVE = %v after SAVE", last)
	}
}

// TestWatchAcrossConnections: EXEC fails when another client changed a
// watched key, and succeeds otherwise.
func TestWatchAcrossConnections(t *testing.T) {
	addr, _ := startNode(t, "")
	a, b := dial(t, addr), dial(t, addr)
	do(t, a, "SET", "k", "1")
	for _, tc := range []struct {
		name  string
		other []string
		want  string
	}{
		{"untouched", nil, "*1\r\n+OK\r\n"},
		{"changed", []string{"SET", "k", "2"}, "*-1\r\n"},
		{"deleted", []string{"DEL", "k"}, "*-1\r\n"},
		{"other key", []string{"SET", "other", "x"}, "*1\r\n+OK\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(t, a, "SET", "k", "1")
			do(t, a, "WATCH", "k")
			if tc.other != nil {
				do(t, b, tc.other...)
			}
			do(t, a, "MULTI")
			do(t, a, "SET", "k", "3")
			if got := do(t, a, "EXEC"); got != tc.want {
				t.Errorf("EXEC = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestImportRedisDump starts nodes from real Redis dump.rdb files: the
// keyspace must be Redis's, down to DEBUG DIGEST, and survive a restart.
func TestImportRedisDump(t *testing.T) {
	for _, vec := range []string{"mixed_1000", "listpack_mixed", "strings"} {
		t.Run(vec, func(t *testing.T) {
			base := filepath.Join(testutil.RDBDir(t), "redis-7.2.6", "rdbcompression-yes", vec)
			want, _ := testutil.LoadRDBVector(t, base+".rdb")
			dir := filepath.Join(t.TempDir(), "data")
			addr, n := startNode(t, dir, "--import", base+".rdb")
			c := dial(t, addr)
			if got := do(t, c, "DBSIZE"); got != fmt.Sprintf(":%d\r\n", want.KeyCount) {
				t.Errorf("DBSIZE = %q, want %d", got, want.KeyCount)
			}
			if got := do(t, c, "DEBUG", "DIGEST"); got != "+"+want.DebugDigest+"\r\n" {
				t.Errorf("DEBUG DIGEST = %q, want %s (Redis's)", got, want.DebugDigest)
			}
			// The import must be durable: restart without --import.
			c.Close()
			if err := n.close(); err != nil {
				t.Fatal(err)
			}
			addr2, _ := startNode(t, dir)
			if got := do(t, dial(t, addr2), "DEBUG", "DIGEST"); got != "+"+want.DebugDigest+"\r\n" {
				t.Errorf("DEBUG DIGEST after restart = %q, want %s", got, want.DebugDigest)
			}
		})
	}
}

// TestBadInputKeepsServing: oversized and malformed requests get Redis's
// protocol errors and lose the connection; the server and the data stay.
func TestBadInputKeepsServing(t *testing.T) {
	addr, _ := startNode(t, "")
	good := dial(t, addr)
	do(t, good, "SADD", "s", "a")
	for _, tc := range []struct{ send, want string }{
		{"*1\r\n$2147483648\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$3\r\nabc\r\n*x\r\n", "-ERR unknown command 'abc', with args beginning with: \r\n-ERR Protocol error: invalid multibulk length\r\n"},
	} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte(tc.send)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break // the server closed the connection
			}
		}
		conn.Close()
		if string(got) != tc.want {
			t.Errorf("sent %q: got %q, want %q and a closed connection", tc.send, got, tc.want)
		}
	}
	if got := do(t, good, "SMEMBERS", "s"); got != "*1\r\n$1\r\na\r\n" {
		t.Errorf("SMEMBERS after bad clients = %q", got)
	}
	if got := do(t, good, "SADD", "s", strings.Repeat("x", 1<<20)); got != ":1\r\n" {
		t.Errorf("SADD of a 1 MiB member = %q", got)
	}
}
