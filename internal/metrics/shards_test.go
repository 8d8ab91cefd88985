package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"raftset/internal/stats"
)

// perShard are the series every replica exports, labelled by its shard.
var perShard = []string{"raftset_raft_term", "raftset_raft_commit_index", "raftset_raft_applied_index",
	"raftset_raft_last_log_index", "raftset_raft_last_snapshot_index", "raftset_snapshot_size_bytes",
	"raftset_raft_is_leader", "raftset_raft_has_leader", "raftset_raft_leader_changes_total",
	"raftset_raft_entries_proposed_total", "raftset_raft_ops_proposed_total", "raftset_group_commit_ops",
	"raftset_forwarded_write_ops_total", "raftset_read_index_rounds_total", "raftset_linearizable_reads_total",
	"raftset_expired_keys_total", "raftset_evicted_keys_total", "raftset_keys", "raftset_keys_with_expiry",
	"raftset_memory_dataset_bytes"}

// processWide are the series of the process as a whole: no shard label.
var processWide = []string{"raftset_ready", "raftset_memory_heap_bytes", "raftset_memory_rss_bytes",
	"raftset_connected_clients", "raftset_commands_total", "raftset_command_duration_seconds"}

// series is a gathered registry as "name{label=value,...}" → value (a
// histogram's sample count), labels sorted by name.
func series(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.Metric {
			var ls []string
			for _, l := range mt.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(ls)
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = metricValue(mt)
		}
	}
	return out
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func shardStats(shard uint32, state string, term, applied, keys uint64, followers ...stats.Follower) stats.Node {
	var b stats.Hist
	b.AddN(1, uint64(shard)+1)
	s := b.Snapshot()
	return stats.Node{Shard: shard, State: state, Term: term, CommitIndex: applied, AppliedIndex: applied,
		LastLogIndex: applied, HasLeader: true, LeaderChanges: 1, EntriesProposed: applied, Keys: keys,
		KeysWithExpiry: keys / 2, DatasetBytes: 100 * keys, EvictedKeys: uint64(shard), BatchOps: &s, Followers: followers}
}

// TestSeriesPerShard: a process holding replicas of two shards exports
// every per-replica series once per shard with its shard label and that
// shard's figures, the process's own once without one; a replica removed
// leaves no series behind, and a process holding none exports only the
// process's.
func TestSeriesPerShard(t *testing.T) {
	node := &fakeNode{ready: true, shards: []stats.Node{
		shardStats(0, "follower", 3, 40, 6),
		shardStats(1, "leader", 7, 90, 4,
			stats.Follower{ID: "n2", LagEntries: 5, Lag: 2 * time.Second, SinceContact: time.Millisecond},
			stats.Follower{ID: "n3", SinceContact: -1}),
	}}
	m := New()
	if err := m.Register(fakeFE{}, node); err != nil {
		t.Fatal(err)
	}
	got := series(t, m)
	want := map[string]float64{
		"raftset_raft_term{shard=0}": 3, "raftset_raft_term{shard=1}": 7,
		"raftset_raft_applied_index{shard=0}": 40, "raftset_raft_applied_index{shard=1}": 90,
		"raftset_raft_commit_index{shard=0}": 40, "raftset_raft_commit_index{shard=1}": 90,
		"raftset_raft_is_leader{shard=0}": 0, "raftset_raft_is_leader{shard=1}": 1,
		"raftset_raft_state{shard=0,state=follower}": 1, "raftset_raft_state{shard=1,state=leader}": 1,
		"raftset_raft_state{shard=1,state=follower}": 0,
		"raftset_keys{shard=0}":                      6, "raftset_keys{shard=1}": 4,
		"raftset_keys_with_expiry{shard=0}": 3, "raftset_keys_with_expiry{shard=1}": 2,
		"raftset_memory_dataset_bytes{shard=0}": 600, "raftset_memory_dataset_bytes{shard=1}": 400,
		"raftset_evicted_keys_total{shard=0}": 0, "raftset_evicted_keys_total{shard=1}": 1,
		"raftset_group_commit_ops{shard=0}": 1, "raftset_group_commit_ops{shard=1}": 2,
		"raftset_raft_follower_lag_entries{peer=n2,shard=1}":          5,
		"raftset_raft_follower_lag_seconds{peer=n2,shard=1}":          2,
		"raftset_raft_follower_last_contact_seconds{peer=n2,shard=1}": 0.001,
		"raftset_ready{}": 1, "raftset_memory_heap_bytes{}": 1 << 20, "raftset_memory_rss_bytes{}": 2 << 20,
		"raftset_connected_clients{}": 2,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for _, name := range perShard {
		for _, sh := range []string{"0", "1"} {
			if _, ok := got[name+"{shard="+sh+"}"]; !ok {
				t.Errorf("%s{shard=%s} missing", name, sh)
			}
		}
	}
	for k := range got {
		name, labels, _ := strings.Cut(k, "{")
		if slices.Contains(processWide, name) && strings.Contains(labels, "shard=") {
			t.Errorf("process-wide series with a shard label: %s", k)
		}
		if strings.Contains(k, "peer=n3") {
			t.Errorf("a follower not heard from has a series: %s", k)
		}
	}

	// REMOVEREPLICA of shard 1: its series go with it.
	node.shards = node.shards[:1]
	got = series(t, m)
	for k := range got {
		if strings.Contains(k, "shard=1") {
			t.Errorf("series of a removed replica: %s", k)
		}
	}
	if v, ok := got["raftset_raft_term{shard=0}"]; !ok || v != 3 {
		t.Errorf("raftset_raft_term{shard=0} after removing shard 1 = %v (present %v)", v, ok)
	}

	// No replica yet: the process's series only.
	node.shards, node.ready = []stats.Node{}, false
	got = series(t, m)
	for k := range got {
		if name, _, _ := strings.Cut(k, "{"); slices.Contains(perShard, name) || strings.Contains(k, "shard=") {
			t.Errorf("a process holding no replica exports %s", k)
		}
	}
	for _, k := range []string{"raftset_ready{}", "raftset_memory_heap_bytes{}", "raftset_connected_clients{}"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing on a process holding no replica", k)
		}
	}
	if got["raftset_ready{}"] != 0 {
		t.Errorf("raftset_ready = %v on a process that is not ready", got["raftset_ready{}"])
	}
}

// TestReadyFollowsReadyz: raftset_ready is what /readyz answers, shutting
// down included.
func TestReadyFollowsReadyz(t *testing.T) {
	node := &fakeNode{ready: true}
	m := New()
	if err := m.Register(fakeFE{}, node); err != nil {
		t.Fatal(err)
	}
	h := m.Handler("")
	for _, step := range []struct {
		name  string
		do    func()
		code  int
		ready float64
	}{
		{"ready", func() {}, 200, 1},
		{"no leader", func() { node.ready = false }, 503, 0},
		{"ready again", func() { node.ready = true }, 200, 1},
		{"shutting down", m.ShuttingDown, 503, 0},
	} {
		step.do()
		code, _ := get(t, h, "/readyz")
		if r := series(t, m)["raftset_ready{}"]; code != step.code || r != step.ready {
			t.Errorf("%s: /readyz %d and raftset_ready %v, want %d and %v", step.name, code, r, step.code, step.ready)
		}
	}
}
