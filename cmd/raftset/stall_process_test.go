package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// replyLostLeader is cluster's replyReadLostLeader (cluster/errors.go): the
// reply to the readers of a round confirm refused, the stall guard's
// refusal included.
const replyLostLeader = "-TRYAGAIN the read was not served: leadership could not be confirmed, retry\r\n"

// TestClusterProcessesPausedLeaderRead: a leader stopped with SIGSTOP, with
// linearizable reads (GET) sent to it while it is stopped on connections
// opened before, must not answer them from its state of before the pause
// once it is continued after another leader acknowledged a new value
// (docs/jepsen.md, Findings: "A leader resumed from SIGSTOP served a stale
// linearizable read"). Each such read gets the new value or a -TRYAGAIN
// refusal. Writers and readers keep the leader busy up to the stop, so that
// followers' replies from before it wait in its socket buffers, and reads
// are in flight: INFO raft_read_stall_refusals counts the rounds the stall
// guard (cluster/stall.go) then refuses, each of which answers its readers
// with replyLostLeader, and /metrics exports the same count. The outcome
// of a pause depends on what the resumed process runs first (most often its
// leader lease check steps it down at once), so the test makes several
// attempts, each with the cluster's leader of the moment.
//
// It checks the contract and the counter; it does not reproduce the Jepsen
// finding reliably. With the stall check removed from confirm, no attempt
// served a stale read here (0 of 220 attempts of 16 reads, on 2 CPUs): the
// reads sent during the pause found the leader already deposed (its lease
// check runs first on the resume), or their VerifyLeader round failed on
// the followers' newer term. The guard refused rounds of background reads
// in flight at the stop, which may legally see either value.
func TestClusterProcessesPausedLeaderRead(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	if runtime.GOOS != "linux" {
		t.Skip("waits for the stop in /proc")
	}
	nodes, maddrs := startMetricsCluster(t, 3)
	// At least minAttempts; then until a round was refused for a stall,
	// up to maxAttempts and the time budget.
	const minAttempts, maxAttempts = 3, 10
	budget := time.Now().Add(2 * time.Minute)
	var total pausedReadResult
	attempts := 0
	for ; attempts < maxAttempts && !t.Failed(); attempts++ {
		if attempts >= minAttempts && (total.stallRounds > 0 || time.Now().After(budget)) {
			break
		}
		r := pausedLeaderRead(t, nodes, attempts)
		t.Logf("attempt %d: %s", attempts, r)
		total.add(r)
	}
	t.Logf("%d attempts: %s", attempts, total)
	if total.stallRounds == 0 && !t.Failed() {
		t.Logf("no read round was refused for a stall in %d attempts: the counter's path was not exercised", attempts)
	}

	// The metrics endpoint exports the INFO count.
	for i, cp := range nodes {
		info := infoUint(t, dial(t, cp.addr), "raft_read_stall_refusals")
		fam := scrape(t, maddrs[i])["raftset_read_stall_refusals_total"]
		if fam == nil || len(fam.Metric) != 1 {
			t.Fatalf("%s: /metrics has no single raftset_read_stall_refusals_total: %v", cp.id, fam)
		}
		if got := fam.Metric[0].GetCounter().GetValue(); got != float64(info) {
			t.Errorf("%s: raftset_read_stall_refusals_total = %v, INFO raft_read_stall_refusals = %d", cp.id, got, info)
		}
	}
}

type pausedReadResult struct {
	probes, fresh, lost int
	other               map[string]int // other -TRYAGAIN refusals, by reply
	bgLost              int            // background readers answered replyLostLeader
	stallRounds         uint64         // INFO raft_read_stall_refusals's rise
}

func (r *pausedReadResult) add(o pausedReadResult) {
	r.probes += o.probes
	r.fresh += o.fresh
	r.lost += o.lost
	for k, v := range o.other {
		if r.other == nil {
			r.other = map[string]int{}
		}
		r.other[k] += v
	}
	r.bgLost += o.bgLost
	r.stallRounds += o.stallRounds
}

func (r pausedReadResult) String() string {
	return fmt.Sprintf("%d reads sent during the pause: %d new value, %d %q, others %v; "+
		"%d background reads got the latter; %d rounds refused for a stall",
		r.probes, r.fresh, r.lost, strings.TrimSpace(replyLostLeader), r.other, r.bgLost, r.stallRounds)
}

