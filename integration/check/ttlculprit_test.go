package check

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// culpritOf describes a culprit's ops as "OP @ call-ms" for comparing.
func culpritOf(c TTLCulprit) []string {
	var out []string
	for _, o := range c.Ops {
		out = append(out, fmt.Sprintf("%s @ %.0f", o.Op, o.Call*1000))
	}
	return out
}

func onKey(k string, set func(*Op)) func(*Op) {
	return func(o *Op) {
		o.Key = k
		if set != nil {
			set(o)
		}
	}
}

func expireN(ms, res int64) func(*Op) { return func(o *Op) { o.TTLms, o.N = ms, res } }

// Histories small enough to see their culprit by hand; times in ms.
func TestTTLCulpritsTable(t *testing.T) {
	b250, exact := BoundsFor(250*time.Millisecond), BoundsFor()
	for _, tc := range []struct {
		name    string
		b       ClockBounds
		ops     []Op
		illegal []string
		want    []string // the culprit of the first illegal key
	}{
		{
			// SET v's deadline is in [995, 1365] ms: both late GETs are
			// illegal, either alone with the SET is the culprit, and the
			// other key's traffic, the earlier SET and the timely reads
			// are not part of it.
			name: "stale GET among other traffic", b: b250,
			ops: []Op{
				ttlOp(0, "set", 0, 10, value("u")),
				ttlOp(1, "get", 20, 30, value("u")),
				ttlOp(2, "set", 0, 10, onKey("ttl:1", setPX("x", 500))),
				ttlOp(0, "set", 100, 110, setPX("v", 1000)),
				ttlOp(1, "get", 500, 510, value("v")),
				ttlOp(1, "ttl", 600, 610, n(1)),
				ttlOp(2, "get", 2000, 2010, onKey("ttl:1", isNil)),
				ttlOp(1, "get", 1400, 1410, value("v")),
				ttlOp(1, "get", 1500, 1510, value("v")),
			},
			illegal: []string{"ttl:0"},
			want:    []string{"SET ttl:0 v PX 1000 -> OK @ 100", "GET ttl:0 -> v @ 1500"},
		},
		{
			// Without SET b the PTTL would read SET a's deadline and the
			// sub-history would stay Illegal, with the wrong write in it:
			// SET a may not become the PTTL's source once PEXPIRE (which
			// keeps SET a until it goes itself) is dropped.
			name: "a superseded deadline does not stand in for the culprit's", b: exact,
			ops: []Op{
				ttlOp(0, "set", 0, 10, setPX("a", 10000)),
				ttlOp(0, "expire", 20, 30, expireN(20000, 1)),
				ttlOp(0, "set", 100, 110, setPX("b", 1000)),
				ttlOp(1, "pttl", 3000, 3010, n(50)),
			},
			illegal: []string{"ttl:0"},
			want:    []string{"SET ttl:0 b PX 1000 -> OK @ 100", "PTTL ttl:0 -> 50 @ 3000"},
		},
		{
			// Deadline in [995, 1265] ms: gone by 1255 and alive after
			// 1257 are each possible, not both.
			name: "two reads that conflict only together", b: b250,
			ops: []Op{
				ttlOp(0, "set", 0, 10, setPX("v", 1000)),
				ttlOp(1, "get", 500, 510, value("v")),
				ttlOp(1, "get", 990, 1000, isNil),
				ttlOp(2, "get", 1262, 1270, value("v")),
			},
			illegal: []string{"ttl:0"},
			want:    []string{"SET ttl:0 v PX 1000 -> OK @ 0", "GET ttl:0 -> nil @ 990", "GET ttl:0 -> v @ 1262"},
		},
		{
			name: "EXPIRE revives an expired key", b: exact,
			ops: []Op{
				ttlOp(0, "set", 0, 10, setPX("v", 1000)),
				ttlOp(1, "get", 100, 110, value("v")),
				ttlOp(0, "expire", 2000, 2010, expireN(1000, 1)),
				ttlOp(1, "get", 2100, 2110, value("v")),
			},
			illegal: []string{"ttl:0"},
			want:    []string{"SET ttl:0 v PX 1000 -> OK @ 0", "PEXPIRE ttl:0 1000 -> 1 @ 2000"},
		},
		{
			// It may take effect late, but before the first GET.
			name: "indeterminate SET seen past its bound", b: exact,
			ops: []Op{
				ttlOp(0, "set", 0, 10, func(o *Op) { setPX("v", 1000)(o); indeterminate(o) }),
				ttlOp(1, "get", 5000, 5010, value("v")),
				ttlOp(1, "get", 7000, 7010, value("v")),
			},
			illegal: []string{"ttl:0"},
			want:    []string{"SET ttl:0 v PX 1000 -> ? @ 0", "GET ttl:0 -> v @ 5000", "GET ttl:0 -> v @ 7000"},
		},
		{
			name: "legal", b: b250,
			ops: []Op{
				ttlOp(0, "set", 0, 10, setPX("v", 1000)),
				ttlOp(1, "get", 500, 510, value("v")),
				ttlOp(1, "get", 1400, 1410, isNil),
			},
			illegal: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				if tc.ops[i].Outcome == Info {
					tc.ops[i].Ret = math.MaxInt64
				}
			}
			c := FindTTLCulprits(tc.ops, tc.b, CulpritLimit)
			if c.Stopped != "" || !reflect.DeepEqual(c.IllegalKeys, tc.illegal) || len(c.Keys) != len(tc.illegal) {
				t.Fatalf("%+v", c)
			}
			if tc.want == nil {
				return
			}
			k := c.Keys[0]
			if got := culpritOf(k); !k.Minimal || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("minimal %v, culprit\n%s\nwant\n%s", k.Minimal, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The key of TestJepsenTTL/clock-hour-transfers seed 45984148
// (integration/testdata/recheck/ttl-clock-step, docs/jepsen.md "A node that
// restarted under a leader slewing down"): its culprit is the SET PX 1162
// and the PTTL that answered 98 751 ms later (the cluster's time as n1 saw
// it ran ahead). The PTTL that answered 1012 in between is not needed.
func TestTTLCulpritsClockStep(t *testing.T) {
	events, err := ReadHistory(filepath.Join("..", "testdata", "recheck", "ttl-clock-step", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ops, nemesis, err := Ops(events)
	if err != nil {
		t.Fatal(err)
	}
	ttl, b := ByKeyPrefix(ops, "ttl:"), Bounds(nemesis)
	c := FindTTLCulprits(ttl, b, CulpritLimit)
	if c.Stopped != "" || !reflect.DeepEqual(c.IllegalKeys, []string{"ttl:1:1"}) || len(c.Keys) != 1 || !c.Keys[0].Minimal {
		t.Fatalf("%+v", c)
	}
	k := c.Keys[0]
	want := []CulpritOp{
		{Op: "SET ttl:1:1 w3-116 PX 1162 -> OK", Node: "n1", Proc: 7, Call: 15.724947025, Ret: 15.751240545},
		{Op: "PTTL ttl:1:1 -> 98", Node: "n1", Proc: 7, Call: 15.930026566, Ret: 16.476261654},
	}
	if k.KeyOps != 180 || !reflect.DeepEqual(k.Ops, want) {
		t.Fatalf("%d ops, culprit %+v", k.KeyOps, k.Ops)
	}

	// Independently of the search: the two are Illegal together, and the
	// SET alone is Ok (the PTTL alone reads a key nobody set).
	var culprit []Op
	for _, o := range ttl {
		if o.Proc == 7 && (o.Call == 15724947025 || o.Call == 15930026566) {
			culprit = append(culprit, o)
		}
	}
	for i, want := range []porcupine.CheckResult{porcupine.Illegal, porcupine.Ok} {
		r, err := TTL(culprit[:len(culprit)-i], b, "", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(culprit) != 2 || r.Result != string(want) {
			t.Errorf("%d ops of the culprit: %s, want %s", len(culprit)-i, r.Result, want)
		}
	}

	lines := strings.Join(c.Lines(), "\n")
	for _, s := range []string{"[ttl:1:1]", "[-105ms, 105ms]", "1 ± 0.05", "key ttl:1:1: minimal illegal sub-history, 2 of its 180 ops",
		"SET ttl:1:1 w3-116 PX 1162 -> OK", "node n1", "proc 7", "15.7249–15.7512 s", "PTTL ttl:1:1 -> 98", "15.9300–16.4763 s"} {
		if !strings.Contains(lines, s) {
			t.Errorf("no %q in\n%s", s, lines)
		}
	}
	if strings.Contains(lines, "stopped") {
		t.Errorf("the search says it stopped:\n%s", lines)
	}
}

// Four illegal keys: the first three are minimised, and the output says
// the fourth was not.
func TestTTLCulpritsKeyLimit(t *testing.T) {
	var ops []Op
	for k := range MaxCulpritKeys + 1 {
		key := fmt.Sprintf("ttl:%d", k)
		ops = append(ops, ttlOp(0, "set", 0, 10, onKey(key, setPX("v", 1000))), ttlOp(1, "get", 3000, 3010, onKey(key, value("v"))))
	}
	c := FindTTLCulprits(ops, BoundsFor(), CulpritLimit)
	if len(c.IllegalKeys) != MaxCulpritKeys+1 || len(c.Keys) != MaxCulpritKeys || !strings.Contains(c.Stopped, "only the first 3 of 4") {
		t.Fatalf("%+v", c)
	}
	if l := c.Lines(); !strings.Contains(l[len(l)-1], "search stopped early: only the first 3 of 4 illegal keys") {
		t.Errorf("last line %q", l[len(l)-1])
	}
}

// Past the time limit the search stops and says so: before checking any
// key, and in the middle of a key, whose illegal sub-history so far is
// then kept and not called minimal.
func TestTTLCulpritsTimeLimit(t *testing.T) {
	ops := []Op{ttlOp(0, "set", 0, 10, setPX("v", 1000)), ttlOp(1, "get", 500, 510, value("v")), ttlOp(1, "get", 3000, 3010, value("v"))}
	c := FindTTLCulprits(ops, BoundsFor(), 0)
	if len(c.Keys) != 0 || c.Stopped != "time limit 0s reached after checking 0 of 1 keys" {
		t.Fatalf("%+v", c)
	}
	m := TTLModel(BoundsFor())
	cs := &culpritSearch{model: m, describe: m.DescribeOperation, deadline: time.Now()}
	h := ttlHistory(ops)
	if got, err := cs.minimise(h); err != errDeadline || len(got) != len(h) {
		t.Fatalf("%d ops, %v", len(got), err)
	}
	lines := strings.Join((&TTLCulprits{Keys: []TTLCulprit{{Key: "ttl:0", KeyOps: 3, Ops: cs.culpritOps(h)}},
		Stopped: "time limit 20s reached while minimising key ttl:0 (3 ops left of 3)"}).Lines(), "\n")
	for _, s := range []string{"NOT minimal", "3 of its 3 ops", "search stopped early: time limit 20s reached while minimising key ttl:0"} {
		if !strings.Contains(lines, s) {
			t.Errorf("no %q in\n%s", s, lines)
		}
	}
}
