package resp

import (
	"strings"
	"sync/atomic"
	"testing"
)

// routedStore is the fake store with a shard that this node may or may not
// serve (a follower whose leader is at leaderAddr).
type routedStore struct {
	*fakeStore
	here atomic.Bool
}

const leaderAddr = "10.0.0.9:6379"

func (r *routedStore) RouteSlot(int) (string, bool) {
	if r.here.Load() {
		return "", true
	}
	return leaderAddr, false
}

func TestClusterMode(t *testing.T) {
	const crossSlot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
	// Slots (redis-server's CLUSTER KEYSLOT): a 15495, b 3300, {a}x 15495.
	for _, tc := range []struct {
		name  string
		mode  string
		here  bool
		steps [][2]string // command (space-separated), exact reply
	}{
		{"off", "", true, [][2]string{
			{"CLUSTER INFO", "-ERR This instance has cluster support disabled\r\n"},
			{"CLUSTER KEYSLOT a", "-ERR This instance has cluster support disabled\r\n"},
			{"CLUSTER NOSUCH", "-ERR unknown subcommand 'NOSUCH'. Try CLUSTER HELP.\r\n"},
			{"ASKING", "-ERR This instance has cluster support disabled\r\n"},
			{"DEL a b", ":0\r\n"},
		}},
		{"leader", "cluster", true, [][2]string{
			{"CLUSTER KEYSLOT a", ":15495\r\n"},
			{"ASKING", "+OK\r\n"},
			{"CLUSTER KEYSLOT {a}x", ":15495\r\n"},
			{"MSET a 1 b 2", crossSlot},
			{"SADD {a}x m", ":1\r\n"},
			{"DEL a {a}x", ":1\r\n"},
			{"SMOVE a b m", crossSlot},
			{"PING", "+PONG\r\n"},
			{"MULTI", "+OK\r\n"},
			{"SET a 1", "+QUEUED\r\n"},
			{"SET b 1", "+QUEUED\r\n"},
			{"EXEC", crossSlot},
			{"EXEC", "-ERR EXEC without MULTI\r\n"},
			{"MULTI", "+OK\r\n"},
			{"SINTERSTORE d a b", crossSlot},
			{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		}},
		{"follower", "cluster", false, [][2]string{
			{"GET a", "-MOVED 15495 " + leaderAddr + "\r\n"},
			{"SET b 1", "-MOVED 3300 " + leaderAddr + "\r\n"},
			{"MSET a 1 b 2", crossSlot},
			{"PING", "+PONG\r\n"},
			{"READONLY", "+OK\r\n"},
			{"GET a", "$-1\r\n"},
			{"SET a 1", "-MOVED 15495 " + leaderAddr + "\r\n"},
			{"MULTI", "+OK\r\n"},
			{"SET a 1", "-MOVED 15495 " + leaderAddr + "\r\n"},
			{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
			{"READWRITE", "+OK\r\n"},
			{"MULTI", "+OK\r\n"},
			{"PING", "+QUEUED\r\n"},
			{"EXEC", "*1\r\n+PONG\r\n"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &routedStore{fakeStore: newFakeStore()}
			st.here.Store(tc.here)
			_, addr := startServer(t, Config{Mode: tc.mode}, st)
			c := dial(t, addr)
			for _, s := range tc.steps {
				if got := c.do(strings.Fields(s[0])...); got != s[1] {
					t.Errorf("%s = %q, want %q", s[0], got, s[1])
				}
			}
		})
	}
}
