//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// leaderWatch records which nodes said they led which term, from two
// sources: RAFT.INFO polled on every node during the run, and the nodes'
// logs (hashicorp/raft logs "entering candidate state ... term=N" before
// "entering leader state", so a leadership too short for the poll is still
// seen). Two nodes leading one term is split brain.
type leaderWatch struct {
	mu     sync.Mutex
	polled map[uint64]map[string]bool
	polls  int
}

// watchLeaders polls RAFT.INFO on every running, unpaused node every
// interval until ctx is done; the returned function waits for the pollers.
func watchLeaders(ctx context.Context, cl Cluster, interval time.Duration) (*leaderWatch, func()) {
	w := &leaderWatch{polled: map[uint64]map[string]bool{}}
	var wg sync.WaitGroup
	for _, id := range cl.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if !cl.Running(id) || cl.Paused(id) {
					continue
				}
				if c == nil {
					var err error
					if c, err = dialConn(cl.Addr(id), 300*time.Millisecond); err != nil {
						c = nil
						continue
					}
				}
				info, err := doRaftInfo(c)
				if err != nil {
					c.Close()
					c = nil
					continue
				}
				w.mu.Lock()
				w.polls++
				if info.role == "leader" {
					if w.polled[info.term] == nil {
						w.polled[info.term] = map[string]bool{}
					}
					w.polled[info.term][id] = true
				}
				w.mu.Unlock()
			}
		}()
	}
	return w, wg.Wait
}

var (
	candidateLine = regexp.MustCompile(`entering candidate state.*term=(\d+)`)
	leaderLine    = regexp.MustCompile(`entering leader state`)
	shardField    = regexp.MustCompile(`\bshard=(\d+)`)
	metaField     = regexp.MustCompile(`\bgroup=meta\b`)
)

// metaShard stands for the metadata group (its lines carry group=meta) in
// shardTerm: it elects apart from every shard.
const metaShard = 1<<16 - 1

// shardTerm names term t of shard s (s > 0) in the one map of terms: the
// Raft groups of a sharded cluster elect independently, so their terms
// must never meet in one entry. Shard 0's terms (and an unsharded
// cluster's) stay plain: they are what RAFT.INFO, which answers for the
// home shard 0, reports to the poll.
func shardTerm(s, t uint64) uint64 { return s<<48 | t }

func termName(t uint64) string {
	switch s := t >> 48; s {
	case 0:
	case metaShard:
		return fmt.Sprintf("metadata group term %d", t&(1<<48-1))
	default:
		return fmt.Sprintf("shard %d term %d", s, t&(1<<48-1))
	}
	return strconv.FormatUint(t, 10)
}

// leadersFromLog returns the terms a node's log says it became leader in.
// A sharded node's log interleaves its groups' elections, each line
// carrying shard=N: a candidate term is remembered per shard.
func leadersFromLog(log string) []uint64 {
	var terms []uint64
	term := map[uint64]uint64{}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, startMarker) {
			clear(term)
			continue
		}
		var shard uint64
		if m := shardField.FindStringSubmatch(line); m != nil {
			shard, _ = strconv.ParseUint(m[1], 10, 64)
		} else if metaField.MatchString(line) {
			shard = metaShard
		}
		if m := candidateLine.FindStringSubmatch(line); m != nil {
			term[shard], _ = strconv.ParseUint(m[1], 10, 64)
		} else if leaderLine.MatchString(line) && term[shard] != 0 {
			terms = append(terms, shardTerm(shard, term[shard]))
		}
	}
	return terms
}

// leaderTerms is the one-leader-per-term verdict.
type leaderTerms struct {
	Polls         int               `json:"polls"`
	Terms         int               `json:"terms_with_a_leader"`
	LeadersByTerm map[string]string `json:"leaders,omitempty"` // term → node(s)
	Conflicts     []string          `json:"conflicts,omitempty"`
}

// check merges the polled observations with the logs of cl's nodes.
func (w *leaderWatch) check(cl Cluster) leaderTerms {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := map[uint64]map[string]bool{}
	add := func(term uint64, id string) {
		if all[term] == nil {
			all[term] = map[string]bool{}
		}
		all[term][id] = true
	}
	for term, ids := range w.polled {
		for id := range ids {
			add(term, id)
		}
	}
	for _, id := range cl.Nodes() {
		if l, err := cl.Log(id); err == nil {
			for _, term := range leadersFromLog(l) {
				add(term, id)
			}
		}
	}
	return judgeTerms(all, w.polls)
}

