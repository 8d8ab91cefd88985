package resp

import (
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/command"
)

func TestPipelinedWritesAreOneBatch(t *testing.T) {
	store := newFakeStore()
	_, addr := startServer(t, Config{}, store)
	tc := dial(t, addr)
	var req, want string
	for i := range 10 {
		req += enc("SADD", "k", string(rune('a'+i)))
		want += ":1\r\n"
	}
	tc.send(req)
	if got := tc.replies(10); got != want {
		t.Fatalf("replies = %q, want %q", got, want)
	}
	if got := store.writeBatches(); !slices.Equal(got, []int{10}) {
		t.Errorf("Write batches = %v, want [10]", got)
	}
}

func TestPipelineOrder(t *testing.T) {
	fake := newFakeStore()
	_, addr := startServer(t, Config{}, fake)
	tc := dial(t, addr)
	tc.send(enc("SADD", "k", "a") + enc("SADD", "k", "b") + enc("SMEMBERS", "k") +
		enc("NOSUCH") + enc("SADD", "k", "c") + enc("PING") + enc("SCARD", "k") +
		enc("SISMEMBER", "k", "c") + enc("GET") + enc("SADD", "k", "d") + enc("ECHO", "e"))
	want := ":1\r\n:1\r\n" + bulks("a", "b") +
		errr("ERR unknown command 'NOSUCH', with args beginning with: ") + ":1\r\n+PONG\r\n:3\r\n:1\r\n" +
		errr("ERR wrong number of arguments for 'get' command") + ":1\r\n" + bulk("e")
	if got := tc.replies(11); got != want {
		t.Fatalf("replies = %q, want %q", got, want)
	}
	if got := fake.writeBatches(); !slices.Equal(got, []int{2, 1, 1}) {
		t.Errorf("Write batches = %v, want [2 1 1]", got)
	}
	if got := fake.readBatches(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("read batches = %v, want [1 2]", got)
	}
}

func TestPipelineWritesAndTransaction(t *testing.T) {
	store := newFakeStore()
	_, addr := startServer(t, Config{}, store)
	tc := dial(t, addr)
	// go-redis's TxPipeline: a write, then MULTI ... EXEC, in one round trip.
	tc.send(enc("SET", "a", "1") + enc("MULTI") + enc("INCR", "a") + enc("INCR", "a") + enc("EXEC") + enc("GET", "a"))
	want := ok + ok + queuedR + queuedR + array(integer(2), integer(3)) + bulk("3")
	if got := tc.replies(6); got != want {
		t.Fatalf("replies = %q, want %q", got, want)
	}
	store.mu.Lock()
	kinds := store.kinds
	store.mu.Unlock()
	if len(kinds) != 1 || !slices.Equal(kinds[0], []command.OpKind{command.OpCommand, command.OpTx}) {
		t.Errorf("Write calls = %v, want one call [command tx]", kinds)
	}
}

func TestStaleReads(t *testing.T) {
	fake := newFakeStore()
	_, addr := startServer(t, Config{}, fake)
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("SCARD", "k"), ":0\r\n"},
		{cmd("READONLY"), ok},
		{cmd("SCARD", "k"), ":0\r\n"},
		{cmd("READWRITE"), ok},
		{cmd("SCARD", "k"), ":0\r\n"},
	})
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if !slices.Equal(fake.stale, []bool{false, true, false}) {
		t.Errorf("stale flags = %v, want [false true false]", fake.stale)
	}
}

func TestLongPipelineIsSplit(t *testing.T) {
	store := newFakeStore()
	_, addr := startServer(t, Config{}, store)
	tc := dial(t, addr)
	const n = 3000
	var req strings.Builder
	for range n {
		req.WriteString(enc("INCR", "n"))
	}
	go func() { _, _ = tc.c.Write([]byte(req.String())) }()
	for i := range n {
		if got, want := tc.reply(), integer(int64(i+1)); got != want {
			t.Fatalf("reply %d = %q, want %q", i, got, want)
		}
	}
	for _, b := range store.writeBatches() {
		if b > maxRunOps {
			t.Errorf("a Write call had %d ops, more than %d", b, maxRunOps)
		}
	}
}

