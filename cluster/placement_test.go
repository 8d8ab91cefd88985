package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"raftset/internal/slot"
)

func placeNodes(n int) []PlaceNode {
	out := make([]PlaceNode, n)
	for i := range out {
		out[i] = PlaceNode{ID: fmt.Sprintf("n%d", i+1)}
	}
	return out
}

// TestPlaceLayouts pins the maps Place draws for the layouts the docs and
// tests use: the compose file's 6 × 2, the 3 × 3 of the sharded tests
// (Redis's slot split, one leader per node), and a lopsided one.
func TestPlaceLayouts(t *testing.T) {
	for _, tc := range []struct {
		nodes, shards, replicas int
		want                    string
	}{
		{6, 2, 3, "0:0-8191:n1,n2,n3 1:8192-16383:n4,n5,n6"},
		{3, 3, 3, "0:0-5460:n1,n2,n3 1:5461-10922:n2,n1,n3 2:10923-16383:n3,n1,n2"},
		{3, 1, 3, "0:0-16383:n1,n2,n3"},
		{1, 2, 1, "0:0-8191:n1 1:8192-16383:n1"},
		{4, 4, 3, "0:0-4095:n1,n2,n3 1:4096-8191:n4,n1,n2 2:8192-12287:n3,n4,n1 3:12288-16383:n2,n3,n4"},
		{5, 3, 3, "0:0-5460:n1,n2,n3 1:5461-10922:n4,n5,n1 2:10923-16383:n2,n3,n4"},
	} {
		m, err := Place(placeNodes(tc.nodes), tc.shards, tc.replicas)
		if err != nil {
			t.Fatalf("Place(%d nodes, %d, %d): %v", tc.nodes, tc.shards, tc.replicas, err)
		}
		if got := m.Directive(); got != tc.want {
			t.Errorf("Place(%d nodes, %d, %d) = %q, want %q", tc.nodes, tc.shards, tc.replicas, got, tc.want)
		}
		if v := CheckPlacement(m, tc.replicas); len(v) > 0 {
			t.Errorf("Place(%d nodes, %d, %d): violations %q", tc.nodes, tc.shards, tc.replicas, v)
		}
	}
}

func TestPlaceRefuses(t *testing.T) {
	for _, tc := range []struct {
		nodes            []PlaceNode
		shards, replicas int
		want             string
	}{
		{nil, 1, 1, "no nodes"},
		{placeNodes(3), 0, 3, "0 shards"},
		{placeNodes(3), 16385, 1, "at most 16384"},
		{placeNodes(3), 2, 0, "replication factor 0"},
		{placeNodes(2), 2, 3, "replication factor 3 with 2 nodes"},
		{[]PlaceNode{{ID: "a"}, {ID: "a"}}, 1, 1, "node a listed twice"},
		{[]PlaceNode{{ID: "a,b"}}, 1, 1, `bad node id "a,b"`},
		{[]PlaceNode{{ID: "a", Addr: "nohost"}}, 1, 1, `client address "nohost"`},
	} {
		_, err := Place(tc.nodes, tc.shards, tc.replicas)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Place(%v, %d, %d) = %v, want an error with %q", tc.nodes, tc.shards, tc.replicas, err, tc.want)
		}
	}
}

// TestPlaceProperties: for every small layout, the map parses back to
// itself, every slot is in exactly one contiguous range, and the
// placement rules hold (CheckPlacement, which the violations test below
// shows can fail).
func TestPlaceProperties(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for s := 1; s <= 12; s++ {
			for r := 1; r <= min(n, 5); r++ {
				m, err := Place(placeNodes(n), s, r)
				if err != nil {
					t.Fatalf("Place(%d, %d, %d): %v", n, s, r, err)
				}
				back, err := ParseShardMap(m.Directive())
				if err != nil || back.Directive() != m.Directive() {
					t.Fatalf("Place(%d, %d, %d): %q does not parse back: %v", n, s, r, m.Directive(), err)
				}
				next := 0
				for _, sh := range m.Shards {
					if len(sh.Ranges) != 1 || sh.Ranges[0][0] != next {
						t.Fatalf("Place(%d, %d, %d): shard %d ranges %v", n, s, r, sh.ID, sh.Ranges)
					}
					next = sh.Ranges[0][1] + 1
					for x := sh.Ranges[0][0]; x <= sh.Ranges[0][1]; x++ {
						if m.ShardOf(x) != sh.ID || back.ShardOf(x) != sh.ID {
							t.Fatalf("Place(%d, %d, %d): slot %d owned by %d", n, s, r, x, m.ShardOf(x))
						}
					}
				}
				if next != slot.Count {
					t.Fatalf("Place(%d, %d, %d): slots end at %d", n, s, r, next)
				}
				if v := CheckPlacement(m, r); len(v) > 0 {
					t.Errorf("Place(%d, %d, %d) = %q: %q", n, s, r, m.Directive(), v)
				}
			}
		}
	}
}

