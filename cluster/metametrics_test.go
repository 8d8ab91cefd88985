package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"raftset/internal/metrics"
	"raftset/internal/stats"
	"raftset/internal/testutil"
)

// noFrontend is a front end with no clients, for scraping a Host alone.
type noFrontend struct{}

func (noFrontend) CommandStats(func(stats.Command)) {}
func (noFrontend) ErrorStats(func(string, uint64))  {}
func (noFrontend) ClientStats() stats.Clients       { return stats.Clients{} }

// scrapeMetaSeries gathers m's raftset_meta_* series as
// "name{label=value,...}" → value.
func scrapeMetaSeries(m *metrics.Metrics) (map[string]float64, error) {
	fams, err := m.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "raftset_meta_") {
			continue
		}
		for _, mt := range f.Metric {
			var ls []string
			for _, l := range mt.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(ls)
			v := mt.GetGauge().GetValue()
			if mt.Counter != nil {
				v = mt.Counter.GetValue()
			}
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out, nil
}

// metaView is what one round of scrapes showed of the metadata group.
type metaView struct {
	leader        *Host
	epoch         float64
	applied       map[string]float64 // by voter
	leaderChanges map[string]float64 // by voter
}

// checkMetaSeries scrapes every host until the metadata series agree with
// the group's own state (read right after each scrape, so a round that
// raced an entry is simply repeated): on each voter raftset_meta_voter 1
// and the term, applied and last log indexes its replica has, commit
// between applied and the last log, the Raft state it is in, a leader
// known; terms equal on every voter, exactly one leader, which reports a
// lag series for each other voter; on the process outside the group
// raftset_meta_voter 0 and no raftset_meta_raft_* series; the map's epoch
// that of the host's map, and equal on every process. ok, when set, must
// also hold of the round.
func checkMetaSeries(t *testing.T, hosts []*Host, regs []*metrics.Metrics, ok func(v metaView) string) metaView {
	t.Helper()
	var why string
	var v metaView
	good := testutil.Within(30*time.Second, func() bool {
		v = metaView{epoch: -1, applied: map[string]float64{}, leaderChanges: map[string]float64{}}
		var voters, leaders []string
		term := -1.0
		for i, h := range hosts {
			got, err := scrapeMetaSeries(regs[i])
			if err != nil {
				why = err.Error()
				return false
			}
			epoch := got["raftset_meta_map_epoch{}"]
			if _, ok := got["raftset_meta_map_epoch{}"]; !ok || epoch != float64(h.Map().Epoch) || epoch < 1 {
				why = fmt.Sprintf("%s: raftset_meta_map_epoch %v (present %v), its map's epoch %d", h.self, epoch, ok, h.Map().Epoch)
				return false
			}
			if v.epoch >= 0 && epoch != v.epoch {
				why = fmt.Sprintf("%s: raftset_meta_map_epoch %v, another process %v", h.self, epoch, v.epoch)
				return false
			}
			v.epoch = epoch
			if h.MetaNode() == nil {
				for k := range got {
					if strings.HasPrefix(k, "raftset_meta_raft_") {
						why = fmt.Sprintf("%s, outside the metadata group, exports %s", h.self, k)
						return false
					}
				}
				if val, ok := got["raftset_meta_voter{}"]; !ok || val != 0 {
					why = fmt.Sprintf("%s, outside the metadata group: raftset_meta_voter %v (present %v)", h.self, val, ok)
					return false
				}
				continue
			}
			voters = append(voters, h.self)
			isLeader := h.MetaNode().IsLeader()
			state := "follower"
			if isLeader {
				state = "leader"
			}
			want := map[string]float64{
				"raftset_meta_voter{}":                         1,
				"raftset_meta_raft_term{}":                     float64(h.MetaNode().raft.CurrentTerm()),
				"raftset_meta_raft_applied_index{}":            float64(h.MetaNode().AppliedIndex()),
				"raftset_meta_raft_last_log_index{}":           float64(h.MetaNode().raft.LastIndex()),
				"raftset_meta_raft_is_leader{}":                b2f(isLeader),
				"raftset_meta_raft_state{state=" + state + "}": 1,
				"raftset_meta_raft_has_leader{}":               1,
			}
			for k, w := range want {
				if g, ok := got[k]; !ok || g != w {
					why = fmt.Sprintf("%s: %s = %v (present %v), its replica has %v", h.self, k, g, ok, w)
					return false
				}
			}
			applied, commit, last := got["raftset_meta_raft_applied_index{}"], got["raftset_meta_raft_commit_index{}"], got["raftset_meta_raft_last_log_index{}"]
			if applied < 1 || commit < applied || commit > last {
				why = fmt.Sprintf("%s: applied %v, commit %v, last log %v", h.self, applied, commit, last)
				return false
			}
			if t := got["raftset_meta_raft_term{}"]; term >= 0 && t != term {
				why = fmt.Sprintf("%s: term %v, another voter %v", h.self, t, term)
				return false
			}
			term = got["raftset_meta_raft_term{}"]
			v.applied[h.self] = applied
			v.leaderChanges[h.self] = got["raftset_meta_raft_leader_changes_total{}"]
			if isLeader {
				leaders = append(leaders, h.self)
				v.leader = h
				var peers []string
				for k := range got {
					if p, ok := strings.CutPrefix(k, "raftset_meta_raft_follower_lag_entries{peer="); ok {
						peers = append(peers, strings.TrimSuffix(p, "}"))
					}
				}
				slices.Sort(peers)
				var others []string
				for _, o := range hosts {
					if o.MetaNode() != nil && o != h {
						others = append(others, o.self)
					}
				}
				if !slices.Equal(peers, others) {
					why = fmt.Sprintf("%s, the metadata leader: lag series for %v, want %v", h.self, peers, others)
					return false
				}
			} else if k := lagSeriesOf(got); k != "" {
				why = fmt.Sprintf("%s, a metadata follower, exports %s", h.self, k)
				return false
			}
		}
		if len(leaders) != 1 || len(voters) != 3 {
			why = fmt.Sprintf("metadata leaders %v among voters %v, want one of three", leaders, voters)
			return false
		}
		if ok != nil {
			if why = ok(v); why != "" {
				return false
			}
		}
		return true
	})
	if !good {
		t.Fatalf("the metadata group's series: %s", why)
	}
	return v
}

