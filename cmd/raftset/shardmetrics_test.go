package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"raftset/internal/slot"
	"raftset/internal/testutil"
)

// byShard returns fam's series by their shard label (and by peer too, as
// "shard/peer", when they have one).
func byShard(fams map[string]*dto.MetricFamily, fam string) map[string]float64 {
	out := map[string]float64{}
	f := fams[fam]
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		var shard, peer string
		hasShard := false
		for _, l := range m.Label {
			switch l.GetName() {
			case "shard":
				shard, hasShard = l.GetValue(), true
			case "peer":
				peer = l.GetValue()
			}
		}
		if !hasShard {
			shard = "none" // a per-shard series without its label: never wanted
		}
		if peer != "" {
			shard += "/" + peer
		}
		switch {
		case m.Counter != nil:
			out[shard] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[shard] = m.Gauge.GetValue()
		case m.Histogram != nil:
			out[shard] = float64(m.Histogram.GetSampleCount())
		}
	}
	return out
}

// TestShardedMetricsProcesses runs four processes holding two shards
// (n1, n2, n3 shard 0; n1, n2, n4 shard 1) with metrics-addr: each
// process exports the Raft and keyspace series of every shard it holds
// with its shard label (term, indexes, keys equal to what DBSIZE counts on
// a process holding that shard alone), exactly the shard's leader reports
// itself leader of it, and reports a lag for each other member; a replica
// added (ADDREPLICA) gets its series and one removed (REMOVEREPLICA) loses
// them, without a restart. The metadata group's series
// (checkMetaSeriesProcs): n1-n3, shard 0's members, are its voters, with
// one leader among them, n4 has none of its Raft series, and every
// process shows the same map epoch, two more after the two changes. The
// dashboard's sharding panels name only series these processes export.
func TestShardedMetricsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	const smap = "0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n4"
	perNode := map[string][]string{}
	maddr := map[string]string{}
	for i := range 4 {
		id := fmt.Sprintf("n%d", i+1)
		maddr[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		perNode[id] = []string{"--metrics-addr", maddr[id], "--metrics-auth", metricsToken}
	}
	// The balancer off: the test compares leaders seen at different moments.
	nodes := startClusterWith(t, 4, perNode, "--cluster-enabled", "yes", "--shard-map", smap,
		"--cluster-leader-balance-interval", "0")
	byID := map[string]*clusterProc{}
	for _, cp := range nodes {
		byID[cp.id] = cp
	}

	ctx := context.Background()
	rdb := clusterClient(t, 5*time.Second, nodes...)
	testutil.WaitFor(t, 30*time.Second, "the cluster to take a write in each shard", func() bool {
		return rdb.SAdd(ctx, "probe{a}", "x").Err() == nil && rdb.SAdd(ctx, "probe{b}", "x").Err() == nil
	})
	keys := map[string]int{}
	for _, k := range []string{"probe{a}", "probe{b}"} {
		keys[shardOfSlot(slot.Of([]byte(k)))]++
	}
	for i := range 120 {
		k := fmt.Sprintf("k:%d", i)
		if err := rdb.SAdd(ctx, k, "m").Err(); err != nil {
			t.Fatalf("SADD %s: %v", k, err)
		}
		keys[shardOfSlot(slot.Of([]byte(k)))]++
	}
	if keys["0"] == 0 || keys["1"] == 0 {
		t.Fatalf("keys per shard %v: the test wants some in each", keys)
	}
	// DBSIZE on a process that holds one shard alone counts that shard.
	for id, shard := range map[string]string{"n3": "0", "n4": "1"} {
		want := fmt.Sprintf(":%d\r\n", keys[shard])
		testutil.WaitFor(t, 10*time.Second, "DBSIZE on "+id, func() bool { return do(t, dial(t, byID[id].addr), "DBSIZE") == want })
	}

	held := map[string][]string{"n1": {"0", "1"}, "n2": {"0", "1"}, "n3": {"0"}, "n4": {"1"}}
	checkShardSeries(t, nodes, maddr, held, keys)
	metaVoters := []string{"n1", "n2", "n3"}
	epoch := checkMetaSeriesProcs(t, nodes, maddr, metaVoters, 1)
	var fams []map[string]*dto.MetricFamily
	for _, cp := range nodes {
		fams = append(fams, scrape(t, maddr[cp.id]))
	}
	checkDashboard(t, true, fams...)

	// A replica added while the processes run gets its series; one removed
	// loses them.
	c1 := dial(t, byID["n1"].addr)
	for _, cmd := range [][]string{{"ADDREPLICA", "1", "n3"}, {"REMOVEREPLICA", "1", "n2"}} {
		var r string
		testutil.WaitFor(t, 30*time.Second, "RAFT.SHARD "+strings.Join(cmd, " "), func() bool {
			r = do(t, c1, append([]string{"RAFT.SHARD"}, cmd...)...)
			return !strings.HasPrefix(r, "-TRYAGAIN")
		})
		if r != "+OK\r\n" {
			t.Fatalf("RAFT.SHARD %s = %q", strings.Join(cmd, " "), r)
		}
	}
	held = map[string][]string{"n1": {"0", "1"}, "n2": {"0"}, "n3": {"0", "1"}, "n4": {"1"}}
	checkShardSeries(t, nodes, maddr, held, keys)
	checkMetaSeriesProcs(t, nodes, maddr, metaVoters, epoch+2)
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// shardOfSlot is the shard of a slot in TestShardedMetricsProcesses's map.
func shardOfSlot(s int) string {
	if s < 8192 {
		return "0"
	}
	return "1"
}

// checkShardSeries waits until every process exports the series of the
// shards held says and no other: term ≥ 1, applied ≤ commit, the shard's
// keys, one process leading each shard and reporting a lag for each other
// member, the others none.
func checkShardSeries(t *testing.T, nodes []*clusterProc, maddr map[string]string, held map[string][]string, keys map[string]int) {
	t.Helper()
	perShard := []string{"raftset_raft_term", "raftset_raft_commit_index", "raftset_raft_applied_index",
		"raftset_raft_last_log_index", "raftset_raft_is_leader", "raftset_raft_has_leader", "raftset_keys",
		"raftset_keys_with_expiry", "raftset_raft_leader_changes_total", "raftset_memory_dataset_bytes",
		"raftset_evicted_keys_total", "raftset_expired_keys_total", "raftset_raft_entries_proposed_total"}
	var why string
	ok := testutil.Within(30*time.Second, func() bool {
		leaders := map[string][]string{}
		for _, cp := range nodes {
			fams := scrape(t, maddr[cp.id])
			for _, fam := range perShard {
				var got []string
				for sh := range byShard(fams, fam) {
					got = append(got, sh)
				}
				slices.Sort(got)
				if !slices.Equal(got, held[cp.id]) {
					why = fmt.Sprintf("%s exports %s for shards %v, want %v", cp.id, fam, got, held[cp.id])
					return false
				}
			}
			for _, fam := range []string{"raftset_ready", "raftset_memory_heap_bytes", "raftset_connected_clients"} {
				if got := byShard(fams, fam); len(got) != 1 || !hasKey(got, "none") {
					why = fmt.Sprintf("%s: process-wide %s missing or labelled: %v", cp.id, fam, byShard(fams, fam))
					return false
				}
			}
			term, applied, commit := byShard(fams, "raftset_raft_term"), byShard(fams, "raftset_raft_applied_index"), byShard(fams, "raftset_raft_commit_index")
			nkeys, isLeader := byShard(fams, "raftset_keys"), byShard(fams, "raftset_raft_is_leader")
			for _, sh := range held[cp.id] {
				if term[sh] < 1 || applied[sh] < float64(keys[sh]) || applied[sh] > commit[sh] {
					why = fmt.Sprintf("%s shard %s: term %v, applied %v, commit %v (%d keys written)", cp.id, sh, term[sh], applied[sh], commit[sh], keys[sh])
					return false
				}
				if nkeys[sh] != float64(keys[sh]) {
					why = fmt.Sprintf("%s shard %s: raftset_keys %v, DBSIZE of the shard %d", cp.id, sh, nkeys[sh], keys[sh])
					return false
				}
				if isLeader[sh] == 1 {
					leaders[sh] = append(leaders[sh], cp.id)
				}
			}
			// The leader's lag series: one per other member of the shard.
			lag := byShard(fams, "raftset_raft_follower_lag_entries")
			for _, sh := range held[cp.id] {
				var peers []string
				for k := range lag {
					if p, ok := strings.CutPrefix(k, sh+"/"); ok {
						peers = append(peers, p)
					}
				}
				slices.Sort(peers)
				var want []string
				if isLeader[sh] == 1 {
					for id, hs := range held {
						if id != cp.id && slices.Contains(hs, sh) {
							want = append(want, id)
						}
					}
					slices.Sort(want)
				}
				if !slices.Equal(peers, want) {
					why = fmt.Sprintf("%s shard %s (leader %v): lag series for %v, want %v", cp.id, sh, isLeader[sh], peers, want)
					return false
				}
			}
		}
		for _, sh := range []string{"0", "1"} {
			if len(leaders[sh]) != 1 {
				why = fmt.Sprintf("processes reporting themselves leader of shard %s: %v", sh, leaders[sh])
				return false
			}
			// The one CLUSTER SLOTS names the shard's master.
			rep, ok := clusterSlots(nodes[0].addr)
			i, _ := strconv.Atoi(sh)
			if !ok || len(rep.Elems) != 2 || len(rep.Elems[i].Elems) < 3 {
				why = fmt.Sprintf("CLUSTER SLOTS = %+v", rep)
				return false
			}
			master := slotNodeAddr(rep.Elems[i].Elems[2])
			for _, cp := range nodes {
				if cp.id == leaders[sh][0] && cp.addr != master {
					why = fmt.Sprintf("shard %s: %s reports itself leader, CLUSTER SLOTS names %s", sh, cp.id, master)
					return false
				}
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the series of every shard held: %s", why)
	}
}