func TestCheckPlacementViolations(t *testing.T) {
	for _, tc := range []struct {
		smap     string
		replicas int
		want     []string
	}{
		{"0:0-8191:n1,n2,n3 1:8192-16383:n4,n5,n6", 3, nil},
		{"0:0-12287:n1,n2,n3 1:12288-16383:n1,n2,n3", 3, []string{
			"preferred leaders (first members) per node differ by more than 1: node n1 has 2, node n2 has 0",
			"slots per shard differ by more than 1: shard 0 has 12288, shard 1 has 4096"}},
		{"0:0-8191:n1,n2 1:8192-16383:n2,n3,n4", 3, []string{"shard 0 has 2 replicas, want 3"}},
		{"0:0-5460:n1,n2 1:5461-10922:n1,n3 2:10923-16383:n1,n4", 0, []string{
			"replicas per node differ by more than 1: node n1 has 3, node n2 has 1",
			"preferred leaders (first members) per node differ by more than 1: node n1 has 3, node n2 has 0"}},
	} {
		m, err := ParseShardMap(tc.smap)
		if err != nil {
			t.Fatal(err)
		}
		if got := CheckPlacement(m, tc.replicas); !slices.Equal(got, tc.want) {
			t.Errorf("CheckPlacement(%q) = %q, want %q", tc.smap, got, tc.want)
		}
	}
}

// TestAssignLeaders: each node leads a fair share, the preferred leader
// (first member) where that is fair, else the current leader, and the
// result is always a member.
func TestAssignLeaders(t *testing.T) {
	three := []Shard{{ID: 0, Members: []string{"n1", "n2", "n3"}}, {ID: 1, Members: []string{"n1", "n2", "n3"}},
		{ID: 2, Members: []string{"n1", "n2", "n3"}}}
	for _, tc := range []struct {
		name    string
		shards  []Shard
		current map[uint32]string
		want    map[uint32]string
	}{
		{"all on n1, same preference", three, map[uint32]string{0: "n1", 1: "n1", 2: "n1"},
			map[uint32]string{0: "n1", 1: "n2", 2: "n3"}},
		{"current breaks the tie", three, map[uint32]string{0: "n1", 1: "n3", 2: "n3"},
			map[uint32]string{0: "n1", 1: "n3", 2: "n2"}},
		{"preferred leaders win", []Shard{{ID: 0, Members: []string{"n1", "n2", "n3"}}, {ID: 1, Members: []string{"n2", "n3", "n1"}},
			{ID: 2, Members: []string{"n3", "n1", "n2"}}}, map[uint32]string{0: "n1", 1: "n1", 2: "n1"},
			map[uint32]string{0: "n1", 1: "n2", 2: "n3"}},
		{"an augmenting path moves a placed shard", []Shard{{ID: 0, Members: []string{"a", "b"}}, {ID: 1, Members: []string{"a"}}},
			nil, map[uint32]string{0: "b", 1: "a"}},
		{"lopsided membership: least loaded", []Shard{{ID: 0, Members: []string{"a"}}, {ID: 1, Members: []string{"a"}},
			{ID: 2, Members: []string{"a", "b"}}, {ID: 3, Members: []string{"b", "a"}}}, nil,
			map[uint32]string{0: "a", 1: "a", 2: "b", 3: "b"}},
	} {
		got := AssignLeaders(tc.shards, tc.current)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: AssignLeaders = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Random memberships of Place's kind stay within floor and ceiling
	// whatever the current leaders.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n, s := 1+rng.IntN(8), 1+rng.IntN(20)
		m, err := Place(placeNodes(n), s, 1+rng.IntN(n))
		if err != nil {
			t.Fatal(err)
		}
		cur := map[uint32]string{}
		for _, sh := range m.Shards {
			cur[sh.ID] = sh.Members[rng.IntN(len(sh.Members))]
		}
		got := AssignLeaders(m.Shards, cur)
		count := map[string]int{}
		for _, sh := range m.Shards {
			if !slices.Contains(sh.Members, got[sh.ID]) {
				t.Fatalf("%s: shard %d led by %q, not a member", m.Directive(), sh.ID, got[sh.ID])
			}
			count[got[sh.ID]]++
		}
		for i := range n {
			if c := count[fmt.Sprintf("n%d", i+1)]; c < s/n || c > (s+n-1)/n {
				t.Fatalf("%s with %v: n%d leads %d of %d shards (%v)", m.Directive(), cur, i+1, c, s, got)
			}
		}
	}
}