func lagSeriesOf(got map[string]float64) string {
	for k := range got {
		if strings.HasPrefix(k, "raftset_meta_raft_follower_") {
			return k
		}
	}
	return ""
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestHostMetaMetrics scrapes the metadata group's series from four
// processes, n1-n3 the group's voters (shard 0's members) and n4 outside
// it, and checks them against the group's own state (checkMetaSeries):
// at start; after a map change sent to n4 (ADDREPLICA, relayed to the
// metadata leader), when every process shows the next epoch and the
// voters the entry that wrote it; and after the metadata leadership moved,
// when exactly the new leader says so and every voter counted the change.
func TestHostMetaMetrics(t *testing.T) {
	hosts := servedHosts(t, "0:0-8191:n1,n2,n3 1:8192-16383:n1,n3,n4", 4)
	if hosts[3].MetaNode() != nil {
		t.Fatal("n4 runs a metadata voter")
	}
	regs := make([]*metrics.Metrics, len(hosts))
	for i, h := range hosts {
		regs[i] = metrics.New()
		if err := regs[i].Register(noFrontend{}, h); err != nil {
			t.Fatal(err)
		}
	}
	before := checkMetaSeries(t, hosts, regs, nil)

	if r := adminRetry(t, hosts[3], "raft.shard", "addreplica", "1", "n2"); r != "+OK\r\n" {
		t.Fatalf("RAFT.SHARD ADDREPLICA 1 n2 = %q", r)
	}
	changed := checkMetaSeries(t, hosts, regs, func(v metaView) string {
		if v.epoch != before.epoch+1 {
			return fmt.Sprintf("epoch %v after ADDREPLICA, want %v", v.epoch, before.epoch+1)
		}
		for id, a := range v.applied {
			if a <= before.applied[id] {
				return fmt.Sprintf("%s: metadata applied index %v, %v before the change", id, a, before.applied[id])
			}
		}
		return ""
	})

	old := changed.leader
	testutil.WaitFor(t, 30*time.Second, "another metadata leader", func() bool {
		if old.MetaNode().IsLeader() {
			// Retried: a transfer can time out on a loaded machine.
			if err := old.MetaNode().raft.LeadershipTransfer().Error(); err != nil {
				t.Logf("metadata leadership transfer from %s: %v", old.self, err)
			}
			return false
		}
		_, id := old.MetaNode().Leader()
		return id != "" && id != old.self
	})
	checkMetaSeries(t, hosts, regs, func(v metaView) string {
		if v.leader == old {
			return "the series still show " + old.self + " leading"
		}
		for id, n := range v.leaderChanges {
			if n <= changed.leaderChanges[id] {
				return fmt.Sprintf("%s: raftset_meta_raft_leader_changes_total %v, %v before the transfer", id, n, changed.leaderChanges[id])
			}
		}
		if v.epoch != changed.epoch {
			return fmt.Sprintf("epoch %v after a leader change, want %v: leadership is not in the map", v.epoch, changed.epoch)
		}
		return ""
	})
}