func judgeTerms(all map[uint64]map[string]bool, polls int) leaderTerms {
	out := leaderTerms{Polls: polls, Terms: len(all), LeadersByTerm: map[string]string{}}
	terms := make([]uint64, 0, len(all))
	for t := range all {
		terms = append(terms, t)
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
	for _, t := range terms {
		var ids []string
		for id := range all[t] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		out.LeadersByTerm[termName(t)] = strings.Join(ids, ",")
		if len(ids) > 1 {
			out.Conflicts = append(out.Conflicts, fmt.Sprintf("term %s led by %v", termName(t), ids))
		}
	}
	return out
}

// TestLeaderTermsChecker: the per-term check flags two leaders of a term,
// and the log parser finds leaderships.
func TestLeaderTermsChecker(t *testing.T) {
	log := strings.Join([]string{
		startMarker + "1 of n1",
		`2026-11-30T12:00:00.000Z [INFO]  raft: entering candidate state: node="Node at 10.0.0.11:16379 [Candidate]" term=2`,
		`2026-11-30T12:00:00.100Z [INFO]  raft: entering leader state: leader="Node at 10.0.0.11:16379 [Leader]"`,
		`2026-11-30T12:00:05.000Z [INFO]  raft: entering candidate state: node="Node at 10.0.0.11:16379 [Candidate]" term=5`,
		`2026-11-30T12:00:05.000Z [INFO]  raft: entering follower state: follower="Node at 10.0.0.11:16379 [Follower]"`,
		startMarker + "2 of n1",
		`2026-11-30T12:00:09.100Z [INFO]  raft: entering leader state: leader="Node at 10.0.0.11:16379 [Leader]"`,
	}, "\n")
	if got := fmt.Sprint(leadersFromLog(log)); got != "[2]" {
		t.Errorf("leaders from log: %s, want [2]", got)
	}
	// A sharded node: shard 1's candidacy in term 4 comes between shard
	// 0's candidacy in term 3 and shard 0's win, which is term 3's.
	sharded := strings.Join([]string{
		startMarker + "1 of n1",
		`2026-12-02T00:03:31.700Z [INFO]  raftset.raft: entering candidate state: shard=0 node="Node at 127.0.0.1:1 [Candidate]" term=3`,
		`2026-12-02T00:03:31.750Z [INFO]  raftset.raft: entering candidate state: shard=1 node="Node at 127.0.0.1:1 [Candidate]" term=4`,
		`2026-12-02T00:03:31.801Z [INFO]  raftset.raft: entering leader state: shard=0 leader="Node at 127.0.0.1:1 [Leader]"`,
		`2026-12-02T00:03:31.901Z [INFO]  raftset.raft: entering leader state: shard=1 leader="Node at 127.0.0.1:1 [Leader]"`,
		`2026-12-02T00:03:32.000Z [INFO]  raftset.raft: entering candidate state: group=meta node="Node at 127.0.0.1:1 [Candidate]" term=3`,
		`2026-12-02T00:03:32.100Z [INFO]  raftset.raft: entering leader state: group=meta leader="Node at 127.0.0.1:1 [Leader]"`,
	}, "\n")
	got := leadersFromLog(sharded)
	if len(got) != 3 || got[0] != 3 || termName(got[1]) != "shard 1 term 4" || termName(got[2]) != "metadata group term 3" {
		t.Errorf("leaders from a sharded log: %v, want [3, shard 1 term 4, metadata group term 3]", got)
	}
	ok := judgeTerms(map[uint64]map[string]bool{2: {"n1": true}, 3: {"n2": true}}, 10)
	bad := judgeTerms(map[uint64]map[string]bool{2: {"n1": true}, 3: {"n2": true, "n3": true}}, 10)
	if len(ok.Conflicts) != 0 || len(bad.Conflicts) != 1 || ok.Terms != 2 {
		t.Errorf("judgeTerms: ok %+v, bad %+v", ok, bad)
	}
}
