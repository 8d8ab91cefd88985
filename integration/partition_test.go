//go:build jepsen

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// partition is a network fault in Jepsen's "grudge" form. Drop[a] lists
// the peers whose packets node a drops (a clean cut lists both directions).
// Refuse[a] lists the peers whose new connections a refuses: a keeps
// calling them and gets replies, they cannot call a. That is the useful
// asymmetric fault for Raft over TCP: a packet-level one-way drop would also
// kill a's own connections (their ACKs never arrive), while refusing
// connections makes exactly one side's RPCs fail.
type partition struct {
	Kind   string              `json:"kind"`
	Drop   map[string][]string `json:"drop,omitempty"`
	Refuse map[string][]string `json:"refuse,omitempty"`
}

// String is the compact form recorded in the history: "a!b,c" (a drops b
// and c), "a<-x b" (a refuses connections from b).
func (p partition) String() string {
	var parts []string
	for _, m := range []struct {
		sep string
		g   map[string][]string
	}{{"!", p.Drop}, {"<-x", p.Refuse}} {
		for _, a := range sortedKeys(m.g) {
			parts = append(parts, a+m.sep+strings.Join(m.g[a], ","))
		}
	}
	return p.Kind + " " + strings.Join(parts, " ")
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The partition families the nemesis draws from.
const (
	netMajority = "majority" // a random minority cut off from the majority
	netLeader   = "leader"   // the leader cut off from every peer; clients still reach it
	netRing     = "ring"     // each node hears only its two neighbours (3 nodes: a bridge)
	netOneWay   = "oneway"   // the leader cannot call its peers, or they cannot call it
)

// cutGroups drops every packet between nodes of different groups.
func cutGroups(kind string, groups ...[]string) partition {
	p := partition{Kind: kind, Drop: map[string][]string{}}
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				p.Drop[a] = append(p.Drop[a], h...)
			}
		}
	}
	for a := range p.Drop {
		sort.Strings(p.Drop[a])
	}
	return p
}

// buildPartition builds a partition of kind over nodes. leader is the
// current leader (needed by leader and oneway), pick a seeded random value
// that chooses the minority, the ring order and the one-way direction.
func buildPartition(kind string, nodes []string, leader string, pick uint64) (partition, error) {
	r := rand.New(rand.NewPCG(pick, 0x70617274))
	shuffled := slices.Clone(nodes)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	others := func(x string) []string {
		var o []string
		for _, n := range nodes {
			if n != x {
				o = append(o, n)
			}
		}
		return o
	}
	switch kind {
	case netMajority:
		k := (len(nodes) - 1) / 2
		if i := slices.Index(shuffled, leader); i >= 0 {
			// Half the time the leader is in the minority, where it
			// must stop serving; the other half it keeps its quorum.
			j := len(shuffled) - 1
			if pick%2 == 0 {
				j = 0
			}
			shuffled[j], shuffled[i] = shuffled[i], shuffled[j]
		}
		return cutGroups(kind, shuffled[:k], shuffled[k:]), nil
	case netLeader:
		if leader == "" {
			return partition{}, errors.New("no leader to isolate")
		}
		return cutGroups(kind, []string{leader}, others(leader)), nil
	case netRing:
		p := partition{Kind: kind, Drop: map[string][]string{}}
		n := len(shuffled)
		for i, a := range shuffled {
			for j, b := range shuffled {
				d := (j - i + n) % n
				if i != j && d != 1 && d != n-1 {
					p.Drop[a] = append(p.Drop[a], b)
				}
			}
		}
		if n == 3 {
			// Every pair of 3 nodes is adjacent in a ring; the
			// non-transitive shape at 3 is a bridge: the ends cannot
			// hear each other, the middle hears both.
			a, c := shuffled[0], shuffled[2]
			p.Drop = map[string][]string{a: {c}, c: {a}}
		}
		for a := range p.Drop {
			sort.Strings(p.Drop[a])
		}
		return p, nil
	case netOneWay:
		if leader == "" {
			return partition{}, errors.New("no leader for a one-way partition")
		}
		p := partition{Kind: kind, Refuse: map[string][]string{}}
		if r.IntN(2) == 0 {
			for _, o := range others(leader) {
				p.Refuse[o] = []string{leader} // the leader's heartbeats fail
			}
		} else {
			p.Refuse[leader] = others(leader) // its peers' calls fail
		}
		return p, nil
	}
	return partition{}, fmt.Errorf("unknown partition kind %q", kind)
}