// pausedLeaderRead is one attempt of TestClusterProcessesPausedLeaderRead.
func pausedLeaderRead(t *testing.T, nodes []*clusterProc, attempt int) pausedReadResult {
	t.Helper()
	const (
		probes  = 16 // connections with one read each, sent during the pause
		writers = 4
		readers = 4
	)
	l := leaderOf(t, nodes, nil)
	key := fmt.Sprintf("stall:%d", attempt)
	oldVal, newVal := fmt.Sprintf("old-%d", attempt), fmt.Sprintf("new-%d", attempt)
	oldReply, newReply := bulkReply(oldVal), bulkReply(newVal)

	c := dial(t, l.addr)
	if r := do(t, c, "SET", key, oldVal); r != "+OK\r\n" {
		t.Fatalf("SET %s on the leader %s = %q", key, l.id, r)
	}
	before := infoUint(t, c, "raft_read_stall_refusals")
	// The probes' connections are open and served before the stop: their
	// reads then wait in the stopped process's socket buffers.
	conns := make([]*testutil.RESPClient, probes)
	for i := range conns {
		conns[i] = dial(t, l.addr)
		if r := do(t, conns[i], "GET", key); r != oldReply {
			t.Fatalf("GET %s on the leader %s before the stop = %q, want %q", key, l.id, r, oldReply)
		}
	}

	// Load on the leader until the stop: writes (AppendEntries in flight)
	// and linearizable reads (VerifyLeader rounds, heartbeats in flight).
	// Each goroutine ends after its command under way at the stop.
	var (
		acked, read atomic.Int64
		bgLost      atomic.Int64
		stopLoad    atomic.Bool
		wg          sync.WaitGroup
	)
	for w := range writers {
		wc := dial(t, l.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopLoad.Load(); i++ {
				r, err := wc.Do("SET", fmt.Sprintf("w:%d:%d:%d", attempt, w, i), "x")
				if err != nil || r != "+OK\r\n" {
					return
				}
				acked.Add(1)
			}
		}()
	}
	for range readers {
		rc := dial(t, l.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopLoad.Load() {
				r, err := rc.Do("GET", "bg")
				if r == replyLostLeader {
					bgLost.Add(1)
				}
				if err != nil || r != "$-1\r\n" {
					return
				}
				read.Add(1)
			}
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "writes and reads on the leader", func() bool {
		return acked.Load() >= 100 && read.Load() >= 100
	})

	p := l.p.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	cont := func() {
		if !continued {
			continued = true
			_ = p.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(cont) // a failure below would leave it stopped
	testutil.WaitFor(t, 5*time.Second, "the leader's process to stop", func() bool { return procStopped(p.Pid) })
	stopLoad.Store(true)
	for i, pc := range conns {
		if err := pc.Send([][]byte{[]byte("GET"), []byte(key)}); err != nil {
			t.Fatalf("GET %s on probe %d: %v", key, i, err)
		}
	}

	// Another leader, and a new value acknowledged by it.
	nl := leaderOf(t, nodes, l)
	nc := dial(t, nl.addr)
	testutil.WaitFor(t, 20*time.Second, "SET on the new leader "+nl.id, func() bool {
		r := do(t, nc, "SET", key, newVal)
		if r != "+OK\r\n" && !strings.HasPrefix(r, "-TRYAGAIN ") {
			t.Fatalf("SET %s on the new leader %s = %q", key, nl.id, r)
		}
		return r == "+OK\r\n"
	})
	if r := do(t, nc, "GET", key); r != newReply {
		t.Fatalf("GET %s on the new leader %s = %q, want %q", key, nl.id, r, newReply)
	}

	cont()
	res := pausedReadResult{other: map[string]int{}}
	for i, pc := range conns {
		r, err := pc.Read()
		if err != nil {
			t.Fatalf("probe %d: GET %s on the resumed %s: %v", i, key, l.id, err)
		}
		res.probes++
		switch {
		case r == oldReply:
			t.Errorf("probe %d: the resumed old leader %s answered GET %s with the value of before the pause, %q, "+
				"after %s acknowledged %q: a stale linearizable read", i, l.id, key, r, nl.id, newVal)
		case r == newReply:
			res.fresh++
		case r == replyLostLeader:
			res.lost++
		case strings.HasPrefix(r, "-TRYAGAIN the read was not served: "):
			// It stepped down before the read ran: a follower's refusal
			// (no leader known yet).
			res.other[strings.TrimSpace(r)]++
		default:
			t.Errorf("probe %d: GET %s on the resumed %s = %q, want %q or a -TRYAGAIN refusal", i, key, l.id, r, newReply)
		}
	}
	wg.Wait()
	res.bgLost = int(bgLost.Load())

	after := infoUint(t, dial(t, l.addr), "raft_read_stall_refusals")
	if after < before {
		t.Fatalf("raft_read_stall_refusals on %s went from %d to %d", l.id, before, after)
	}
	res.stallRounds = after - before
	// Only the probes and the background readers read on the old leader
	// around the pause; a round the guard refused answered its readers
	// replyLostLeader.
	if res.stallRounds > 0 && res.lost+res.bgLost == 0 {
		t.Errorf("raft_read_stall_refusals on %s rose by %d, but no read got %q", l.id, res.stallRounds, replyLostLeader)
	}
	return res
}

func bulkReply(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// infoUint is the value of an INFO raft field, as a number.
func infoUint(t *testing.T, c *testutil.RESPClient, field string) uint64 {
	t.Helper()
	r := do(t, c, "INFO", "raft")
	for line := range strings.SplitSeq(r, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s = %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO raft has no %s:\n%s", field, r)
	return 0
}

// procStopped reports whether process pid is stopped (state T in
// /proc/pid/stat).
func procStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
}
