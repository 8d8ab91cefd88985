package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/testutil"
)

// Config.ClockOffset shifts the leader's entry time (deadlines of relative
// TTLs) and the clock reads check deadlines against.
func TestClockOffsetShiftsDeadlinesAndReads(t *testing.T) {
	cfg := fastConfig(t, "n1")
	cfg.ClockOffset = time.Hour
	n, _ := mustRealNode(t, cfg)
	ctx := context.Background()
	before := time.Now().Add(time.Hour + time.Minute).UnixMilli()
	if got := write1(t, n, "set", "k", "v", "px", "60000"); got != "+OK\r\n" {
		t.Fatalf("SET = %q", got)
	}
	after := time.Now().Add(time.Hour + time.Minute).UnixMilli()
	got := string(n.Read(ctx, args("pexpiretime", "k"), false))
	at, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(got, ":"), "\r\n"), 10, 64)
	if err != nil || at < before || at > after {
		t.Fatalf("PEXPIRETIME = %q, want a deadline in [%d, %d] (the wall clock + 1h + 60s)", got, before, after)
	}
	// The read's clock is shifted too, so the key has its full minute.
	if got := string(n.Read(ctx, args("ttl", "k"), false)); got != ":60\r\n" {
		t.Errorf("TTL on the shifted node = %q, want :60", got)
	}
	// A deadline between the wall clock and the shifted clock has passed
	// for this node.
	inHalfAnHour := strconv.FormatInt(time.Now().Add(30*time.Minute).UnixMilli(), 10)
	if got := write1(t, n, "set", "k2", "v", "pxat", inHalfAnHour); got != "+OK\r\n" {
		t.Fatalf("SET PXAT = %q", got)
	}
	if got := string(n.Read(ctx, args("get", "k2"), false)); got != "$-1\r\n" {
		t.Errorf("GET of a key whose deadline passed on the shifted clock = %q, want nil", got)
	}
}

// Config.AckBeforeCommit answers a write that no quorum stored; a leader
// cut off from its followers then loses it. Without the switch the same
// write is never acknowledged.
func TestAckBeforeCommitAcknowledgesWritesThatAreLost(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run("ack-before-commit="+strconv.FormatBool(unsafe), func(t *testing.T) {
			c := newServedCluster(t, 3, func(cfg *Config) { cfg.AckBeforeCommit = unsafe })
			l := c.leader()
			if got := write1(t, l.node, "sadd", "s", "before"); got != ":1\r\n" {
				t.Fatalf("SADD before the cut = %q", got)
			}
			c.converged(l)
			fs := c.followers(l)
			l.trans.DisconnectAll()
			for _, f := range fs {
				f.trans.Disconnect(raft.ServerAddress(l.id))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			got := string(l.node.Write(ctx, []command.Op{cmd("sadd", "s", "cut-off")})[0])
			if unsafe && got != ":1\r\n" {
				t.Fatalf("SADD on the cut-off leader with the switch = %q, want :1 at once", got)
			}
			if !unsafe && !strings.HasPrefix(got, "-CLUSTERDOWN") && !strings.HasPrefix(got, "-TRYAGAIN") {
				t.Fatalf("SADD on the cut-off leader without the switch = %q, want an error", got)
			}
			var nl *member
			testutil.WaitFor(t, 10*time.Second, "a new leader among the followers", func() bool {
				for _, f := range fs {
					if f.node.IsLeader() {
						nl = f
					}
				}
				return nl != nil
			})

			if got := string(nl.node.Read(context.Background(), args("sismember", "s", "cut-off"), false)); got != ":0\r\n" {
				t.Errorf("the new leader has the cut-off write: SISMEMBER = %q", got)
			}
		})
	}
}
