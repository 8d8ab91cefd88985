package resp

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// bothDo runs args on both servers and fails unless the raw replies match.
func bothDo(t *testing.T, ours, theirs *testutil.RESPClient, args ...string) string {
	t.Helper()
	a, err := ours.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	b, err := theirs.Do(args...)
	if err != nil {
		t.Fatalf("redis %q: %v", args, err)
	}
	if a != b {
		t.Errorf("%q = %q, redis %q", args, a, b)
	}
	return a
}

// TestClientSubcommandsMatchRedis compares the replies of CLIENT KILL,
// PAUSE, UNPAUSE, REPLY, NO-EVICT, TRACKING, CACHING, GETREDIR and
// TRACKINGINFO, errors included, with a real redis-server 7.0's.
func TestClientSubcommandsMatchRedis(t *testing.T) {
	_, ours, theirs := raftsetAndRedis(t)
	for _, cmd := range [][]string{
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "ID", "x"},
		{"CLIENT", "KILL", "ID", "99999"},
		{"CLIENT", "KILL", "TYPE", "foo"},
		{"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "maybe"},
		{"CLIENT", "KILL", "USER", "nosuch"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "LADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID", "1", "TYPE"},
		{"CLIENT", "KILL", "BOGUS", "x"},
		{"CLIENT", "KILL", "TYPE", "master"},
		{"CLIENT", "KILL", "TYPE", "pubsub"},
		{"CLIENT", "KILL"},
		{"CLIENT", "PAUSE", "x"},
		{"CLIENT", "PAUSE", "-1"},
		{"CLIENT", "PAUSE", "10", "BOGUS"},
		{"CLIENT", "PAUSE", "10", "ALL", "x"},
		{"CLIENT", "PAUSE", "0", "WRITE"},
		{"CLIENT", "UNPAUSE"},
		{"CLIENT", "UNPAUSE", "x"},
		{"CLIENT", "REPLY", "maybe"},
		{"CLIENT", "NO-EVICT", "maybe"},
		{"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "NO-EVICT", "OFF"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "GETREDIR"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "maybe"},
		{"CLIENT", "TRACKING", "on", "REDIRECT", "999"},
		{"CLIENT", "TRACKING", "on", "REDIRECT", "x"},
		{"CLIENT", "TRACKING", "on", "PREFIX", "a"},
		{"CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"},
		{"CLIENT", "TRACKING", "on", "BCAST", "OPTIN"},
		{"CLIENT", "TRACKING", "on", "BOGUS"},
		{"CLIENT", "TRACKING", "on", "PREFIX"},
		{"CLIENT", "TRACKING", "on", "OPTIN"},
		{"CLIENT", "CACHING", "no"},
		{"CLIENT", "CACHING", "maybe"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETREDIR"},
		{"CLIENT", "TRACKING", "on", "OPTOUT"},
		{"CLIENT", "TRACKING", "off"},
		{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab"},
		{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "b"},
		{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "bc"},
		{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "on"},
		{"CLIENT", "TRACKING", "off"},
		{"CLIENT", "TRACKING", "on", "NOLOOP", "OPTOUT"},
		{"CLIENT", "CACHING", "no"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "off"},
		{"CLIENT", "TRACKINGINFO"},
		{"MONITOR", "x"},
	} {
		bothDo(t, ours, theirs, cmd...)
	}
}

// TestClientHelpMatchesRedis: CLIENT HELP is Redis 7.0's, less UNBLOCK
// (raftset has no blocking commands), plus 7.2's SETINFO and NO-TOUCH.
func TestClientHelpMatchesRedis(t *testing.T) {
	_, ours, theirs := raftsetAndRedis(t)
	a, b := doRESP(t, ours, "CLIENT", "HELP").Strings(), doRESP(t, theirs, "CLIENT", "HELP").Strings()
	drop := func(lines []string, heads ...string) []string {
		var out []string
		skip := false
		for _, l := range lines {
			if !strings.HasPrefix(l, " ") {
				skip = false
				for _, h := range heads {
					skip = skip || strings.HasPrefix(l, h)
				}
			}
			if !skip {
				out = append(out, l)
			}
		}
		return out
	}
	if x, y := drop(a, "SETINFO", "NO-TOUCH"), drop(b, "UNBLOCK"); strings.Join(x, "\n") != strings.Join(y, "\n") {
		t.Errorf("CLIENT HELP:\n%s\nredis:\n%s", strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
}

// TestClientReplyMatchesRedis pipelines CLIENT REPLY OFF/SKIP/ON around
// other commands (a rejected one included) and compares the bytes that
// come back.
func TestClientReplyMatchesRedis(t *testing.T) {
	_, ours, theirs := raftsetAndRedis(t)
	var script string
	for _, cmd := range [][]string{
		{"CLIENT", "REPLY", "SKIP"}, {"PING", "1"}, {"PING", "2"},
		{"CLIENT", "REPLY", "OFF"}, {"PING", "3"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "4"}, {"NOSUCH"},
		{"CLIENT", "REPLY", "ON"}, {"PING", "5"},
		{"CLIENT", "REPLY", "SKIP"}, {"NOSUCH"}, {"PING", "6"},
		{"CLIENT", "REPLY", "SKIP"}, {"SET", "k", "v"}, {"GET", "k"},
		{"CLIENT", "REPLY", "SKIP"}, {"MULTI"}, {"PING", "7"}, {"EXEC"},
	} {
		script += enc(cmd...)
	}
	want := "$1\r\n2\r\n+OK\r\n$1\r\n5\r\n$1\r\n6\r\n$1\r\nv\r\n+QUEUED\r\n*1\r\n$1\r\n7\r\n"
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		if err := c.SendRaw([]byte(script)); err != nil {
			t.Fatal(err)
		}
		var got string
		for len(got) < len(want) {
			r, err := c.Read()
			if err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			got += r
		}
		if got != want {
			t.Errorf("replies = %q, want %q", got, want)
		}
	}
}

var monitorStamp = regexp.MustCompile(`^\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] `)

// TestMonitorMatchesRedis compares what MONITOR shows of another
// connection's commands with redis-server's lines, less the time stamp and
// the port: which commands appear (not admin ones, not refused ones; queued
// ones at EXEC), their quoting, and the redaction of secrets.
func TestMonitorMatchesRedis(t *testing.T) {
	_, ours, theirs := raftsetAndRedis(t)
	mons := []*testutil.RESPClient{}
	// The clients' remote addresses, not s.Addr(): Serve sets the listener
	// in its own goroutine, which may not have run yet.
	for _, addr := range []string{ours.Conn().RemoteAddr().String(), theirs.Conn().RemoteAddr().String()} {
		m, err := testutil.DialRESP(addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if got, err := m.Do("MONITOR"); err != nil || got != "+OK\r\n" {
			t.Fatalf("MONITOR = %q, %v", got, err)
		}
		mons = append(mons, m)
	}
	cmds := [][]string{
		{"SET", "a\"b", "x\ny\x01\\"},
		{"AUTH", "foo"},
		{"HELLO", "2", "AUTH", "default", "pw"},
		{"CONFIG", "GET", "maxclients"},
		{"MULTI"}, {"get", "a"}, {"SMEMBERS", "s"}, {"EXEC"},
		{"NOSUCH"},
		{"GET"},
		{"CLIENT", "ID"},
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"PING"},
		{"ECHO", "\t\r\xff"},
		{"DEBUG", "DIGEST"},
	}
	for _, cmd := range cmds {
		for _, c := range []*testutil.RESPClient{ours, theirs} {
			if _, err := c.Do(cmd...); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A marker that both show last.
	for _, c := range []*testutil.RESPClient{ours, theirs} {
		c.Do("ECHO", "end")
	}
	var lines [2][]string
	for i, m := range mons {
		for {
			raw, err := m.Read()
			if err != nil {
				t.Fatalf("monitor %d: %v", i, err)
			}
			if !monitorStamp.MatchString(raw) {
				t.Fatalf("monitor %d line %q lacks Redis's time stamp and address", i, raw)
			}
			line := monitorStamp.ReplaceAllString(raw, "")
			lines[i] = append(lines[i], line)
			if line == "\"ECHO\" \"end\"\r\n" {
				break
			}
		}
	}
	if got := strings.Join(lines[0], ""); !strings.Contains(got, `"AUTH" "(redacted)"`) ||
		!strings.Contains(got, `"get" "a"`+"\r\n"+`"SMEMBERS" "s"`+"\r\n"+`"EXEC"`) || strings.Contains(got, "CONFIG") {
		t.Errorf("MONITOR lines = %q", got)
	}
	if strings.Join(lines[0], "") != strings.Join(lines[1], "") {
		t.Errorf("MONITOR lines:\n ours  %q\n redis %q", lines[0], lines[1])
	}
	// A monitor may not touch the keyspace; its PING is shown to itself.
	bothDo(t, mons[0], mons[1], "GET", "a")
}

// TestClientPauseHoldsWrites: CLIENT PAUSE WRITE holds writes, not reads,
// until CLIENT UNPAUSE; ALL holds reads too, until the time runs out.
func TestClientPauseHoldsWrites(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	admin, writer, reader := dial(t, addr), dial(t, addr), dial(t, addr)
	if got := admin.do("CLIENT", "PAUSE", "100000", "WRITE"); got != ok {
		t.Fatalf("CLIENT PAUSE = %q", got)
	}
	writer.send(enc("SET", "k", "v"))
	done := make(chan string, 1)
	go func() { done <- writer.reply() }()
	if got := reader.do("GET", "k"); got != null {
		t.Fatalf("GET during a WRITE pause = %q", got)
	}
	select {
	case r := <-done:
		t.Fatalf("SET answered %q during the pause", r)
	case <-time.After(200 * time.Millisecond):
	}
	if got := admin.do("CLIENT", "UNPAUSE"); got != ok {
		t.Fatalf("CLIENT UNPAUSE = %q", got)
	}
	if r := <-done; r != ok {
		t.Fatalf("SET after UNPAUSE = %q", r)
	}
	start := time.Now()
	admin.do("CLIENT", "PAUSE", "300", "ALL")
	if got := reader.do("GET", "k"); got != bulk("v") {
		t.Fatalf("GET after an ALL pause = %q", got)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("GET answered %v into a 300 ms ALL pause", el)
	}
}

// TestClientKillClosesConnections: by ID (counted), by the old address form
// (+OK), and the caller itself after its reply (SKIPME no).
func TestClientKillClosesConnections(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	a, b, c := dial(t, addr), dial(t, addr), dial(t, addr)
	id := strings.TrimSuffix(strings.TrimPrefix(b.do("CLIENT", "ID"), ":"), "\r\n")
	if got := a.do("CLIENT", "KILL", "ID", id); got != integer(1) {
		t.Fatalf("CLIENT KILL ID = %q", got)
	}
	b.expectEOF()
	// A dial completes before the server accepts: one round trip makes c
	// a client the server knows.
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING = %q", got)
	}
	caddr := c.c.LocalAddr().String()
	if got := a.do("CLIENT", "KILL", caddr); got != ok {
		t.Fatalf("CLIENT KILL addr = %q", got)
	}
	c.expectEOF()
	aid := strings.TrimSuffix(strings.TrimPrefix(a.do("CLIENT", "ID"), ":"), "\r\n")
	if got := a.do("CLIENT", "KILL", "ID", aid, "SKIPME", "no"); got != integer(1) {
		t.Fatalf("CLIENT KILL of itself = %q", got)
	}
	a.expectEOF()
}
