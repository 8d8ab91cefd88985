package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// seqLoad runs writers that each add 0, 1, 2, ... to their own set
// (seq:<w>), one SADD at a time, through the given nodes in turn. Since a
// writer never has two writes in flight, any state of the cluster holds a
// prefix 0..k-1 of every writer's members.
type seqLoad struct {
	mu    sync.Mutex
	acked []int // per writer: members acknowledged
	sent  []int // per writer: members sent (acknowledged or not)
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startSeqLoad(t *testing.T, addrs []string, writers int) *seqLoad {
	t.Helper()
	l := &seqLoad{acked: make([]int, writers), sent: make([]int, writers), stop: make(chan struct{})}
	for w := range writers {
		c := dial(t, addrs[w%len(addrs)])
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.mu.Lock()
				l.sent[w] = i + 1
				l.mu.Unlock()
				r, err := c.Do("SADD", fmt.Sprintf("seq:%d", w), strconv.Itoa(i))
				if err != nil || r != ":1\r\n" {
					// Its outcome may be unknown: stop, so the prefix holds.
					t.Logf("writer %d: SADD %d = %q, %v (writer stops)", w, i, r, err)
					return
				}
				l.mu.Lock()
				l.acked[w] = i + 1
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *seqLoad) snapshot() (acked, sent []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.acked...), append([]int(nil), l.sent...)
}

func (l *seqLoad) waitAcked(t *testing.T, total int) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the load to make progress", func() bool {
		a, _ := l.snapshot()
		n := 0
		for _, v := range a {
			n += v
		}
		return n >= total
	})
}

