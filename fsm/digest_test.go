package fsm

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"raftset/internal/testutil"
)

// TestDigestVectors loads every dump.rdb that Redis 7.2.6 and 7.4.1 wrote
// (through LoadRDB and the snapshot reader) and checks that DEBUG DIGEST,
// every key's DEBUG DIGEST-VALUE, content, deadline and OBJECT ENCODING are
// Redis's, as recorded in the vector's JSON.
func TestDigestVectors(t *testing.T) {
	for _, rdb := range testutil.RDBVectors(t) {
		name, _ := filepath.Rel(testutil.RDBDir(t), rdb)
		t.Run(name, func(t *testing.T) {
			vec, file := testutil.LoadRDBVector(t, rdb)
			f := newTestFSM(t)
			n, err := f.LoadRDB(bytes.NewReader(file), LoadOptions{NowMs: 1_000_000})
			if err != nil {
				t.Fatalf("LoadRDB: %v", err)
			}
			if n != vec.KeyCount {
				t.Errorf("LoadRDB loaded %d keys, want %d", n, vec.KeyCount)
			}
			now := int64(1_000_000)
			if got := doCmd(t, f, now, "debug", "digest"); got != "+"+vec.DebugDigest+"\r\n" {
				t.Errorf("DEBUG DIGEST = %q, want %q", got, vec.DebugDigest)
			}
			for key, want := range vec.Databases["0"] {
				if got := doCmd(t, f, now, "debug", "digest-value", key); got != "*1\r\n+"+want.DebugDigestValue+"\r\n" {
					t.Errorf("DEBUG DIGEST-VALUE %s = %q, want %s", key, got, want.DebugDigestValue)
				}
				if got := doCmd(t, f, now, "object", "encoding", key); got != fmt.Sprintf("$%d\r\n%s\r\n", len(want.ObjectEncodingAfterReload), want.ObjectEncodingAfterReload) {
					t.Errorf("OBJECT ENCODING %s = %q, want %s", key, got, want.ObjectEncodingAfterReload)
				}
				wantExp := "-1"
				if want.ExpireAtMs != nil {
					wantExp = fmt.Sprint(*want.ExpireAtMs)
				}
				if got := doCmd(t, f, now, "pexpiretime", key); got != ":"+wantExp+"\r\n" {
					t.Errorf("PEXPIRETIME %s = %q, want %s", key, got, wantExp)
				}
				switch want.Type {
				case "string":
					v := string(*want.Value)
					if got := doCmd(t, f, now, "get", key); got != fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) {
						t.Errorf("GET %s = %q, want %q", key, got, v)
					}
				case "set":
					wantM := want.MemberStrings()
					gotM := setMembers(t, f, key)
					slices.Sort(gotM)
					if !slices.Equal(gotM, wantM) {
						t.Errorf("SMEMBERS %s = %q, want %q", key, gotM, wantM)
					}
				}
			}
		})
	}
}

// setMembers returns the members of the set at key in storage order.
func setMembers(t testing.TB, f *FSM, key string) []string {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	pos := f.ks.find([]byte(key))
	if pos < 0 || !f.ks.isSet(pos) {
		t.Fatalf("%s is not a set", key)
	}
	var out []string
	f.ks.set(pos).Iterate(func(m []byte) bool { out = append(out, string(m)); return true })
	return out
}

// TestDigestRedis checks digests that a Redis 7.0.15 server answered for a
// few commands (its DEBUG DIGEST is the same code as 7.2's).
func TestDigestRedis(t *testing.T) {
	f := newTestFSM(t)
	now := int64(1_000_000)
	if got := doCmd(t, f, now, "debug", "digest"); got != "+"+strings.Repeat("0", 40)+"\r\n" {
		t.Errorf("DEBUG DIGEST of nothing = %q, want 40 zeros", got)
	}
	doCmd(t, f, now, "sadd", "s", "a", "b")
	if got := doCmd(t, f, now, "debug", "digest"); got != "+1aa1a03d171fe3f6470e0505beb9615dde7ca769\r\n" {
		t.Errorf("DEBUG DIGEST = %q", got)
	}
	doCmd(t, f, now, "sadd", "i", "1", "2", "3")
	doCmd(t, f, now, "set", "str", "hello")
	doCmd(t, f, now, "pexpireat", "str", "99999999999999")
	if got := doCmd(t, f, now, "debug", "digest"); got != "+fbedb2bfb3184283b701367aac11c95431b9bb2c\r\n" {
		t.Errorf("DEBUG DIGEST = %q", got)
	}
	want := "*4\r\n+dd99329063ca0f1f28df2ac68d94b82fd95501c6\r\n+2a462a3f51a1db89738ebbeef0c47ce1bbc85246\r\n" +
		"+d037c4eb8a8b36b602fbced4000daeab0714c1e3\r\n+0000000000000000000000000000000000000000\r\n"
	if got := doCmd(t, f, now, "debug", "digest-value", "s", "i", "str", "nokey"); got != want {
		t.Errorf("DEBUG DIGEST-VALUE = %q, want %q", got, want)
	}
}
