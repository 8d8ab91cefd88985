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
)

// leadersFromLog returns the terms a node's log says it became leader in.
func leadersFromLog(log string) []uint64 {
	var terms []uint64
	var term uint64
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, startMarker) {
			term = 0
		} else if m := candidateLine.FindStringSubmatch(line); m != nil {
			term, _ = strconv.ParseUint(m[1], 10, 64)
		} else if leaderLine.MatchString(line) && term != 0 {
			terms = append(terms, term)
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
		out.LeadersByTerm[strconv.FormatUint(t, 10)] = strings.Join(ids, ",")
		if len(ids) > 1 {
			out.Conflicts = append(out.Conflicts, fmt.Sprintf("term %d led by %v", t, ids))
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
	ok := judgeTerms(map[uint64]map[string]bool{2: {"n1": true}, 3: {"n2": true}}, 10)
	bad := judgeTerms(map[uint64]map[string]bool{2: {"n1": true}, 3: {"n2": true, "n3": true}}, 10)
	if len(ok.Conflicts) != 0 || len(bad.Conflicts) != 1 || ok.Terms != 2 {
		t.Errorf("judgeTerms: ok %+v, bad %+v", ok, bad)
	}
}
