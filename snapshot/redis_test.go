package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestRedisLoadsExport writes a Redis 7.0 export (RDB 10; Debian ships
// Redis 7.0), has redis-check-rdb verify it, loads it into a real
// redis-server on loopback and compares every key: members, value,
// PEXPIRETIME. It then has that server SAVE and reads Redis's own file back.
// Without the binaries it is skipped, except under CI, where it fails.
func TestRedisLoadsExport(t *testing.T) {
	server, err1 := exec.LookPath("redis-server")
	checker, err2 := exec.LookPath("redis-check-rdb")
	if err := errors.Join(err1, err2); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server and redis-check-rdb are needed under CI: %v", err)
		}
		t.Skipf("redis binaries not installed: %v", err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	entries := randomKeyspace(rng, 400)
	future := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range entries {
		if entries[i].expire >= 0 {
			entries[i].expire = future + entries[i].expire // a loading primary drops past deadlines
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "dump.rdb")
	data := writeEntries(t, WriterOptions{Version: 10, Compress: true, RedisVer: "7.0.0"}, entries)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(checker, file).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("RDB looks OK")) {
		t.Fatalf("redis-check-rdb %s: %v\n%s", file, err, out)
	}

	c := startRedis(t, server, dir, "dump.rdb")
	perDB := map[int]int{}
	for _, e := range entries {
		perDB[e.db]++
	}
	for db, n := range perDB {
		c.do(t, "SELECT", strconv.Itoa(db))
		if got := c.do(t, "DBSIZE"); got != int64(n) {
			t.Errorf("db %d DBSIZE = %v, want %d", db, got, n)
		}
	}
	for _, e := range entries {
		c.do(t, "SELECT", strconv.Itoa(e.db))
		if e.set != nil {
			got := toBytes(t, c.do(t, "SMEMBERS", e.key))
			slices.SortFunc(got, bytes.Compare)
			if want := sortedMembers(e.set); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("db %d SMEMBERS %q = %q, want %q", e.db, e.key, got, want)
			}
		} else if got, _ := c.do(t, "GET", e.key).([]byte); !bytes.Equal(got, e.value) {
			t.Errorf("db %d GET %q = %q, want %q", e.db, e.key, got, e.value)
		}
		want := e.expire
		if want < 0 {
			want = -1
		}
		if got := c.do(t, "PEXPIRETIME", e.key); got != want {
			t.Errorf("db %d PEXPIRETIME %q = %v, want %d", e.db, e.key, got, want)
		}
	}

	// Redis's own file of the same data reads back to the same keys.
	if got := c.do(t, "SAVE"); got != "OK" {
		t.Fatalf("SAVE = %v", got)
	}
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := readAll(saved, ReaderOptions{})
	if err != nil {
		t.Fatalf("reading Redis's SAVE: %v", err)
	}
	want := map[string]entry{}
	for _, e := range entries {
		want[strconv.Itoa(e.db)+"/"+e.key] = e
	}
	for _, r := range recs {
		e, ok := want[strconv.Itoa(r.DB)+"/"+string(r.Key)]
		if !ok {
			t.Errorf("Redis's file has unexpected key %q in db %d", r.Key, r.DB)
			continue
		}
		delete(want, strconv.Itoa(r.DB)+"/"+string(r.Key))
		if r.ExpireAtMs != e.expire {
			t.Errorf("key %q ExpireAtMs = %d, want %d", r.Key, r.ExpireAtMs, e.expire)
		}
		if e.set == nil {
			if !bytes.Equal(r.Value, e.value) {
				t.Errorf("key %q = %q, want %q", r.Key, r.Value, e.value)
			}
		} else if r.Kind != KindSet || !slices.EqualFunc(sortedMembers(r.Set), sortedMembers(e.set), bytes.Equal) {
			t.Errorf("key %q members differ", r.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("%d keys missing from Redis's file", len(want))
	}
}

// startRedis runs redis-server on a free loopback port with dir/dbfilename
// and stops it (by its pid) when the test ends.
func startRedis(t *testing.T, server, dir, dbfilename string) *respConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--dbfilename", dbfilename, "--save", "", "--appendonly", "no", "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("redis-server log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c := &respConn{conn: conn, r: bufio.NewReader(conn)}
			t.Cleanup(func() { conn.Close() })
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			if v, err := c.try("PING"); err == nil && v == "PONG" {
				return c
			}
			conn.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer PING (loading error?): %v\n%s", port, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// respConn is the smallest RESP2 client the test needs: commands as arrays
// of bulk strings; replies as string (status), int64, []byte (bulk), nil,
// []any (array) or error.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func (c *respConn) do(t *testing.T, args ...string) any {
	t.Helper()
	v, err := c.try(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return v
}

func (c *respConn) try(args ...string) (any, error) {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.conn.Write(b); err != nil {
		return nil, err
	}
	return c.reply()
}

func (c *respConn) reply() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		p := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, p); err != nil {
			return nil, err
		}
		return p[:n], nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.reply(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

func toBytes(t *testing.T, v any) [][]byte {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %v is not an array", v)
	}
	out := make([][]byte, len(arr))
	for i, x := range arr {
		out[i], _ = x.([]byte)
	}
	return out
}
