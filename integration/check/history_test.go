package check

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Ops read back from history lines are the ops that were written.
func TestHistoryRoundTrip(t *testing.T) {
	ops := []Op{
		{Proc: 0, F: "sadd", Key: "lin:0:0", Elem: 3, Outcome: OK, N: 1, Call: 1, Ret: 2, Node: "n1"},
		{Proc: 1, F: "smembers", Key: "lin:0:0", Outcome: OK, Members: []int64{3}, Call: 3, Ret: 4, Node: "n2"},
		{Proc: 1, F: "smembers", Key: "lin:0:0", Outcome: OK, Members: []int64{}, Call: 5, Ret: 6, Node: "n2"},
		{Proc: 2, F: "srem", Key: "lin:0:0", Elem: 3, Outcome: Info, Err: "i/o timeout", Call: 5, Ret: 9, Node: "n3"},
		{Proc: 3, F: "sismember", Key: "lin:0:0", Elem: 3, Outcome: OK, N: 0, Call: 10, Ret: 11},
		{Proc: 4, F: "spop", Key: "queue:0", Elem: 17, Outcome: OK, Call: 10, Ret: 11},
		{Proc: 4, F: "spop", Key: "queue:0", Nil: true, Outcome: OK, Call: 12, Ret: 13},
		{Proc: 5, F: "set", Key: "ttl:0", Value: "v7", TTLms: 1500, Outcome: OK, Call: 12, Ret: 13},
		{Proc: 5, F: "get", Key: "ttl:0", Value: "v7", Outcome: OK, Call: 14, Ret: 15},
		{Proc: 5, F: "get", Key: "ttl:0", Nil: true, Outcome: OK, Call: 16, Ret: 17},
		{Proc: 5, F: "expire", Key: "ttl:0", TTLms: 2000, N: 1, Outcome: OK, Call: 18, Ret: 19},
		{Proc: 6, F: "sadd", Key: "set:full", Elem: 9, Outcome: Fail, Err: "TRYAGAIN no leader", Call: 18, Ret: 19},
		// Sharded: a redirect followed, and one followed into a second.
		{Proc: 6, F: "sadd", Key: "lin:1:0", Elem: 2, Outcome: OK, N: 1, Call: 19, Ret: 20, Node: "n1",
			Moved: "MOVED 12182 127.0.0.1:7003"},
		{Proc: 6, F: "srem", Key: "lin:1:0", Elem: 2, Outcome: Fail, Err: "MOVED 12182 127.0.0.1:7002", Call: 20, Ret: 21,
			Node: "n1", Moved: "MOVED 12182 127.0.0.1:7003"},
		{Proc: FinalProc, F: "final", Key: "set:full", Members: []int64{1, 2}, Outcome: OK, Call: 20, Ret: 21, Node: "n1"},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, o := range ops {
		e1, e2 := o.InvokeEvent(), o.CompleteEvent()
		e1.Index, e2.Index = 2*i, 2*i+1
		enc.Encode(e1)
		enc.Encode(e2)
	}
	enc.Encode(Event{Proc: NemesisProc, Type: "info", F: "clock-offset", Node: "n1", Value: "250ms"})
	// An invocation the run never saw complete.
	enc.Encode(Op{Proc: 7, F: "sadd", Key: "set:full", Elem: 10, Call: 30}.InvokeEvent())
	events, err := DecodeHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got, nemesis, err := Ops(events)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]Op(nil), ops...), Op{Proc: 7, F: "sadd", Key: "set:full", Elem: 10, Call: 30,
		Outcome: Info, Ret: math.MaxInt64})
	if !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("op %d:\n got %+v\nwant %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("%d ops, want %d", len(got), len(want))
	}
	if len(nemesis) != 1 || nemesis[0].Value != "250ms" {
		t.Fatalf("nemesis events %+v", nemesis)
	}
	if b := Bounds(nemesis); b != BoundsFor(250*time.Millisecond) {
		t.Fatalf("bounds from the history %+v", b)
	}
	// A second invocation by a process with an op in flight is a broken
	// history.
	bad := []Event{{Proc: 1, Type: "invoke", F: "get"}, {Proc: 1, Type: "invoke", F: "get"}}
	if _, _, err := Ops(bad); err == nil {
		t.Fatal("accepted two invocations in flight")
	}
}

// The set checkers flag a stale read, a lost and an unexpected element.
func TestSetCheckers(t *testing.T) {
	good := []Op{
		{Proc: 0, F: "sadd", Key: "lin:0", Elem: 3, Outcome: OK, N: 1, Call: 0, Ret: 10},
		{Proc: 1, F: "sismember", Key: "lin:0", Elem: 3, Outcome: OK, N: 1, Call: 20, Ret: 30},
		{Proc: 0, F: "srem", Key: "lin:0", Elem: 3, Outcome: Info, Call: 40, Ret: 50},
		{Proc: 1, F: "smembers", Key: "lin:0", Outcome: OK, Call: 80, Ret: 90},
	}
	if res, err := Linearizable(good, "", 10*time.Second); err != nil || res.Result != string(porcupine.Ok) || res.Indeterminate != 1 {
		t.Fatalf("clean: %+v %v", res, err)
	}
	stale := append(good[:2:2], Op{Proc: 2, F: "sismember", Key: "lin:0", Elem: 3, Outcome: OK, N: 0, Call: 35, Ret: 38})
	if res, _ := Linearizable(stale, "", 10*time.Second); res.Result != string(porcupine.Illegal) {
		t.Fatalf("stale read: %+v", res)
	}
	sr := Set([]Op{{F: "sadd", Elem: 1, Outcome: OK, N: 1}, {F: "sadd", Elem: 2, Outcome: Info}}, [][]int64{{2, 9}})
	if len(sr.Lost) != 1 || len(sr.Unexpected) != 1 || sr.Recovered != 1 || sr.OK() {
		t.Fatalf("set checker: %+v", sr)
	}
}