// Ports every backend's nodes listen on inside their own network namespace.
const (
	nsClientPort = "6379"
	nsRaftPort   = "16379"
)

// applyPartition replaces every node's INPUT rules with p, running iptables
// and ss through exec (ip netns exec or nsenter). ips maps node ids to
// their addresses; the client address is never matched.
func applyPartition(p partition, ips map[string]string, exec func(node string, args ...string) error) error {
	var errs []error
	for _, id := range sortedKeys(asLists(ips)) {
		errs = append(errs, exec(id, "iptables", "-F", "INPUT"))
	}
	for _, a := range sortedKeys(p.Drop) {
		for _, b := range p.Drop[a] {
			errs = append(errs, exec(a, "iptables", "-A", "INPUT", "-s", ips[b], "-j", "DROP"))
		}
	}
	for _, a := range sortedKeys(p.Refuse) {
		for _, b := range p.Refuse[a] {
			errs = append(errs, exec(a, "iptables", "-A", "INPUT", "-s", ips[b], "-p", "tcp", "--syn", "-j", "DROP"))
			// Connections b already opened to a (Raft's pooled RPC
			// connections, forwarding) would go on working: reset them.
			errs = append(errs, exec(a, "ss", "-K", "dst", ips[b], "and", "(", "sport", "=", ":"+nsRaftPort,
				"or", "sport", "=", ":"+nsClientPort, ")"))
		}
	}
	return errors.Join(errs...)
}

func asLists(m map[string]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = []string{v}
	}
	return out
}

// TestPartitionShapes: each partition family cuts what its name says.
func TestPartitionShapes(t *testing.T) {
	for _, n := range []int{3, 5} {
		var nodes []string
		for i := 1; i <= n; i++ {
			nodes = append(nodes, fmt.Sprintf("n%d", i))
		}
		hears := func(p partition, a, b string) bool { return !slices.Contains(p.Drop[a], b) }
		for pick := uint64(0); pick < 20; pick++ {
			p, err := buildPartition(netMajority, nodes, "n1", pick)
			if err != nil {
				t.Fatal(err)
			}
			cut := 0
			for _, a := range nodes {
				if len(p.Drop[a]) > n/2 {
					cut++
				}
			}
			if cut != (n-1)/2 {
				t.Errorf("%d nodes, majority %s: %d nodes in the minority, want %d", n, p, cut, (n-1)/2)
			}
			for _, a := range nodes {
				for _, b := range p.Drop[a] {
					if hears(p, b, a) {
						t.Errorf("majority %s: %s drops %s but not the reverse", p, a, b)
					}
				}
			}
			p, _ = buildPartition(netLeader, nodes, "n2", pick)
			if len(p.Drop["n2"]) != n-1 || hears(p, "n1", "n2") || !hears(p, "n1", "n3") {
				t.Errorf("leader isolation %s", p)
			}
			p, _ = buildPartition(netRing, nodes, "", pick)
			for _, a := range nodes {
				heard := 0
				for _, b := range nodes {
					if a != b && hears(p, a, b) {
						heard++
					}
				}
				want := 2
				if n == 3 && len(p.Drop[a]) == 1 {
					want = 1 // an end of the bridge
				}
				if heard != want {
					t.Errorf("ring %s: %s hears %d peers, want %d", p, a, heard, want)
				}
			}
			p, _ = buildPartition(netOneWay, nodes, "n3", pick)
			if len(p.Drop) != 0 || len(p.Refuse) == 0 {
				t.Errorf("one-way %s", p)
			}
			for a, bs := range p.Refuse {
				if a != "n3" && !slices.Equal(bs, []string{"n3"}) || a == "n3" && len(bs) != n-1 {
					t.Errorf("one-way %s: %s refuses %v", p, a, bs)
				}
			}
		}
	}
	inMinority := 0
	for pick := uint64(0); pick < 20; pick++ {
		p, _ := buildPartition(netMajority, []string{"n1", "n2", "n3", "n4", "n5"}, "n4", pick)
		if len(p.Drop["n4"]) == 3 {
			inMinority++
		}
	}
	if inMinority != 10 {
		t.Errorf("the leader was in the minority in %d of 20 majority splits", inMinority)
	}
	a, _ := buildPartition(netMajority, []string{"n1", "n2", "n3", "n4", "n5"}, "", 7)
	b, _ := buildPartition(netMajority, []string{"n1", "n2", "n3", "n4", "n5"}, "", 7)
	if a.String() != b.String() {
		t.Errorf("same pick, different partitions: %s, %s", a, b)
	}
}

