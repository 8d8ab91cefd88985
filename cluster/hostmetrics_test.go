package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"raftset/internal/stats"
	"raftset/internal/testutil"
)

// TestHostShardStats: a process's ShardStats has one record per replica it
// holds, each with its shard id and that shard's own term, indexes and
// keys; of a shard's members exactly one reports itself leader, and the
// leader reports a lag for each other member.
func TestHostShardStats(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n3,n4", 4)
	members := map[uint32][]*Host{0: hosts[:3], 1: {hosts[0], hosts[2], hosts[3]}}
	keys := map[uint32]int{0: 3, 1: 2}
	for shard, n := range keys {
		lo, hi := 0, 8191
		if shard == 1 {
			lo, hi = 8192, 16383
		}
		rep, _ := hosts[0].Node(shard)
		for i := range n {
			if r := writeRetry(t, rep, "sadd", keyIn(t, fmt.Sprintf("s%d-%d-", shard, i), lo, hi), "m"); r != ":1\r\n" {
				t.Fatalf("SADD in shard %d = %q", shard, r)
			}
		}
	}
	for i, h := range hosts {
		want := []uint32{0}
		switch i {
		case 0, 2:
			want = []uint32{0, 1}
		case 3:
			want = []uint32{1}
		}
		var got []stats.Node
		testutil.WaitFor(t, 10*time.Second, h.self+"'s replicas to apply the writes", func() bool {
			got = h.ShardStats()
			for _, st := range got {
				if st.Keys != uint64(keys[st.Shard]) {
					return false
				}
			}
			return true
		})
		var ids []uint32
		for _, st := range got {
			ids = append(ids, st.Shard)
			if st.Term < 1 || st.AppliedIndex < uint64(keys[st.Shard]) || st.CommitIndex < st.AppliedIndex || !st.HasLeader {
				t.Errorf("%s shard %d: term %d, applied %d, commit %d, has leader %v", h.self, st.Shard, st.Term,
					st.AppliedIndex, st.CommitIndex, st.HasLeader)
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s's ShardStats shards = %v, want %v", h.self, ids, want)
		}
	}
	for shard, mem := range members {
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("one leader of shard %d that heard from its followers", shard), func() bool {
			var leaders []stats.Node
			for _, h := range mem {
				for _, st := range h.ShardStats() {
					if st.Shard == shard && st.State == "leader" {
						leaders = append(leaders, st)
					}
				}
			}
			if len(leaders) != 1 || len(leaders[0].Followers) != 2 {
				return false
			}
			for _, f := range leaders[0].Followers {
				if f.SinceContact < 0 {
					return false
				}
			}
			return true
		})
	}
}