func (l *seqLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// checkPrefixes checks, on a server holding a backup taken between the two
// load snapshots, that every writer's set is exactly 0..k-1 with k at
// least what was acknowledged before the backup began (it is linearizable)
// and at most what was sent before it ended.
func checkPrefixes(t *testing.T, c *testutil.RESPClient, ackedBefore, sentAfter []int) {
	t.Helper()
	for w := range ackedBefore {
		got := testutil.ParseReply(do(t, c, "SMEMBERS", fmt.Sprintf("seq:%d", w))).Elems
		k := len(got)
		if k < ackedBefore[w] || k > sentAfter[w] {
			t.Errorf("seq:%d has %d members; acknowledged before the backup %d, sent before its end %d",
				w, k, ackedBefore[w], sentAfter[w])
		}
		for _, m := range got {
			if v, err := strconv.Atoi(m.Str); err != nil || v < 0 || v >= k {
				t.Errorf("seq:%d holds %q, not a prefix of 0..%d: the backup is not a consistent state", w, m.Str, k-1)
				break
			}
		}
	}
}

func digestOf(t *testing.T, addr string) string {
	t.Helper()
	return do(t, dial(t, addr), "DEBUG", "DIGEST")
}

// importProc starts a new raftset that imports file (--import) and returns
// its address once it takes writes.
func importProc(t *testing.T, file string) string {
	t.Helper()
	p := startProc(t, filepath.Join(t.TempDir(), "imported"), "--import", file)
	waitWritable(t, p.addr)
	return p.addr
}

// TestBackupRedisCliUnderLoad: Debian's redis-cli --rdb against a follower
// of a 3-node cluster while writers run through every node. The file loads
// in Debian's redis-server and in a new raftset (--import) with equal DEBUG
// DIGESTs, and it is a consistent, linearizable state: every writer's set
// is a prefix holding at least what was acknowledged before the backup.
// Then, with the load stopped, raftset backup from the other follower
// reports an index and gives a file whose digest is the cluster's. Last,
// the follower is stopped and its own log replayed (raftset digest --dir):
// its state at exactly the index each backup reports has that backup's
// digest, and the index is the one the node logged and the file carries.
func TestBackupRedisCliUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	// No snapshot: every node keeps its whole log, so the state at any
	// index can be rebuilt from it.
	nodes := startCluster(t, 3, "--snapshot-threshold", "100000000", "--snapshot-log-size", "0")
	l := leaderOf(t, nodes, nil)
	fol := followersOf(nodes, l)
	load := startSeqLoad(t, []string{nodes[0].addr, nodes[1].addr, nodes[2].addr}, 6)
	load.waitAcked(t, 300)

	dir := t.TempDir()
	file := filepath.Join(dir, "dump.rdb")
	host, port, _ := net.SplitHostPort(fol[0].addr)
	ackedBefore, _ := load.snapshot()
	out, err := exec.Command(cli, "-h", host, "-p", port, "--rdb", file).CombinedOutput()
	_, sentAfter := load.snapshot()
	if err != nil || !bytes.Contains(out, []byte("Transfer finished with success")) {
		t.Fatalf("redis-cli --rdb: %v\n%s", err, out)
	}
	load.waitAcked(t, 600) // the load went on after the backup
	res, err := verifyRDB(file)
	if err != nil {
		t.Fatalf("the file redis-cli wrote does not verify: %v", err)
	}
	if res.index == "?" || res.index == "0" {
		t.Errorf("backup index = %s, want the log index it is consistent with", res.index)
	}

	redis := testutil.StartRedis(t, "--dir", dir, "--dbfilename", "dump.rdb", "--enable-debug-command", "yes")
	rc := dial(t, redis.Addr)
	checkPrefixes(t, rc, ackedBefore, sentAfter)
	redisDigest := do(t, rc, "DEBUG", "DIGEST")
	if got := digestOf(t, importProc(t, file)); got != redisDigest {
		t.Errorf("DEBUG DIGEST of the backup: imported into raftset %q, loaded by redis-server %q", got, redisDigest)
	}

	// Quiescent: the cluster's state is its state at the backup's index.
	load.halt()
	clusterDigest := waitConverged(t, nodes)
	file2 := filepath.Join(dir, "quiet.rdb")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"backup", "--addr", fol[1].addr, file2}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset backup exited %d: %s", code, stderr.String())
	}
	res2, err := verifyRDB(file2)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("consistent with index %s term %s, checksum OK", res2.index, res2.term)
	if !strings.Contains(stdout.String(), want) || !strings.Contains(stderr.String(), "backup: 100%") {
		t.Errorf("raftset backup printed %q (stderr %q), want %q and a progress line", stdout.String(), stderr.String(), want)
	}
	if i1, _ := strconv.Atoi(res.index); func() int { i2, _ := strconv.Atoi(res2.index); return i2 }() <= i1 {
		t.Errorf("second backup's index %s is not past the first's %s", res2.index, res.index)
	}
	if got := digestOf(t, importProc(t, file2)); got != clusterDigest {
		t.Errorf("DEBUG DIGEST of the quiescent backup imported = %q, the cluster's = %q", got, clusterDigest)
	}
	redis2 := testutil.StartRedis(t, "--dir", dir, "--dbfilename", "quiet.rdb", "--enable-debug-command", "yes")
	if got := digestOf(t, redis2.Addr); got != clusterDigest {
		t.Errorf("DEBUG DIGEST of the quiescent backup in redis-server = %q, the cluster's = %q", got, clusterDigest)
	}

	// The cluster's state at the backup's index, from the serving node's
	// own log: what the node held when it wrote the file, not after.
	fol[0].p.stop(t)
	if want := "index=" + res.index; !strings.Contains(fol[0].p.stderr.String(), "sent an RDB file (SYNC)") ||
		!strings.Contains(fol[0].p.stderr.String(), want) {
		t.Errorf("the serving node did not log the backup's index (%s)", want)
	}
	stdout.Reset()
	if code := run([]string{"rdb", "check", file}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "AUX raftset-index = "+res.index+"\n") {
		t.Errorf("raftset rdb check of the redis-cli file exited %d and printed %q, want its index %s", code, stdout.String(), res.index)
	}
	atIndex := func(index string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run([]string{"digest", "--dir", fol[0].dir, "--index", index}, &out, &errOut); code != 0 {
			t.Fatalf("raftset digest --index %s exited %d: %s", index, code, errOut.String())
		}
		t.Logf("raftset digest --index %s: %s", index, strings.TrimSpace(out.String()))
		return out.String()
	}
	hexOf := func(reply string) string { return testutil.ParseReply(reply).Str }
	if got, want := atIndex(res.index), hexOf(redisDigest)+" index "+res.index+" term "+res.term+" ("; !strings.HasPrefix(got, want) {
		t.Errorf("the cluster's state at the redis-cli backup's index: %q, want %q... (the backup's digest in redis-server)", got, want)
	}
	if hexOf(redisDigest) == hexOf(clusterDigest) {
		t.Errorf("the redis-cli backup's digest is the final state's: the load did not go on after it, the index check proves nothing")
	}
	if got, want := atIndex(res2.index), hexOf(clusterDigest)+" index "+res2.index+" "; !strings.HasPrefix(got, want) {
		t.Errorf("the cluster's state at raftset backup's index: %q, want %q...", got, want)
	}
	stdout.Reset()
	if code := run([]string{"digest", file}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), hexOf(redisDigest)+" index "+res.index+" ") {
		t.Errorf("raftset digest %s exited %d: %q, want %s index %s", file, code, stdout.String(), hexOf(redisDigest), res.index)
	}
}

