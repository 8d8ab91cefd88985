package check

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const msec = int64(time.Millisecond)

// ttlOp builds a TTL-workload op over [call, ret] milliseconds.
func ttlOp(proc int, f string, call, ret int64, set func(*Op)) Op {
	o := Op{Proc: proc, F: f, Key: "ttl:0", Outcome: OK, Call: call * msec, Ret: ret * msec}
	if set != nil {
		set(&o)
	}
	return o
}

func value(v string) func(*Op) { return func(o *Op) { o.Value = v } }
func n(v int64) func(*Op)      { return func(o *Op) { o.N = v } }
func isNil(o *Op)              { o.Nil = true }
func indeterminate(o *Op)      { o.Outcome = Info }
func setPX(v string, ms int64) func(*Op) {
	return func(o *Op) { o.Value, o.TTLms = v, ms }
}

// With one node 250 ms ahead, a key set with PX 1000 over [0, 10] ms has
// its deadline in [995, 1265] ms on the harness's clock (5 ms slack).
func TestTTLModel(t *testing.T) {
	b := BoundsFor(250 * time.Millisecond)
	if b.Lo != -5*msec || b.Hi != 255*msec {
		t.Fatalf("bounds %+v", b)
	}
	set := ttlOp(0, "set", 0, 10, setPX("v1", 1000))
	for _, tc := range []struct {
		name  string
		ops   []Op
		legal bool
	}{
		{"alive before the deadline", []Op{set, ttlOp(1, "get", 500, 510, value("v1"))}, true},
		{"alive within the uncertainty after it", []Op{set, ttlOp(1, "get", 1100, 1110, value("v1"))}, true},
		{"gone within the uncertainty before it", []Op{set, ttlOp(1, "get", 1000, 1001, isNil)}, true},
		{"gone after it", []Op{set, ttlOp(1, "get", 1500, 1510, isNil), ttlOp(2, "ttl", 1600, 1610, n(-2))}, true},
		{"ALIVE past deadline + uncertainty", []Op{set, ttlOp(1, "get", 1300, 1310, value("v1"))}, false},
		{"GONE before deadline - uncertainty", []Op{set, ttlOp(1, "get", 600, 610, isNil)}, false},
		{"gone on one node, alive on a slower one just after", []Op{set,
			ttlOp(1, "get", 1000, 1005, isNil), ttlOp(2, "get", 1010, 1020, value("v1"))}, true},
		{"GONE, then alive long after", []Op{set,
			ttlOp(1, "get", 1000, 1005, isNil), ttlOp(2, "get", 1300, 1310, value("v1"))}, false},
		{"wrong value", []Op{set, ttlOp(1, "get", 100, 110, value("v2"))}, false},
		{"never set", []Op{ttlOp(1, "get", 100, 110, value("v1"))}, false},
		{"pttl", []Op{ttlOp(0, "set", 0, 10, value("v")), ttlOp(0, "expire", 100, 110, func(o *Op) { o.TTLms, o.N = 1000, 1 }),
			ttlOp(1, "pttl", 200, 210, n(900))}, true},
		{"PTTL too long", []Op{ttlOp(0, "set", 0, 10, value("v")), ttlOp(0, "expire", 100, 110, func(o *Op) { o.TTLms, o.N = 1000, 1 }),
			ttlOp(1, "pttl", 200, 210, n(1500))}, false},
		{"no ttl", []Op{ttlOp(0, "set", 0, 10, value("v")), ttlOp(1, "ttl", 20, 30, n(-1)), ttlOp(1, "get", 5000, 5001, value("v"))}, true},
		{"EXPIRE revives an expired key", []Op{set, ttlOp(1, "expire", 2000, 2010, func(o *Op) { o.TTLms, o.N = 1000, 1 })}, false},
		{"EXPIRE on an expired key", []Op{set, ttlOp(1, "expire", 2000, 2010, func(o *Op) { o.TTLms, o.N = 1000, 0 }),
			ttlOp(2, "get", 2020, 2030, isNil)}, true},
		{"ttl rounds", []Op{ttlOp(0, "set", 0, 10, setPX("v", 10000)), ttlOp(1, "ttl", 100, 110, n(10))}, true},
		{"TTL too long", []Op{ttlOp(0, "set", 0, 10, setPX("v", 10000)), ttlOp(1, "ttl", 100, 110, n(12))}, false},
		// An indeterminate SET may take effect late, but before any op
		// linearized after it: a GET that saw it bounds its deadline.
		{"indeterminate set seen late", []Op{ttlOp(0, "set", 0, 10, func(o *Op) { setPX("v", 1000)(o); indeterminate(o) }),
			ttlOp(1, "get", 5000, 5010, value("v"))}, true},
		{"INDETERMINATE SET SEEN PAST ITS BOUND", []Op{ttlOp(0, "set", 0, 10, func(o *Op) { setPX("v", 1000)(o); indeterminate(o) }),
			ttlOp(1, "get", 5000, 5010, value("v")), ttlOp(1, "get", 7000, 7010, value("v"))}, false},
		{"indeterminate expire either way", []Op{ttlOp(0, "set", 0, 10, value("v")),
			ttlOp(1, "expire", 20, 30, func(o *Op) { o.TTLms = 1000; indeterminate(o) }),
			ttlOp(2, "get", 100, 110, value("v")), ttlOp(2, "get", 5000, 5010, value("v"))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				if tc.ops[i].Outcome == Info {
					tc.ops[i].Ret = math.MaxInt64
				}
			}
			res, err := TTL(tc.ops, b, "", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			want := porcupine.Illegal
			if tc.legal {
				want = porcupine.Ok
			}
			if res.Result != string(want) {
				t.Errorf("%s: porcupine %s, want %s", tc.name, res.Result, want)
			}
		})
	}
}

