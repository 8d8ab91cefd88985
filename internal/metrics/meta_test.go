package metrics

import (
	"strings"
	"testing"
	"time"

	"raftset/internal/stats"
)

// metaRaftNames are the metadata group's Raft series, each the name of a
// shard's series with raftset_meta_ for raftset_.
var metaRaftNames = []string{"raftset_meta_raft_term", "raftset_meta_raft_commit_index",
	"raftset_meta_raft_applied_index", "raftset_meta_raft_last_log_index", "raftset_meta_raft_last_snapshot_index",
	"raftset_meta_raft_state", "raftset_meta_raft_is_leader", "raftset_meta_raft_has_leader",
	"raftset_meta_raft_leader_changes_total"}

// TestMetaSeries: a sharded process exports raftset_meta_voter and
// raftset_meta_map_epoch, and, when it runs a replica of the metadata
// group, that replica's Raft series under raftset_meta_raft_* with no
// shard label (and lag series per peer on the group's leader), and its
// automatic leader balancer's counts; a process
// outside the group has none of those, and one without shard-map no
// raftset_meta_* series at all. The shards' series are the same whatever
// the metadata group does.
func TestMetaSeries(t *testing.T) {
	leader := stats.Node{Shard: 1<<28 - 1, State: "leader", Term: 4, CommitIndex: 12, AppliedIndex: 11,
		LastLogIndex: 13, LastSnapshotIndex: 8, HasLeader: true, LeaderChanges: 2, Keys: 2,
		Followers: []stats.Follower{
			{ID: "n2", LagEntries: 3, Lag: 1500 * time.Millisecond, SinceContact: 20 * time.Millisecond},
			{ID: "n3", SinceContact: -1}}}
	follower := leader
	follower.State, follower.Followers, follower.LeaderChanges = "follower", nil, 1
	shards := []stats.Node{shardStats(0, "follower", 3, 40, 6)}

	for _, tc := range []struct {
		name string
		meta *stats.Meta
		want map[string]float64
		// absent are series (name{labels}) or, ending in "{", whole
		// families that must not be exported.
		absent []string
	}{
		{
			name: "metadata leader",
			meta: &stats.Meta{Epoch: 7, Voter: true, Replica: &leader, BalanceTransfers: 3, BalanceFailures: 1},
			want: map[string]float64{
				"raftset_meta_voter{}": 1, "raftset_meta_map_epoch{}": 7,
				"raftset_leader_balance_transfers_total{}": 3, "raftset_leader_balance_failures_total{}": 1,
				"raftset_meta_raft_term{}": 4, "raftset_meta_raft_commit_index{}": 12,
				"raftset_meta_raft_applied_index{}": 11, "raftset_meta_raft_last_log_index{}": 13,
				"raftset_meta_raft_last_snapshot_index{}": 8,
				"raftset_meta_raft_state{state=leader}":   1, "raftset_meta_raft_state{state=follower}": 0,
				"raftset_meta_raft_state{state=candidate}": 0, "raftset_meta_raft_state{state=shutdown}": 0,
				"raftset_meta_raft_is_leader{}": 1, "raftset_meta_raft_has_leader{}": 1,
				"raftset_meta_raft_leader_changes_total{}":                 2,
				"raftset_meta_raft_follower_lag_entries{peer=n2}":          3,
				"raftset_meta_raft_follower_lag_seconds{peer=n2}":          1.5,
				"raftset_meta_raft_follower_last_contact_seconds{peer=n2}": 0.02,
			},
			absent: []string{"raftset_meta_raft_follower_lag_entries{peer=n3}"},
		},
		{
			name: "metadata follower",
			meta: &stats.Meta{Epoch: 7, Voter: true, Replica: &follower},
			want: map[string]float64{
				"raftset_meta_voter{}": 1, "raftset_meta_map_epoch{}": 7,
				"raftset_meta_raft_state{state=follower}": 1, "raftset_meta_raft_state{state=leader}": 0,
				"raftset_meta_raft_is_leader{}": 0, "raftset_meta_raft_has_leader{}": 1,
				"raftset_meta_raft_leader_changes_total{}": 1,
			},
			absent: []string{"raftset_meta_raft_follower_lag_entries{", "raftset_meta_raft_follower_lag_seconds{",
				"raftset_meta_raft_follower_last_contact_seconds{"},
		},
		{
			// A replica left out of the group's configuration still
			// reports its Raft state, and says it votes no more.
			name: "replica that is no voter",
			meta: &stats.Meta{Epoch: 5, Replica: &follower},
			want: map[string]float64{"raftset_meta_voter{}": 0, "raftset_meta_map_epoch{}": 5,
				"raftset_meta_raft_term{}": 4},
		},
		{
			name: "outside the metadata group",
			meta: &stats.Meta{Epoch: 7},
			want: map[string]float64{"raftset_meta_voter{}": 0, "raftset_meta_map_epoch{}": 7,
				"raftset_leader_balance_transfers_total{}": 0, "raftset_leader_balance_failures_total{}": 0},
			absent: prefixed(metaRaftNames),
		},
		{
			name: "no shard-map",
			absent: append(prefixed(metaRaftNames), "raftset_meta_voter{", "raftset_meta_map_epoch{",
				"raftset_leader_balance_transfers_total{", "raftset_leader_balance_failures_total{"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			if err := m.Register(fakeFE{}, &fakeNode{ready: true, shards: shards, meta: tc.meta}); err != nil {
				t.Fatal(err)
			}
			got := series(t, m)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
				}
			}
			for k := range got {
				for _, a := range tc.absent {
					if k == a || strings.HasSuffix(a, "{") && strings.HasPrefix(k, a) {
						t.Errorf("%s exported, want none", k)
					}
				}
				name, labels, _ := strings.Cut(k, "{")
				if strings.HasPrefix(name, "raftset_meta_") && strings.Contains(labels, "shard=") {
					t.Errorf("a metadata series with a shard label: %s", k)
				}
				if strings.HasPrefix(name, "raftset_raft_") && !strings.Contains(labels, "shard=0") {
					t.Errorf("a shard series of no shard held: %s", k)
				}
			}
			// The shards' series are untouched: shard 0's term and keys,
			// and none of the metadata replica's figures.
			if got["raftset_raft_term{shard=0}"] != 3 || got["raftset_keys{shard=0}"] != 6 {
				t.Errorf("shard 0: term %v, keys %v, want 3 and 6", got["raftset_raft_term{shard=0}"], got["raftset_keys{shard=0}"])
			}
			if tc.meta != nil && tc.meta.Replica != nil {
				// Every Raft series of the metadata replica is there, and
				// is a shard series' name with raftset_meta_ for raftset_.
				for _, name := range metaRaftNames {
					shardName := "raftset_" + strings.TrimPrefix(name, "raftset_meta_")
					var meta, shard bool
					for k := range got {
						meta = meta || strings.HasPrefix(k, name+"{")
						shard = shard || strings.HasPrefix(k, shardName+"{")
					}
					if !meta || !shard {
						t.Errorf("%s exported %v, its shard counterpart %s %v; want both", name, meta, shardName, shard)
					}
				}
			}
		})
	}
}

// prefixed turns series names into the "name{" prefixes that match every
// series of the family.
func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "{"
	}
	return out
}