func TestInline(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	tc.send("PING\r\n" + "ECHO \"a b\"\r\n" + "\r\n" + "  ping   \n" + "SADD k x y\r\n" + "smembers k\r\n" + "get\r\n")
	want := "+PONG\r\n" + bulk("a b") + "+PONG\r\n:2\r\n" + bulks("x", "y") +
		errr("ERR wrong number of arguments for 'get' command")
	if got := tc.replies(6); got != want {
		t.Errorf("inline replies = %q, want %q", got, want)
	}
}

func TestProtocolErrors(t *testing.T) {
	_, addr := startServer(t, Config{ProtoMaxBulkLen: 1 << 20}, newFakeStore())
	for _, tt := range []struct {
		name, send, want string
	}{
		{"huge bulk", "*1\r\n$2147483648\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk over proto-max-bulk-len", "*1\r\n$1048577\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk near 2^63", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"huge multibulk", "*999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk just over", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"bad count", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"empty multibulk", "*0\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"negative bulk", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"leading zero", "*1\r\n$01\r\nx\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk too long", "*1\r\n$1\r\nab\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"no dollar", "*1\r\nx", "-ERR Protocol error: expected '$', got 'x'\r\n"},
		{"newline for dollar", "*1\r\n\n", "-ERR Protocol error: expected '$', got ' '\r\n"},
		{"good then bad", "PING\r\n*1\r\n$4\r\nPING\r\n*x\r\n", "+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"},
		{"unbalanced quotes", "ping \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"inline too long", strings.Repeat("a", maxInline+1), "-ERR Protocol error: too big inline request\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := dial(t, addr)
			tc.send(tt.send) // and nothing more: the refusal must not wait
			got := make([]byte, len(tt.want))
			if _, err := readFull(tc, got); err != nil || string(got) != tt.want {
				t.Fatalf("reply = %q, %v, want %q", got, err, tt.want)
			}
			tc.expectEOF()
			// Other connections are served.
			if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
				t.Errorf("PING on another connection = %q", got)
			}
		})
	}
}

func readFull(tc *testConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := tc.r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestLargeBulkAccepted(t *testing.T) {
	_, addr := startServer(t, Config{ProtoMaxBulkLen: 1 << 20}, newFakeStore())
	tc := dial(t, addr)
	v := strings.Repeat("v", 1<<20)
	go func() { _, _ = tc.c.Write([]byte(enc("SET", "big", v))) }()
	if got := tc.reply(); got != ok {
		t.Fatalf("SET of 1 MiB = %q", got)
	}
	if got := tc.do("GET", "big"); got != bulk(v) {
		t.Errorf("GET big: %d bytes, want %d", len(got), len(bulk(v)))
	}
}

// TestGarbageConnections sends random bytes on 1000 connections; the server
// must close or answer each of them, and still serve PING.
func TestGarbageConnections(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: ""}, newFakeStore())
	tokens := []string{"*", "$", "\r\n", "\n", "1", "3", "-1", "0", "PING", "SADD", "k", "MULTI", "EXEC", "\"", " ",
		"999999999999", "*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n", "QUIT", "WATCH", "AUTH"}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range work {
				r := rand.New(rand.NewPCG(uint64(seed), 1))
				var b []byte
				for range r.IntN(64) {
					if r.IntN(3) == 0 {
						b = append(b, byte(r.IntN(256)))
					} else {
						b = append(b, tokens[r.IntN(len(tokens))]...)
					}
				}
				if err := garbage(addr, b); err != nil {
					t.Errorf("seed %d (%q): %v", seed, b, err)
				}
			}
		}()
	}
	for i := range 1000 {
		work <- i
	}
	close(work)
	wg.Wait()
	if got := dial(t, addr).do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING after garbage = %q", got)
	}
}

// garbage sends b, half-closes, and reads until the server closes.
func garbage(addr string, b []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil && !errors.Is(err, net.ErrClosed) {
		// The server may have refused the stream already.
		var opErr *net.OpError
		if !errors.As(err, &opErr) {
			return err
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return err
			}
			return nil
		}
	}
}