// The checker writes porcupine's visualisation of a violation.
func TestTTLVisualisation(t *testing.T) {
	path := t.TempDir() + "/ttl.html"
	res, err := TTL([]Op{ttlOp(0, "set", 0, 10, setPX("v1", 1000)), ttlOp(1, "get", 1300, 1310, value("v1"))},
		BoundsFor(250*time.Millisecond), path, 10*time.Second)
	if err != nil || res.Result != string(porcupine.Illegal) || res.Visualization != path {
		t.Fatalf("%+v, %v", res, err)
	}
}

// With the cluster clock's bounds (rate within 5%, views within 105 ms), a
// key set with PX 1000 over [0, 10] ms has its deadline in [847, 1168] ms
// of real time, however far the nodes' wall clocks are apart: a read may
// find it gone once it returns after 742.4 ms, alive until it starts after
// 1273 ms. A key that expires early is still caught, the EX 60
// gone at once first.
func TestTTLModelClusterClock(t *testing.T) {
	b := Bounds([]Event{ClockOffsetEvent("n1", time.Hour), ClockOffsetEvent("n3", -time.Hour), ClusterClockEvent()})
	if b != ClusterBounds() || b.Lo != -105*msec || b.Hi != 105*msec || b.Slew != 0.05 {
		t.Fatalf("bounds %+v", b)
	}
	set := ttlOp(0, "set", 0, 10, setPX("v1", 1000))
	for _, tc := range []struct {
		name  string
		ops   []Op
		legal bool
	}{
		{"gone within the uncertainty before it", []Op{set, ttlOp(1, "get", 740, 743, isNil)}, true},
		{"GONE before deadline/1.05 - uncertainty", []Op{set, ttlOp(1, "get", 730, 742, isNil)}, false},
		{"alive within the uncertainty after it", []Op{set, ttlOp(1, "get", 1272, 1280, value("v1"))}, true},
		{"ALIVE past deadline/0.95 + uncertainty", []Op{set, ttlOp(1, "get", 1274, 1280, value("v1"))}, false},
		{"EX 60 GONE AT ONCE", []Op{ttlOp(0, "set", 0, 10, setPX("session", 60000)), ttlOp(1, "get", 20, 30, isNil)}, false},
		{"pttl within the slew", []Op{set, ttlOp(1, "pttl", 100, 110, n(1200))}, true},
		{"PTTL BEYOND THE SLEW", []Op{set, ttlOp(1, "pttl", 100, 110, n(1400))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := TTL(tc.ops, b, "", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			want := porcupine.Illegal
			if tc.legal {
				want = porcupine.Ok
			}
			if res.Result != string(want) {
				t.Errorf("%s: porcupine %s, want %s", tc.name, res.Result, want)
			}
		})
	}
}