// TestPlanSlotMoves: applying the plan move by move (each range lying in
// its From shard when it runs, as MOVESLOTS requires) evens the slot
// counts, and an even map plans nothing.
func TestPlanSlotMoves(t *testing.T) {
	apply := func(t *testing.T, m *ShardMap, plan []SlotMovePlan) *ShardMap {
		t.Helper()
		for _, p := range plan {
			for s := p.First; s <= p.Last; s++ {
				if m.ShardOf(s) != p.From {
					t.Fatalf("%q: move %+v: slot %d is in shard %d", m.Directive(), p, s, m.ShardOf(s))
				}
			}
			if p.From == p.To || p.First > p.Last {
				t.Fatalf("move %+v", p)
			}
			m = m.withOwner(p.First, p.Last, p.To)
		}
		return m
	}
	for _, tc := range []struct {
		smap string
		want string
	}{
		{"0:0-12287:n1 1:12288-16383:n1", "[{8192 12287 0 1}]"},
		{"0:0-8191:n1 1:8192-16383:n1", "[]"},
		{"0:0-8191:n1 1:8192-16383:n1 2::n1", "[{5462 8191 0 2} {13653 16383 1 2}]"}, // a shard just added
		{"0:0-16380:n1 1:16381-16382:n1 2:16383:n1", "[{10922 16380 0 1} {5462 10921 0 2}]"},
		{"0:0-99+16000-16383:n1 1:100-15999:n1", "[{8292 15999 1 0}]"},
	} {
		m, err := ParseShardMap(tc.smap)
		if err != nil {
			t.Fatal(err)
		}
		plan := PlanSlotMoves(m)
		if got := fmt.Sprint(plan); got != tc.want {
			t.Errorf("PlanSlotMoves(%q) = %s, want %s", tc.smap, got, tc.want)
		}
		if v := CheckPlacement(apply(t, m, plan), 0); slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, "slots") }) {
			t.Errorf("PlanSlotMoves(%q) leaves %q", tc.smap, v)
		}
	}
	// Random maps: any ownership of the slots by 1-6 shards.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		n := 1 + rng.IntN(6)
		var parts []string
		cuts := []int{0}
		for range n - 1 {
			cuts = append(cuts, 1+rng.IntN(slot.Count-1))
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		cuts = append(cuts, slot.Count)
		// Ranges dealt to random shards; every shard gets at least one
		// range when there are enough.
		byShard := map[int][]string{}
		for i := 0; i+1 < len(cuts); i++ {
			id := i
			if i >= n {
				id = rng.IntN(n)
			}
			byShard[id%n] = append(byShard[id%n], fmt.Sprintf("%d-%d", cuts[i], cuts[i+1]-1))
		}
		for id := range n {
			if len(byShard[id]) > 0 {
				parts = append(parts, fmt.Sprintf("%d:%s:n1", id, strings.Join(byShard[id], "+")))
			}
		}
		m, err := ParseShardMap(strings.Join(parts, " "))
		if err != nil {
			t.Fatalf("%q: %v", parts, err)
		}
		plan := PlanSlotMoves(m)
		after := apply(t, m, plan)
		if v := CheckPlacement(after, 0); slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, "slots") }) {
			t.Fatalf("PlanSlotMoves(%q) = %v leaves %q", m.Directive(), plan, v)
		}
		if len(PlanSlotMoves(after)) != 0 {
			t.Fatalf("PlanSlotMoves(%q) after its own plan: %v", after.Directive(), PlanSlotMoves(after))
		}
	}
}
