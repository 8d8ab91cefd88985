package testutil

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBytesJSON(t *testing.T) {
	var got []Bytes
	if err := json.Unmarshal([]byte(`["a\u0000b", {"hex": "ff00"}, ""]`), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0]) != "a\x00b" || string(got[1]) != "\xff\x00" || len(got[2]) != 0 {
		t.Fatalf("decoded %q", got)
	}
	for _, bad := range []string{`[1]`, `[{"hex": "zz"}]`, `[{}]`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// TestRDBVectorsDecode reads every vector's JSON, so that a field the
// decoder gets wrong fails here rather than in a package's test.
func TestRDBVectorsDecode(t *testing.T) {
	for _, path := range RDBVectors(t) {
		v, data := LoadRDBVector(t, path)
		keys := 0
		for _, db := range v.Databases {
			for name, k := range db {
				keys++
				if k.Type == "set" && len(k.Members) != k.Card {
					t.Errorf("%s: %s has %d members, card %d", path, name, len(k.Members), k.Card)
				}
				if k.Type == "string" && k.Value == nil {
					t.Errorf("%s: string %s has no value", path, name)
				}
			}
		}
		if keys != v.KeyCount || len(data) < 9 || string(data[:5]) != "REDIS" {
			t.Errorf("%s: %d keys (key_count %d), header %q", path, keys, v.KeyCount, data[:min(len(data), 9)])
		}
	}
}

func TestLoggerQuietAfterTheTest(t *testing.T) {
	var l interface{ Info(string, ...any) }
	t.Run("inner", func(t *testing.T) {
		l = Logger(t, "x")
		l.Info("during")
	})
	l.Info("after") // must neither panic nor reach a finished test
}

// FreePort's ports are distinct, bindable, and outside the kernel's
// ephemeral range, where a ":0" listener or an outgoing connection could
// take one before the caller binds it.
func TestFreePortOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := unassignedPorts()
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("FreePort = %d: want a new port in [%d, %d)", p, lo, hi)
		}
		seen[p] = true
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if p := l.Addr().(*net.TCPAddr).Port; p >= lo && p < hi {
		t.Errorf("the kernel handed out port %d for \":0\", inside FreePort's range [%d, %d)", p, lo, hi)
	}
	p := FreePort(t)
	l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("FreePort's port %d: %v", p, err)
	}
	l2.Close()
}

// TestStartRedisSaysWhyItFailed: a redis-server that exits at once (here an
// unknown directive) is reported as exited, not waited on for 30 s; one
// that starts answers PING.
func TestStartRedisSaysWhyItFailed(t *testing.T) {
	bin := RequireTool(t, "redis-server", "redis-server")
	r, why := startRedis(t, bin, t.TempDir(), []string{"--no-such-directive", "1"})
	if r != nil || !strings.Contains(why, "redis-server exited") {
		t.Errorf("startRedis with a bad directive = %v, %q; want it reported as exited", r, why)
	}
	ok := StartRedis(t)
	c, err := DialRESP(ok.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if reply, err := c.Do("PING"); err != nil || reply != "+PONG\r\n" {
		t.Errorf("PING = %q, %v", reply, err)
	}
}
