package check

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func regOp(proc int, f, key string, call, ret int64) Op {
	return Op{Proc: proc, F: f, Key: key, Outcome: OK, Call: call, Ret: ret}
}

func cas(proc int, expect, value string, n int64, call, ret int64) Op {
	o := regOp(proc, "cas", "cas:0", call, ret)
	o.Expect, o.Value, o.N = expect, value, n
	return o
}

func get(proc int, value string, call, ret int64) Op {
	o := regOp(proc, "get", "cas:0", call, ret)
	if value == "" {
		o.Nil = true
	} else {
		o.Value = value
	}
	return o
}

func set(proc int, value string, call, ret int64) Op {
	o := regOp(proc, "set", "cas:0", call, ret)
	o.Value = value
	return o
}

// The register model accepts a legal CAS history and flags a lost CAS, a
// CAS that swapped from the wrong value, and a stale read.
func TestRegisterModel(t *testing.T) {
	check := func(t *testing.T, ops []Op) LinResult {
		t.Helper()
		viz := filepath.Join(t.TempDir(), "register.html")
		res, err := Register(ops, viz, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Result != string(porcupine.Ok) {
			if _, err := os.Stat(res.Visualization); err != nil {
				t.Errorf("no visualisation for %s: %v", res.Result, err)
			}
		}
		return res
	}
	clean := []Op{
		get(0, "", 0, 5),            // missing at first
		cas(1, "0", "1", 0, 6, 8),   // CAS on a missing key: 0
		set(0, "0", 10, 20),         // SET 0
		cas(1, "0", "1", 1, 25, 30), // 0→1
		cas(2, "0", "2", 0, 26, 31), // concurrent, loses: 0
		get(0, "1", 35, 40),         // sees 1
		{Proc: 2, F: "cas", Key: "cas:0", Expect: "1", Value: "3", Outcome: Info, Call: 41, Ret: 45},
		get(0, "1", 50, 55), // the indeterminate CAS not yet
		get(3, "3", 60, 65), // now it took effect
		get(0, "3", 70, 75), // and stays
		{Proc: 4, F: "cas", Key: "cas:0", Expect: "3", Value: "4", Outcome: Fail, Call: 76, Ret: 77}, // -TRYAGAIN: dropped
		get(0, "3", 80, 85),
	}
	if res := check(t, clean); res.Result != string(porcupine.Ok) || res.Indeterminate != 1 || res.Operations != 11 {
		t.Fatalf("clean history: %+v", res)
	}
	cases := map[string][]Op{
		// The case: CAS 0→1 acknowledged, then a read that starts
		// after it still sees 0.
		"lost CAS": {set(0, "0", 0, 10), cas(1, "0", "1", 1, 15, 20), get(0, "0", 25, 30)},
		// A CAS answered 1 although the value was not the expected one.
		"CAS from a wrong value": {set(0, "2", 0, 10), cas(1, "0", "1", 1, 15, 20)},
		// A CAS answered 0 although the value was the expected one and
		// nothing else ran.
		"CAS refused wrongly": {set(0, "0", 0, 10), cas(1, "0", "1", 0, 15, 20), get(0, "0", 25, 30), get(0, "1", 35, 40)},
		// Both concurrent CASes from 0 succeeded.
		"double CAS": {set(0, "0", 0, 10), cas(1, "0", "1", 1, 15, 20), cas(2, "0", "2", 1, 15, 20)},
		// A SET acknowledged, a later read sees the older value.
		"stale read": {set(0, "0", 0, 10), set(0, "1", 15, 20), get(1, "0", 25, 30)},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			if res := check(t, ops); res.Result != string(porcupine.Illegal) {
				t.Fatalf("not flagged: %+v", res)
			}
		})
	}
}
