package resp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/testutil"
)

// liveHeap is the live heap after a full collection, in bytes.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// rssBytes is the process's resident set (Linux), or 0.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// waitUntil polls cond, which observes the server, until it holds.
// bytesRead is how many bytes the server has read from each client.
func bytesRead(s *Server) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, c := range s.clients {
		out = append(out, c.fc.in.Load())
	}
	return out
}

// Two clients each send a 300 MB bulk slowly, in chunks. The server's
// heap grows by about the bulks' own size while they are read (not by the
// doubling buffer plus a copy of each), nothing stays behind once the
// command ran on a connection kept open, nor after the clients leave.
//
//	go test -run TestSlowBigBulkMemory -v ./resp/
func TestSlowBigBulkMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 600 MB")
	}
	const size = 300 << 20
	const clients = 2
	s, addr := startServer(t, Config{}, newFakeStore())

	base := liveHeap()
	baseRSS := rssBytes()
	header := fmt.Sprintf("*3\r\n$9\r\nSISMEMBER\r\n$1\r\nk\r\n$%d\r\n", size)
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(header)); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	chunk := make([]byte, 1<<20)
	sent := make([]int64, clients)
	// send gives each client its bulk up to n bytes, a chunk at a time
	// (interleaved, so both are in flight together), and waits until the
	// server has read them.
	send := func(n int64) {
		t.Helper()
		for {
			progress := false
			for i, c := range conns {
				if sent[i] >= n {
					continue
				}
				m := min(int64(len(chunk)), n-sent[i])
				if _, err := c.Write(chunk[:m]); err != nil {
					t.Fatal(err)
				}
				sent[i] += m
				progress = true
			}
			if !progress {
				break
			}
		}
		want := int64(len(header)) + n
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("the server to read %d bytes from each client", want), func() bool {
			got := bytesRead(s)
			if len(got) != clients {
				return false
			}
			for _, g := range got {
				if g < want {
					return false
				}
			}
			return true
		})
	}
	const mb = 1 << 20
	inFlight := int64(clients * size)
	report := func(when string) int64 {
		grew := liveHeap() - base
		t.Logf("%-40s heap %+5d MB  rss %5d MB (start %d MB)", when, grew/mb, rssBytes()/mb, baseRSS/mb)
		return grew
	}

	send(size / 2)
	if grew := report("half-way"); grew > inFlight*12/10+16*mb {
		t.Errorf("half-way, the heap grew by %d MB for %d MB of bulks in flight", grew/mb, inFlight/mb)
	}
	send(size - 1)
	if grew := report("all but the last byte"); grew > inFlight*12/10+16*mb {
		t.Errorf("with all but a byte read, the heap grew by %d MB for %d MB of bulks in flight", grew/mb, inFlight/mb)
	}
	for _, c := range conns {
		if _, err := c.Write([]byte("x\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		buf := make([]byte, 4)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != ":0\r\n" {
			t.Fatalf("reply %q, %v", buf[:n], err)
		}
	}
	// The connections stay open and idle: they must not keep the buffers.
	if grew := report("after the replies, connections open"); grew > 16*mb {
		t.Errorf("idle connections keep %d MB", grew/mb)
	}
	for _, c := range conns {
		c.Close()
	}
	testutil.WaitFor(t, 60*time.Second, "the server to drop the connections", func() bool { return len(bytesRead(s)) == 0 })
	if grew := report("after the clients left"); grew > 16*mb {
		t.Errorf("%d MB stay after the clients left", grew/mb)
	}
}

// A client whose command grows past client-query-buffer-limit is
// disconnected without a reply, with Redis's log line; so is one announcing
// a big bulk that would cross it. Other clients are served meanwhile.
func TestQueryBufferLimit(t *testing.T) {
	var logs logLines
	logger := hclog.New(&hclog.LoggerOptions{Name: "resp", Output: &logs, Level: hclog.Warn})
	_, addr := startServer(t, Config{ClientQueryBufferLimit: 1 << 20, Logger: logger}, newFakeStore())

	// Many bulks below the big-bulk size, the redcon path.
	c := dial(t, addr)
	const n = 100
	c.send(fmt.Sprintf("*%d\r\n$4\r\nSADD\r\n$1\r\nk\r\n", n+2))
	member := strings.Repeat("m", 20000)
	// The writer keeps its own connection: c is reassigned below while it
	// may still be writing.
	w := c.c
	go func() {
		for i := range n {
			if _, err := fmt.Fprintf(w, "$%d\r\n%s%05d\r\n", len(member)+5, member, i); err != nil {
				return // closed by the server, as expected
			}
		}
	}()
	expectDropped(t, c)

	// One big bulk past the limit.
	c = dial(t, addr)
	c.send("*3\r\n$4\r\nSADD\r\n$1\r\nk\r\n$2000000\r\nxyz")
	expectDropped(t, c)

	// Below the limit is fine.
	c = dial(t, addr)
	if got := c.do("SADD", "k", strings.Repeat("a", 900000)); got != ":1\r\n" {
		t.Errorf("SADD below the limit = %q", got)
	}
	if got := c.do("INFO", "stats"); !strings.Contains(got, "\r\nclient_query_buffer_limit_disconnections:2\r\n") {
		t.Errorf("INFO stats: %q", got)
	}
	lines := logs.matching("Closing client that reached max query buffer length: id=")
	if len(lines) != 2 || !strings.Contains(lines[1], `(qbuf initial bytes: "`) {
		t.Errorf("log lines %q", lines)
	}
}

// expectDropped checks that the server closed the connection without a
// reply (a reset counts: the client's unread bytes make the close one).
func expectDropped(t *testing.T, c *testConn) {
	t.Helper()
	rest, err := io.ReadAll(c.r)
	if len(rest) > 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("want the connection closed without a reply, got %q, %v", rest, err)
	}
}