// TestRestoreIntoRunningCluster: a backup taken with raftset backup is
// restored through a follower's address into a cluster that moved on: every
// node ends with the backup's state, the members stay the same voters, and
// the cluster takes writes afterwards.
func TestRestoreIntoRunningCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	fol := followersOf(nodes, l)
	c := dial(t, l.addr)
	for i := range 200 {
		do(t, c, "SADD", fmt.Sprintf("s:%d", i%7), strconv.Itoa(i), "m"+strconv.Itoa(i))
		do(t, c, "SET", fmt.Sprintf("k:%d", i), strings.Repeat("v", i))
	}
	backupDigest := waitConverged(t, nodes)
	file := filepath.Join(t.TempDir(), "b.rdb")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"backup", "--addr", fol[0].addr, file}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset backup exited %d: %s", code, stderr.String())
	}
	membersBefore := raftMembers(t, l.addr)

	// The cluster moves on.
	do(t, c, "FLUSHALL")
	do(t, c, "SADD", "after", "x")
	if d := waitConverged(t, nodes); d == backupDigest {
		t.Fatal("the state did not change after the backup")
	}

	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"restore", "--addr", fol[1].addr, file}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset restore exited %d: %s", code, stderr.String())
	}
	if want := fmt.Sprintf("through the leader %s: 207 keys", l.addr); !strings.Contains(stdout.String(), want) {
		t.Errorf("raftset restore printed %q, want %q", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "restore: upload: 100%") {
		t.Errorf("raftset restore showed no progress: %q", stderr.String())
	}
	if d := waitConverged(t, nodes); d != backupDigest {
		t.Errorf("DEBUG DIGEST after restore = %q, the backup's %q", d, backupDigest)
	}
	if got := raftMembers(t, fol[0].addr); got != membersBefore {
		t.Errorf("members after restore = %q, before %q", got, membersBefore)
	}
	for _, cp := range nodes {
		cc := dial(t, cp.addr)
		if r := do(t, cc, "EXISTS", "after"); r != ":0\r\n" {
			t.Errorf("%s: EXISTS after = %q, want :0 (replaced)", cp.id, r)
		}
		if r := do(t, cc, "SISMEMBER", "s:3", "m3"); r != ":1\r\n" {
			t.Errorf("%s: SISMEMBER s:3 m3 = %q, want :1 (restored)", cp.id, r)
		}
	}
	if r := do(t, dial(t, fol[0].addr), "SADD", "after", "y"); r != ":1\r\n" {
		t.Errorf("write through a follower after restore = %q", r)
	}
}

