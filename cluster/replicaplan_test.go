package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPlanReplicaMoves: cases, and random maps with a new node or two:
// after the plan no shard has two replicas on one node, each keeps its
// replica count, no move takes a donor's home shard (the map's, also when
// it is not the donor's lowest id), the counts end within
// 1 (CheckPlacement's rule), and a second plan is empty.
func TestPlanReplicaMoves(t *testing.T) {
	for _, tc := range []struct {
		smap  string
		nodes []string
		want  string
	}{
		// cluster create: 3 nodes x 2 shards x 3 replicas, then n4.
		{"0:0-8191:n1,n2,n3 1:8192-16383:n2,n3,n1", []string{"n4"}, "[{1 n1 n4}]"},
		{"0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3", nil, "[]"},
		// 3 shards on 3 nodes, two new nodes: 9 replicas over 5 nodes.
		{"0:0-5460:n1,n2,n3 1:5461-10922:n2,n3,n1 2:10923-16383:n3,n1,n2", []string{"n4", "n5"},
			"[{2 n1 n4} {2 n2 n5} {1 n3 n4}]"},
		// n4 as RAFT.SHARD ADDNODE records it, holding no replica.
		{"epoch 3\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n1\nnode n4 h:1 h:2\n", nil, "[{1 n1 n4}]"},
		// n4's home is shard 2, not its lowest id (a home line, as
		// ADDREPLICA writes it): shard 1 moves, not its home, which the
		// highest-id rule would have picked.
		{"epoch 5\nshard 0:0-5460:n1,n2,n4\nshard 1:5461-10922:n2,n3,n4\nshard 2:10923-16383:n1,n3,n4\nhome n4 2\n", []string{"n5"}, "[{1 n4 n5}]"},
		// Only a home shard on the fullest node: nothing can move.
		{"0:0-16383:n1", []string{"n2"}, "[]"},
	} {
		m, err := DecodeShardMap(tc.smap)
		if err != nil {
			m, err = ParseShardMap(tc.smap)
		}
		if err != nil {
			t.Fatal(err)
		}
		plan := PlanReplicaMoves(m, tc.nodes)
		if got := fmt.Sprint(plan); got != tc.want {
			t.Errorf("PlanReplicaMoves(%q, %v) = %s, want %s", tc.smap, tc.nodes, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		n := 3 + rng.IntN(6)
		s := 1 + rng.IntN(8)
		r := 1 + rng.IntN(3)
		m := mustPlace(t, n, s, r)
		extra := []string{fmt.Sprintf("n%d", n+1)}
		if i%2 == 0 {
			extra = append(extra, fmt.Sprintf("n%d", n+2))
		}
		after := m.clone()
		plan := PlanReplicaMoves(m, extra)
		for _, p := range plan {
			for k := range after.Shards {
				sh := &after.Shards[k]
				if sh.ID != p.Shard {
					continue
				}
				if !slices.Contains(sh.Members, p.From) || slices.Contains(sh.Members, p.To) {
					t.Fatalf("case %d: move %+v on members %v", i, p, sh.Members)
				}
				if hosts := after.Hosts(p.From); hosts[0] == p.Shard {
					t.Fatalf("case %d: move %+v takes the donor's home shard", i, p)
				}
				sh.Members = append(slices.DeleteFunc(sh.Members, func(x string) bool { return x == p.From }), p.To)
			}
		}
		// The new nodes count even when the plan gave them nothing.
		counts := map[string]int{}
		for _, e := range extra {
			counts[e] = 0
		}
		for _, sh := range after.Shards {
			for _, mem := range sh.Members {
				counts[mem]++
			}
		}
		lo, hi := s*r, 0
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		// Allowed to stop early only when every donor's spare replicas
		// are of shards every receiver holds, which Place's layouts with
		// a fresh node never produce.
		if hi-lo > 1 {
			t.Errorf("case %d (%d nodes, %d shards, %d replicas, +%v): counts %v after %v", i, n, s, r, extra, counts, plan)
		}
		for _, v := range CheckPlacement(after, r) {
			// Preferred leaders and slots are not what this plan moves.
			if !strings.HasPrefix(v, "preferred leaders") && !strings.HasPrefix(v, "slots per shard") {
				t.Errorf("case %d: %s", i, v)
			}
		}
		if again := PlanReplicaMoves(after, extra); len(again) != 0 {
			t.Errorf("case %d: a second plan %v", i, again)
		}
	}
}

// TestReplicaCounts: members counted once per shard, a recorded node with
// no replica as 0, the plans' starting counts.
func TestReplicaCounts(t *testing.T) {
	m, err := DecodeShardMap("epoch 3\nshard 0:0-8191:n1,n2,n3\nshard 1:8192-16383:n2,n3,n5\nnode n4 h:1 h:2\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(m.ReplicaCounts()), "map[n1:1 n2:2 n3:2 n4:0 n5:1]"; got != want {
		t.Errorf("ReplicaCounts() = %s, want %s", got, want)
	}
}

// mustPlace is Place's map of s shards of r replicas over nodes n1 to n<n>.
func mustPlace(t *testing.T, n, s, r int) *ShardMap {
	t.Helper()
	var nodes []PlaceNode
	for j := range n {
		nodes = append(nodes, PlaceNode{ID: fmt.Sprintf("n%d", j+1)})
	}
	m, err := Place(nodes, s, r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
