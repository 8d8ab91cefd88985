package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"raftset/internal/testutil"
)

var flagsField = regexp.MustCompile(` flags=(\S+) `)

// TestClientFlagsMatchRedis puts a connection into each state CLIENT LIST
// shows as a flag (monitor, subscribed, MULTI, tracking, broadcast, a
// broken redirection, NO-EVICT, and combinations, which fix the letters'
// order) on raftset and on redis-server 7.0, and compares the flags field
// another connection's CLIENT LIST ID shows for it. READONLY (r) and
// NO-TOUCH (T) are not compared: a Redis without cluster mode refuses
// READONLY and 7.0 has no NO-TOUCH; their letters are checked against
// Redis 7.2's getClientInfoString order instead.
func TestClientFlagsMatchRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	cases := []struct {
		name  string
		setup [][]string
		want  string // the flags raftset must show, as Redis 7.2 does
		// want70 is redis-server 7.0's where it differs from 7.2: 7.0's
		// RESET keeps NO-EVICT, 7.2's clears it with NO-TOUCH
		// (clearClientConnectionState).
		want70 string
	}{
		{"none", nil, "N", ""},
		{"multi", [][]string{{"MULTI"}, {"PING"}}, "x", ""},
		{"subscribed", [][]string{{"SUBSCRIBE", "ch"}}, "P", ""},
		{"resp3 subscribed in multi", [][]string{{"HELLO", "3"}, {"SUBSCRIBE", "ch"}, {"MULTI"}}, "Px", ""},
		{"tracking", [][]string{{"CLIENT", "TRACKING", "on"}}, "t", ""},
		{"bcast", [][]string{{"CLIENT", "TRACKING", "on", "BCAST"}}, "tB", ""},
		{"monitor", [][]string{{"MONITOR"}}, "O", ""},
		{"no-evict", [][]string{{"CLIENT", "NO-EVICT", "on"}}, "e", ""},
		{"no-evict off", [][]string{{"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "NO-EVICT", "off"}}, "N", ""},
		{"everything", [][]string{{"HELLO", "3"}, {"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "TRACKING", "on", "BCAST"},
			{"SUBSCRIBE", "ch"}, {"MULTI"}}, "PxtBe", ""},
		{"tracking off", [][]string{{"CLIENT", "TRACKING", "on"}, {"CLIENT", "TRACKING", "off"}}, "N", ""},
		{"reset", [][]string{{"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "TRACKING", "on"}, {"RESET"}}, "N", "e"},
	}
	for _, tc := range cases {
		var got [2]string
		for i, a := range []string{addr, redis.Addr} {
			obs, c := dial(t, a), dial(t, a)
			id := testutil.ParseReply(do(t, c, "CLIENT", "ID")).Str
			for _, cmd := range tc.setup {
				if r := testutil.ParseReply(do(t, c, cmd...)); r.Kind == '-' {
					t.Fatalf("%s: %q = %s", tc.name, cmd, r)
				}
			}
			got[i] = flagsOf(t, obs, id)
			c.Close()
			obs.Close()
		}
		want70 := tc.want
		if tc.want70 != "" {
			want70 = tc.want70
		}
		if got[0] != tc.want || got[1] != want70 {
			t.Errorf("%s: flags=%s, redis 7.0 flags=%s, want %s and %s", tc.name, got[0], got[1], tc.want, want70)
		}
	}

	// R: the connection tracking redirects to has gone, and an
	// invalidation found it gone.
	var got [2]string
	for i, a := range []string{addr, redis.Addr} {
		obs, target, c, w := dial(t, a), dial(t, a), dial(t, a), dial(t, a)
		tid := testutil.ParseReply(do(t, target, "CLIENT", "ID")).Str
		id := testutil.ParseReply(do(t, c, "CLIENT", "ID")).Str
		if r := do(t, c, "CLIENT", "TRACKING", "on", "REDIRECT", tid); r != "+OK\r\n" {
			t.Fatalf("CLIENT TRACKING on REDIRECT = %q", r)
		}
		do(t, c, "GET", "flagkey")
		target.Close()
		testutil.WaitFor(t, 10*time.Second, "the redirect target to close", func() bool {
			return do(t, obs, "CLIENT", "LIST", "ID", tid) == "$0\r\n\r\n"
		})
		do(t, w, "SET", "flagkey", "x")
		testutil.WaitFor(t, 10*time.Second, "the broken redirection to show", func() bool {
			got[i] = flagsOf(t, obs, id)
			return got[i] != "t"
		})
	}
	if got[0] != got[1] || got[0] != "tR" {
		t.Errorf("broken redirection: flags=%s, redis flags=%s, want tR", got[0], got[1])
	}

	// raftset only: READONLY and NO-TOUCH, in Redis 7.2's order (r before
	// e before T, after the tracking letters).
	obs, c := dial(t, addr), dial(t, addr)
	id := testutil.ParseReply(do(t, c, "CLIENT", "ID")).Str
	for _, cmd := range [][]string{{"READONLY"}, {"CLIENT", "NO-TOUCH", "on"}, {"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "TRACKING", "on"}, {"MULTI"}} {
		if r := do(t, c, cmd...); r != "+OK\r\n" {
			t.Fatalf("%q = %q", cmd, r)
		}
	}
	if f := flagsOf(t, obs, id); f != "xtreT" {
		t.Errorf("READONLY, NO-TOUCH, NO-EVICT, TRACKING, MULTI: flags=%s, want xtreT", f)
	}
}

// flagsOf is the flags field of connection id in obs's CLIENT LIST.
func flagsOf(t *testing.T, obs *testutil.RESPClient, id string) string {
	t.Helper()
	line := testutil.ParseReply(do(t, obs, "CLIENT", "LIST", "ID", id)).Str
	m := flagsField.FindStringSubmatch(line)
	if m == nil || strings.Count(line, "\n") != 1 {
		t.Fatalf("CLIENT LIST ID %s = %q", id, line)
	}
	return m[1]
}