// TestCheckerFlagsReadonlyDuringPartition: a follower is cut off from its
// peers (clients still reach it); a writer adds elements through the
// leader. Read with READONLY (stale local reads, unsafe on purpose), the
// cut-off follower misses every one of them and the checker must say
// Illegal; read linearizably (the default), the same follower must refuse
// or time out rather than answer stale, and the same checker says Ok.
func TestCheckerFlagsReadonlyDuringPartition(t *testing.T) {
	seed := seedFor(t)
	dir := artifactDir(t, "readonly-partition", seed)
	cl := newProcClusterWith(t, clusterOpts{Nodes: 3, Netns: true}, dir)
	leader := startWithLeader(t, cl)
	li, fi := slices.Index(cl.Nodes(), leader), 0
	if fi == li {
		fi = 1
	}
	follower := cl.Nodes()[fi]
	p := cutGroups("isolate-follower", []string{follower}, slices.DeleteFunc(cl.Nodes(), func(s string) bool { return s == follower }))
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"name": "readonly-partition", "seed": seed,
		"nodes": 3, "leader": leader, "reader": follower, "partition": p, "pairs_per_mode": 50})
	rec, err := newRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if err := cl.Partition(p); err != nil {
		t.Fatal(err)
	}
	rec.nemesis("start-partition", p.String())
	ids := &procIDs{}
	check := func(mode string, readOnly bool) (linResult, int) {
		// Each mode has its own minute: the linearizable mode's reads time
		// out one by one, and writes may wait for an election.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		writer := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: li, timeout: 2 * time.Second, pin: true}
		reader := &worker{rec: rec, cl: cl, ids: ids, proc: ids.next(), node: fi, timeout: time.Second, pin: true, readOnly: readOnly}
		answered := 0
		for i := 0; i < 50 && ctx.Err() == nil; i++ {
			if !writer.connect(ctx) || !reader.connect(ctx) {
				continue
			}
			key := fmt.Sprintf("lin:%s:%d", mode, i)
			// The write must land before the read means anything. On a
			// loaded machine the majority side can be between leaders
			// (-TRYAGAIN at once): retry as a client would, after a pause.
			// A failed write drops the writer's connection: reconnect first.
			written := false
			for !written && ctx.Err() == nil {
				if !writer.connect(ctx) {
					continue
				}
				if written = writer.do("sadd", key, 1).Outcome == outOK; !written {
					sleepCtx(ctx, 100*time.Millisecond)
				}
			}
			if !written {
				continue
			}
			if o := reader.do("sismember", key, 1); o.Outcome == outOK {
				answered++
			}
		}
		var ops []op
		for _, o := range rec.operations() {
			if strings.HasPrefix(o.Key, "lin:"+mode+":") {
				ops = append(ops, o)
			}
		}
		res, err := checkLinearizable(ops, filepath.Join(dir, mode+".html"), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res, answered
	}
	safe, safeAnswered := check("linearizable", false)
	unsafe, unsafeAnswered := check("readonly", true)
	if err := cl.HealNetwork(); err != nil {
		t.Fatal(err)
	}
	rec.nemesis("stop-partition", "")
	writeJSON(t, filepath.Join(dir, "result.json"), map[string]any{"linearizable": safe, "readonly": unsafe,
		"linearizable_reads_answered": safeAnswered, "readonly_reads_answered": unsafeAnswered})
	t.Logf("cut-off follower %s: linearizable reads answered %d/50, porcupine %s; READONLY reads answered %d/50, porcupine %s (%s)",
		follower, safeAnswered, safe.Result, unsafeAnswered, unsafe.Result, unsafe.Visualization)
	if safe.Result != string(porcupine.Ok) {
		t.Errorf("linearizable reads on a cut-off follower: %+v", safe)
	}
	if unsafeAnswered == 0 || unsafe.Result != string(porcupine.Illegal) {
		t.Errorf("the checker did not flag READONLY reads on a cut-off follower (%d answered): %+v", unsafeAnswered, unsafe)
	}
}
