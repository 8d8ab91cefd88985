package snapshot

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"raftset/internal/respwire"
	"raftset/internal/testutil"
)

// TestRedisLoadsExport writes a Redis 7.0 export (RDB 10; Debian ships
// Redis 7.0), has redis-check-rdb verify it, loads it into a real
// redis-server on loopback and compares every key: members, value,
// PEXPIRETIME. It then has that server SAVE and reads Redis's own file back.
// Without the binaries it is skipped, except under CI, where it fails.
func TestRedisLoadsExport(t *testing.T) {
	server, checker := redisBinaries(t)
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
		redisDo(t, c, "SELECT", strconv.Itoa(db))
		if got := redisDo(t, c, "DBSIZE").Str; got != strconv.Itoa(n) {
			t.Errorf("db %d DBSIZE = %v, want %d", db, got, n)
		}
	}
	for _, e := range entries {
		redisDo(t, c, "SELECT", strconv.Itoa(e.db))
		if e.set != nil {
			var got [][]byte
			for _, m := range redisDo(t, c, "SMEMBERS", e.key).Elems {
				got = append(got, []byte(m.Str))
			}
			slices.SortFunc(got, bytes.Compare)
			if want := sortedMembers(e.set); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("db %d SMEMBERS %q = %q, want %q", e.db, e.key, got, want)
			}
		} else if got := redisDo(t, c, "GET", e.key).Str; got != string(e.value) {
			t.Errorf("db %d GET %q = %q, want %q", e.db, e.key, got, e.value)
		}
		want := e.expire
		if want < 0 {
			want = -1
		}
		if got := redisDo(t, c, "PEXPIRETIME", e.key).Str; got != strconv.FormatInt(want, 10) {
			t.Errorf("db %d PEXPIRETIME %q = %v, want %d", e.db, e.key, got, want)
		}
	}

	// Redis's own file of the same data reads back to the same keys.
	if got := redisDo(t, c, "SAVE"); got.String() != "+OK" {
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
func startRedis(t *testing.T, server, dir, dbfilename string) *respwire.Client {
	t.Helper()
	port := testutil.FreePort(t)
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
	// A bad file makes redis-server exit while loading: the log, printed
	// above on failure, says why.
	var c *respwire.Client
	testutil.WaitFor(t, 15*time.Second, "redis-server to load the file and answer PING", func() bool {
		cl, err := respwire.Dial(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 60*time.Second)
		if err != nil {
			return false
		}
		if r, err := cl.DoParsed("PING"); err == nil && r.Str == "PONG" {
			c = cl
			return true
		}
		cl.Close()
		return false
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisDo runs one command; a transport error or an error reply fails the
// test.
func redisDo(t *testing.T, c *respwire.Client, args ...string) respwire.Reply {
	t.Helper()
	r, err := c.DoParsed(args...)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return r
}

// slotStatesAux is the AUX field the state machine writes once a hash slot
// migrated (fsm.AuxSlots), in its exact shape.
var slotStatesAux = AuxField{Key: "raftset-slots", Value: "0-8191:unowned:3,8192-8192:frozen:4,9000-9001:importing:5"}

// A raftset file carrying hash slot states still loads in redis-server:
// redis-check-rdb accepts the Redis 7.0 export (RDB 10) with the field, and
// a server loads every key and ignores the field, as it ignores every AUX
// field it does not know. (Debian's Redis 7.0 reads no RDB 11, so the
// snapshot's own version-11 file, marked raftset-ver 2, is checked by our
// Reader in TestSnapshotFormats.) Without the binaries it is skipped,
// except under CI, where it fails.
func TestRedisIgnoresSlotStates(t *testing.T) {
	server, checker := redisBinaries(t)
	entries := []entry{
		{key: "{06S}a", expire: -1, value: []byte("in slot 0")},
		{key: "free", expire: -1, value: []byte("elsewhere")},
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "dump.rdb")
	data := writeEntries(t, WriterOptions{Version: 10, Compress: true, RedisVer: "7.0.0", Aux: []AuxField{slotStatesAux}}, entries)
	if !bytes.Contains(data, []byte(slotStatesAux.Value)) {
		t.Fatal("the field was not written")
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(checker, file).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("RDB looks OK")) || !bytes.Contains(out, []byte("raftset-slots")) {
		t.Fatalf("redis-check-rdb %s: %v\n%s", file, err, out)
	}
	c := startRedis(t, server, dir, "dump.rdb")
	for _, e := range entries {
		if got := redisDo(t, c, "GET", e.key).Str; got != string(e.value) {
			t.Errorf("GET %q = %q, want %q", e.key, got, e.value)
		}
	}
	if got := redisDo(t, c, "DBSIZE").Str; got != "2" {
		t.Errorf("DBSIZE = %v, want 2", got)
	}
}

// The raftset-ver field: the Writer writes the format asked for (1 by
// default), the Reader reads 1 and 2, calls a higher number newer (the
// node must be upgraded), anything else damage.
func TestSnapshotFormats(t *testing.T) {
	for _, c := range []struct {
		format  int
		written string
		werr    bool
	}{
		{0, "1", false},
		{1, "1", false},
		{2, "2", false},
		{3, "", true},
	} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, WriterOptions{Format: c.format, Ctime: fixedCtime, Aux: []AuxField{slotStatesAux}})
		if c.werr {
			if err == nil {
				t.Errorf("format %d: NewWriter accepted it", c.format)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, r, err := readAll(buf.Bytes(), ReaderOptions{})
		if err != nil {
			t.Fatalf("format %d: %v", c.format, err)
		}
		got := ""
		for _, a := range r.Aux() {
			if a.Key == AuxRaftsetVer {
				got = a.Value
			}
		}
		if got != c.written {
			t.Errorf("format %d: raftset-ver %q, want %q", c.format, got, c.written)
		}
	}
	for _, c := range []struct {
		value string
		newer bool
	}{{"3", true}, {"0", false}, {"02", false}, {"x", false}} {
		data := writeEntries(t, WriterOptions{BareAux: true, Version: VersionRedis72, Aux: []AuxField{{AuxRaftsetVer, c.value}}}, nil)
		_, _, err := readAll(data, ReaderOptions{})
		if err == nil || errors.Is(err, ErrNewerFormat) != c.newer || !errors.Is(err, ErrCorrupt) && !c.newer {
			t.Errorf("raftset-ver %q: err = %v, want newer=%v", c.value, err, c.newer)
		}
	}
}

// redisBinaries returns the paths of redis-server and redis-check-rdb, or
// skips the test without them, except under CI, where it fails.
func redisBinaries(t *testing.T) (server, checker string) {
	t.Helper()
	server, err1 := exec.LookPath("redis-server")
	checker, err2 := exec.LookPath("redis-check-rdb")
	if err := errors.Join(err1, err2); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server and redis-check-rdb are needed under CI: %v", err)
		}
		t.Skipf("redis binaries not installed: %v", err)
	}
	return server, checker
}
