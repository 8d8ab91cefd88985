package main

import (
	"fmt"
	"testing"

	"raftset/internal/testutil"
)

// TestClientTrackingNoloopMatchesRedis: with NOLOOP a connection is not
// told of its own writes, in default and BCAST mode, however quickly the
// invalidation sender runs after the write's reply, while another
// connection's write of a key it read still reaches it. Each own write is
// followed by another connection's write of a second tracked key, so the
// next push either is that key's (as Redis sends) or betrays an own-write
// invalidation sent before it.
func TestClientTrackingNoloopMatchesRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	for _, mode := range [][]string{{"NOLOOP"}, {"BCAST", "PREFIX", "n:", "NOLOOP"}} {
		for i, a := range []string{addr, redis.Addr} {
			name := []string{"raftset", "redis"}[i]
			tr, wr := dial(t, a), dial(t, a)
			hello3(t, tr)
			if got := do(t, tr, append([]string{"CLIENT", "TRACKING", "ON"}, mode...)...); got != "+OK\r\n" {
				t.Fatalf("%s: CLIENT TRACKING ON %q = %q", name, mode, got)
			}
			for j := 0; j < 200; j++ {
				own, other := fmt.Sprintf("n:own%d", j%7), fmt.Sprintf("n:other%d", j%5)
				do(t, tr, "GET", own)
				do(t, tr, "GET", other)
				if got := do(t, tr, "SET", own, "x"); got != "+OK\r\n" {
					t.Fatalf("%s: SET = %q", name, got)
				}
				do(t, wr, "SET", other, "y")
				raw, err := tr.Read()
				if err != nil {
					t.Fatalf("%s %q round %d: reading the invalidation: %v", name, mode, j, err)
				}
				want := fmt.Sprintf(">2\r\n$10\r\ninvalidate\r\n*1\r\n$%d\r\n%s\r\n", len(other), other)
				if raw != want {
					t.Fatalf("%s %q round %d: pushed %q, want %q (its own write of %s is not to be sent)",
						name, mode, j, raw, want, own)
				}
			}
			tr.Close()
			wr.Close()
		}
	}
}
