package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/testutil"
)

// logCapture collects go-redis's internal log lines (it has one global
// logger) so the test can see the client's sentinel decisions.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format+"\n", v...)
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestFailoverClientKill9Leader drives go-redis's Sentinel failover client
// against a three-process cluster: every node answers SENTINEL
// get-master-addr-by-name with the Raft leader's client address. Writers add
// unique members through the client; the leader is killed with SIGKILL. The
// client may hear of the new master from +switch-master (when the node it
// subscribed on survives), and otherwise its connections to the dead leader
// fail and every new connection asks a sentinel for the master again: writes
// resume through the new leader within a bounded time. Every
// acknowledged member survives, and the killed node, restarted, converges.
func TestFailoverClientKill9Leader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	logs := &logCapture{}
	redis.SetLogger(logs)
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	byAddr := map[string]*clusterProc{}
	var sentinels []string
	for _, cp := range nodes {
		sentinels = append(sentinels, cp.addr)
		byAddr[cp.addr] = cp
	}

	var dialMu sync.Mutex
	dialed := map[string]int{} // address → dials, sentinel connections included
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "raftset",
		SentinelAddrs: sentinels,
		MaxRetries:    -1, // count every failure; never retry a write
		DialTimeout:   time.Second,
		ReadTimeout:   3 * time.Second,
		WriteTimeout:  3 * time.Second,
		PoolSize:      8,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialMu.Lock()
			dialed[addr]++
			dialMu.Unlock()
			d := net.Dialer{Timeout: time.Second}
			return d.DialContext(ctx, network, addr)
		},
	})
	defer rdb.Close()
	ctx := context.Background()

	// masterNode names the node the client's pooled connections reach: it
	// must be the Raft leader (ROLE master), not a follower that forwards.
	masterNode := func() (string, error) {
		role, err := rdb.Do(ctx, "ROLE").Slice()
		if err != nil {
			return "", err
		}
		info, err := rdb.Info(ctx, "raft").Result()
		if err != nil {
			return "", err
		}
		id := ""
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "raft_node_id:"); ok {
				id = v
			}
		}
		return fmt.Sprintf("%v %s", role[0], id), nil
	}
	if got, err := masterNode(); err != nil || got != "master "+l.id {
		t.Fatalf("failover client reaches %q (%v), want master %s", got, err, l.id)
	}

	var (
		mu        sync.Mutex
		acked     []string
		errs      atomic.Int64
		errSample = map[string]int{}
		killedAt  atomic.Int64 // unix nanos of the kill; 0 before
		firstOK   atomic.Int64 // unix nanos of the first ack issued after the kill
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := fmt.Sprintf("w%d-%d", w, i)
				sent := time.Now().UnixNano()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				n, err := rdb.SAdd(cctx, "failover:set", m).Result()
				cancel()
				if err != nil {
					// Indeterminate: the member may or may not be in.
					errs.Add(1)
					msg := err.Error()
					if len(msg) > 60 {
						msg = msg[:60]
					}
					mu.Lock()
					errSample[msg]++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if n != 1 {
					t.Errorf("SADD %s = %d, want 1", m, n)
					return
				}
				if k := killedAt.Load(); k != 0 && sent > k {
					firstOK.CompareAndSwap(0, time.Now().UnixNano())
				}
				mu.Lock()
				acked = append(acked, m)
				mu.Unlock()
			}
		}(w)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testutil.WaitFor(t, 30*time.Second, "1000 acknowledged writes before the kill", func() bool { return count() >= 1000 })
	errsBefore := errs.Load()
	killedAt.Store(time.Now().UnixNano())
	l.p.kill9(t)
	before := count()
	testutil.WaitFor(t, 30*time.Second, "1000 more acknowledged writes after the kill", func() bool { return count() >= before+1000 })
	close(stop)
	wg.Wait()
	window := time.Duration(firstOK.Load() - killedAt.Load())
	nl := leaderOf(t, nodes, l)
	t.Logf("killed leader %s after %d acknowledged writes; first write issued after the kill acknowledged after %v; "+
		"%d failed writes during the failover (%d before); new leader %s; %d acknowledged in all",
		l.id, before, window.Round(time.Millisecond), errs.Load()-errsBefore, errsBefore, nl.id, len(acked))
	t.Logf("errors seen: %v", errSample)
	if errsBefore != 0 {
		t.Errorf("%d writes failed before the kill", errsBefore)
	}
	// Default hashicorp/raft timeouts (1 s heartbeat, 1 s election) put an
	// election at 1–3 s; allow for a loaded machine.
	if window > 15*time.Second {
		t.Errorf("writes resumed %v after the kill", window)
	}

	// The client re-resolved the master: its pool now reaches the new
	// leader, its resolver switched to it, and it dialed it.
	if got, err := masterNode(); err != nil || got != "master "+nl.id {
		t.Errorf("after the failover the client reaches %q (%v), want master %s", got, err, nl.id)
	}
	if want := fmt.Sprintf("sentinel: new master=%q addr=%q", "raftset", nl.addr); !strings.Contains(logs.String(), want) {
		t.Errorf("go-redis never switched master to the new leader (no %q logged)", want)
	}
	dialMu.Lock()
	t.Logf("client dials by address (leader %s was %s, new leader %s is %s): %v", l.id, l.addr, nl.id, nl.addr, dialed)
	dialMu.Unlock()
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.HasPrefix(line, "sentinel: ") {
			t.Logf("go-redis: %s", line)
		}
	}
	// The subscription the client makes is accepted (the message itself is
	// tested with a leadership transfer in cluster/switch_test.go).
	if r := do(t, dial(t, nl.addr), "SUBSCRIBE", "+switch-master"); r != "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n" {
		t.Errorf("SUBSCRIBE = %q", r)
	}

	// Every acknowledged member is there, read through a surviving node.
	checkMembers := func(cp *clusterProc) {
		t.Helper()
		c := dial(t, cp.addr)
		have := map[string]bool{}
		for _, m := range testutil.ParseReply(do(t, c, "SMEMBERS", "failover:set")).Elems {
			have[m.Str] = true
		}
		lost := 0
		for _, m := range acked {
			if !have[m] {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d acknowledged members lost", cp.id, lost, len(acked))
		}
	}
	for _, cp := range nodes {
		if cp != l {
			checkMembers(cp)
		}
	}

	// The killed node restarts and converges.
	l.start(t)
	waitWritable(t, l.addr)
	waitConverged(t, nodes)
	checkMembers(l)
	// The client still serves writes with the old leader back as a follower.
	if err := rdb.SAdd(ctx, "failover:set", "after-restart").Err(); err != nil {
		t.Errorf("SADD after the restart: %v", err)
	}
}
