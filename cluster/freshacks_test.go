package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/testutil"
)

func TestFreshAcksQuorum(t *testing.T) {
	three := []raft.ServerID{"n1", "n2", "n3"}
	five := []raft.ServerID{"n1", "n2", "n3", "n4", "n5"}
	for _, tc := range []struct {
		name   string
		voters []raft.ServerID
		sent   map[raft.ServerID]int64 // requests answered, by send time
		since  int64
		want   bool
	}{
		{"three, one follower answered a newer request", three, map[raft.ServerID]int64{"n2": 20}, 10, true},
		{"three, a request sent as the round began", three, map[raft.ServerID]int64{"n3": 10}, 10, true},
		{"three, only requests sent before the round", three, map[raft.ServerID]int64{"n2": 9, "n3": 5}, 10, false},
		{"three, no answers", three, nil, 10, false},
		{"five, one newer answer is not a quorum", five, map[raft.ServerID]int64{"n2": 20, "n3": 9}, 10, false},
		{"five, two newer answers and self", five, map[raft.ServerID]int64{"n2": 20, "n5": 11}, 10, true},
		{"self not a voter: two of three others", []raft.ServerID{"n2", "n3", "n4"}, map[raft.ServerID]int64{"n2": 20, "n3": 20}, 10, true},
		{"self not a voter: one of three others", []raft.ServerID{"n2", "n3", "n4"}, map[raft.ServerID]int64{"n2": 20}, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFreshAcks()
			for id, s := range tc.sent {
				a.record(id, s)
			}
			if got := a.wait(tc.since, tc.voters, "n1", 0, nil); got != tc.want {
				t.Errorf("wait(%d) = %v, want %v", tc.since, got, tc.want)
			}
		})
	}
}

// TestFreshAcksWaitsForANewerAnswer: a round confirmed by answers to older
// requests is held until a newer one arrives, and refused if none does.
func TestFreshAcksWaitsForANewerAnswer(t *testing.T) {
	voters := []raft.ServerID{"n1", "n2", "n3"}
	a := newFreshAcks()
	a.record("n2", 5)
	done := make(chan bool)
	go func() { done <- a.wait(10, voters, "n1", time.Minute, nil) }()
	// Registered before the records, so that they must wake it.
	testutil.WaitFor(t, 10*time.Second, "the waiter to register", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.waiters == 1
	})
	a.record("n2", 7) // still older than the round
	a.record("n3", 12)
	if !<-done {
		t.Fatal("wait returned false after a newer answer")
	}

	stop := make(chan struct{})
	go func() { done <- a.wait(20, voters, "n1", time.Minute, stop) }()
	close(stop)
	if <-done {
		t.Fatal("wait returned true without an answer newer than the round")
	}
	if a.wait(20, voters, "n1", time.Millisecond, nil) {
		t.Fatal("wait returned true after its timeout without a newer answer")
	}
}
