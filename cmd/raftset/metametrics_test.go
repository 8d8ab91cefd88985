package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"raftset/internal/testutil"
)

// checkMetaSeriesProcs waits until the processes' metadata series agree:
// every process exports the same raftset_meta_map_epoch, at least
// minEpoch; those of voters raftset_meta_voter 1 and their replica's Raft
// series (a known leader, applied ≤ commit ≤ last log, one term), the
// others raftset_meta_voter 0 and no raftset_meta_raft_* series; exactly
// one voter reports itself the group's leader (raftset_meta_raft_is_leader
// and raftset_meta_raft_state{state="leader"}), with a lag series for each
// other voter. It returns the epoch.
func checkMetaSeriesProcs(t *testing.T, nodes []*clusterProc, maddr map[string]string, voters []string, minEpoch float64) float64 {
	t.Helper()
	var why string
	var epoch float64
	ok := testutil.Within(30*time.Second, func() bool {
		epoch = -1
		var leaders []string
		term := -1.0
		for _, cp := range nodes {
			fams := scrape(t, maddr[cp.id])
			e, ok := value(fams, "raftset_meta_map_epoch")
			if !ok || e < minEpoch || epoch >= 0 && e != epoch {
				why = fmt.Sprintf("%s: raftset_meta_map_epoch %v (present %v), another process %v, want ≥ %v and equal", cp.id, e, ok, epoch, minEpoch)
				return false
			}
			epoch = e
			voter := slices.Contains(voters, cp.id)
			if v, ok := value(fams, "raftset_meta_voter"); !ok || (v == 1) != voter {
				why = fmt.Sprintf("%s: raftset_meta_voter %v (present %v), a voter: %v", cp.id, v, ok, voter)
				return false
			}
			if !voter {
				for name := range fams {
					if strings.HasPrefix(name, "raftset_meta_raft_") {
						why = fmt.Sprintf("%s, outside the metadata group, exports %s", cp.id, name)
						return false
					}
				}
				continue
			}
			tm, _ := value(fams, "raftset_meta_raft_term")
			applied, _ := value(fams, "raftset_meta_raft_applied_index")
			commit, _ := value(fams, "raftset_meta_raft_commit_index")
			last, _ := value(fams, "raftset_meta_raft_last_log_index")
			hasLeader, _ := value(fams, "raftset_meta_raft_has_leader")
			if tm < 1 || applied < 1 || commit < applied || last < commit || hasLeader != 1 || term >= 0 && tm != term {
				why = fmt.Sprintf("%s: metadata term %v (another voter %v), applied %v, commit %v, last log %v, has leader %v",
					cp.id, tm, term, applied, commit, last, hasLeader)
				return false
			}
			term = tm
			isLeader, _ := value(fams, "raftset_meta_raft_is_leader")
			stateLeader, _ := value(fams, "raftset_meta_raft_state", "state", "leader")
			if isLeader != stateLeader {
				why = fmt.Sprintf("%s: raftset_meta_raft_is_leader %v, state leader %v", cp.id, isLeader, stateLeader)
				return false
			}
			peers := lagPeers(fams["raftset_meta_raft_follower_lag_entries"])
			var want []string
			if isLeader == 1 {
				leaders = append(leaders, cp.id)
				for _, v := range voters {
					if v != cp.id {
						want = append(want, v)
					}
				}
			}
			if !slices.Equal(peers, want) {
				why = fmt.Sprintf("%s (metadata leader %v): lag series for %v, want %v", cp.id, isLeader, peers, want)
				return false
			}
		}
		if len(leaders) != 1 {
			why = fmt.Sprintf("processes reporting themselves metadata leader: %v", leaders)
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("the metadata group's series: %s", why)
	}
	return epoch
}

// lagPeers are the peer labels of a lag family, sorted.
func lagPeers(f *dto.MetricFamily) []string {
	var out []string
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "peer" {
				out = append(out, l.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}