// raftMembers is RAFT.INFO's member lines, which name id, suffrage and
// addresses.
func raftMembers(t *testing.T, addr string) string {
	t.Helper()
	info := testutil.ParseReply(do(t, dial(t, addr), "RAFT.INFO")).Str
	var out []string
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "member") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

// TestSyncAndRestoreNeedAuth: with requirepass, SYNC and RAFT.RESTORE are
// refused before AUTH, and raftset backup/restore work with --pass only.
func TestSyncAndRestoreNeedAuth(t *testing.T) {
	addr, _ := startNode(t, "")
	do(t, dial(t, addr), "CONFIG", "SET", "requirepass", "s3cret")
	c := dial(t, addr)
	for _, cmd := range [][]string{{"SYNC"}, {"PSYNC", "?", "-1"}, {"RAFT.RESTORE", "x"}} {
		if r := do(t, c, cmd...); !strings.HasPrefix(r, "-NOAUTH") {
			t.Errorf("%s before AUTH = %q, want -NOAUTH", cmd[0], r)
		}
	}
	do(t, c, "AUTH", "s3cret")
	do(t, c, "SADD", "s", "a", "b")
	file := filepath.Join(t.TempDir(), "b.rdb")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"backup", "--addr", addr, file}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "NOAUTH") {
		t.Errorf("backup without --pass exited %d: %q", code, stderr.String())
	}
	if code := run([]string{"backup", "--addr", addr, "--pass", "s3cret", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("backup with --pass exited %d: %q", code, stderr.String())
	}
	if r := do(t, c, "RAFT.RESTORE", "REDIS0011 not an rdb file"); !strings.HasPrefix(r, "-ERR RAFT.RESTORE: the file was not restored: ") {
		t.Errorf("RAFT.RESTORE of a damaged file = %q", r)
	}
	if r := do(t, c, "SCARD", "s"); r != ":2\r\n" {
		t.Fatalf("SCARD s after a refused restore = %q, want :2 (unchanged)", r)
	}
	do(t, c, "DEL", "s")
	stderr.Reset()
	if code := run([]string{"restore", "--addr", addr, file}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "NOAUTH") {
		t.Errorf("restore without --pass exited %d: %q", code, stderr.String())
	}
	if r := do(t, c, "EXISTS", "s"); r != ":0\r\n" {
		t.Fatalf("EXISTS s after a refused restore = %q", r)
	}
	if code := run([]string{"restore", "--addr", addr, "--pass", "s3cret", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("restore with --pass exited %d: %q", code, stderr.String())
	}
	if r := do(t, c, "SCARD", "s"); r != ":2\r\n" {
		t.Errorf("SCARD s after restore = %q, want :2", r)
	}
}

// TestSyncReplies pins what SYNC and PSYNC send byte for byte around the
// file: PSYNC's +FULLRESYNC line carries the file's index as the offset,
// SYNC's bulk length is the file's, and the connection closes after it.
func TestSyncReplies(t *testing.T) {
	addr, _ := startNode(t, "")
	c := dial(t, addr)
	do(t, c, "SADD", "s", "1", "2", "x")
	for _, psync := range []bool{false, true} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		req := "REPLCONF capa eof\r\nREPLCONF rdb-only 1\r\nSYNC\r\n"
		if psync {
			req = "PSYNC ? -1\r\n"
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		var all bytes.Buffer
		if _, err := all.ReadFrom(conn); err != nil {
			t.Fatalf("read until the server closes: %v", err)
		}
		conn.Close()
		b := all.Bytes()
		if !psync {
			if !bytes.HasPrefix(b, []byte("+OK\r\n+OK\r\n")) {
				t.Fatalf("REPLCONF replies: %q", b[:min(len(b), 20)])
			}
			b = b[len("+OK\r\n+OK\r\n"):]
		}
		var index string
		if psync {
			line, rest, _ := bytes.Cut(b, []byte("\r\n"))
			f := strings.Fields(string(line))
			if len(f) != 3 || f[0] != "+FULLRESYNC" || len(f[1]) != 40 {
				t.Fatalf("PSYNC first line = %q", line)
			}
			index, b = f[2], rest
		}
		head, rdb, _ := bytes.Cut(b, []byte("\r\n"))
		if n, err := strconv.Atoi(strings.TrimPrefix(string(head), "$")); err != nil || n != len(rdb) {
			t.Fatalf("bulk header %q, %d bytes follow (the file, then the connection closes)", head, len(rdb))
		}
		path := filepath.Join(t.TempDir(), "f.rdb")
		if err := os.WriteFile(path, rdb, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := verifyRDB(path)
		if err != nil || res.keys != 1 || !bytes.HasPrefix(rdb, []byte("REDIS0010")) {
			t.Fatalf("the file: %+v, %v, starts %q", res, err, rdb[:9])
		}
		if psync && index != res.index {
			t.Errorf("+FULLRESYNC offset %s, the file's raftset-index %s", index, res.index)
		}
	}
}

// TestRecoverLostQuorum: three nodes take acknowledged writes; two are
// killed for good (kill -9, the leader among them); the survivor, stopped,
// is rewritten by raftset recover into a cluster of itself, restarted with
// its old arguments, and two fresh nodes join it. Every acknowledged write
// is on all three and their DEBUG DIGESTs equal the digest before the kill.
func TestRecoverLostQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	survivor := followersOf(nodes, l)[0]
	load := startSeqLoad(t, []string{nodes[0].addr, nodes[1].addr, nodes[2].addr}, 6)
	load.waitAcked(t, 600)
	load.halt()
	acked, sent := load.snapshot()
	// Every acknowledged write is on a majority, not necessarily on the
	// survivor: wait until it has them all, as an operator would pick the
	// survivor with the highest applied index.
	before := waitConverged(t, nodes)
	for _, cp := range nodes {
		if cp != survivor {
			cp.p.kill9(t)
		}
	}
	c := dial(t, survivor.addr)
	if r := do(t, c, "SADD", "nope", "x"); !strings.HasPrefix(r, "-") {
		t.Fatalf("a write without a quorum = %q, want an error", r)
	}
	survivor.p.stop(t)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"recover", "--dir", survivor.dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("raftset recover exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "configuration is now "+survivor.id+"=") {
		t.Errorf("raftset recover printed %q", stdout.String())
	}
	survivor.start(t)
	waitWritable(t, survivor.addr)

	joined := []*clusterProc{survivor}
	for i := range 2 {
		id := fmt.Sprintf("fresh%d", i)
		cp := &clusterProc{id: id, dir: filepath.Join(t.TempDir(), id), addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
		_, port, _ := net.SplitHostPort(cp.addr)
		cp.extra = []string{"--port", port, "--node-id", id, "--join", survivor.addr, "--loglevel", "info"}
		cp.start(t)
		joined = append(joined, cp)
	}
	testutil.WaitFor(t, 30*time.Second, "two joined voters", func() bool {
		return strings.Count(raftMembers(t, survivor.addr), "suffrage=voter") == 3
	})
	if got := waitConverged(t, joined); got != before {
		t.Errorf("DEBUG DIGEST after recovery = %q, before the kill %q", got, before)
	}
	for _, cp := range joined {
		// Every acknowledged member, each writer's set a prefix.
		checkPrefixes(t, dial(t, cp.addr), acked, sent)
	}
	// The recovered cluster has a quorum of its own: it takes writes, and
	// keeps them with one of its three nodes down.
	joined[1].p.kill9(t)
	if r := do(t, dial(t, joined[2].addr), "SADD", "after", "x"); r != ":1\r\n" {
		t.Errorf("write after recovery with one node down = %q", r)
	}
}
