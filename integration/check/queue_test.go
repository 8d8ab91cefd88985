package check

import (
	"reflect"
	"testing"
)

func qadd(e int64, out Outcome) Op {
	return Op{F: "sadd", Key: "queue:0", Elem: e, Outcome: out, N: 1, Call: e * 10, Ret: e*10 + 5}
}

func qpop(e int64, out Outcome, at int64) Op {
	return Op{F: "spop", Key: "queue:0", Elem: e, Outcome: out, Call: at, Ret: at + 5}
}

func TestQueueChecker(t *testing.T) {
	clean := []Op{qadd(1, OK), qadd(2, OK), qadd(3, Info), qadd(4, OK), qadd(5, Fail), qadd(6, OK),
		qpop(1, OK, 100), qpop(3, OK, 110), {F: "spop", Key: "queue:0", Outcome: OK, Nil: true, Call: 120, Ret: 125},
		qpop(0, Info, 130)}
	// 2 and 4 remain; 6 was taken by the indeterminate SPOP.
	res := Queue(clean, [][]int64{{2, 4}, {4, 2}})
	if !res.OK() || res.Recovered != 1 || res.Lost != 0 || !reflect.DeepEqual(res.Missing, []int64{6}) ||
		res.Pops != 2 || res.EmptyPops != 1 || res.Indeterminate != 1 {
		t.Fatalf("clean history: %+v", res)
	}

	// A double pop, an element both popped and still present, and a
	// loss no indeterminate SPOP accounts for.
	bad := []Op{qadd(1, OK), qadd(2, OK), qadd(3, OK), qadd(4, OK),
		qpop(1, OK, 100), qpop(1, OK, 110), qpop(2, OK, 120)}
	res = Queue(bad, [][]int64{{2}, {2}})
	if res.OK() || !reflect.DeepEqual(res.Duplicated, []int64{1, 2}) || res.Lost != 2 ||
		!reflect.DeepEqual(res.Missing, []int64{3, 4}) {
		t.Fatalf("bad history: %+v", res)
	}
	// One indeterminate SPOP explains one missing element, not two.
	res = Queue(append(bad[:4:4], qpop(0, Info, 100)), [][]int64{{1, 2}})
	if res.Lost != 1 || res.OK() {
		t.Fatalf("one indeterminate pop, two missing: %+v", res)
	}
	// Invented, dishonest and time-travelling elements.
	res = Queue([]Op{qadd(1, Fail), qadd(2, OK), qpop(9, OK, 100), qpop(2, OK, 1)}, [][]int64{{1}})
	if res.OK() || !reflect.DeepEqual(res.Unexpected, []int64{9}) || !reflect.DeepEqual(res.FailedPresent, []int64{1}) ||
		!reflect.DeepEqual(res.PoppedBeforeAdded, []int64{2}) {
		t.Fatalf("invented elements: %+v", res)
	}
	// Nodes that disagree on the final read.
	if res := Queue(clean, [][]int64{{2, 4}, {2}}); res.OK() || !res.FinalDiffer {
		t.Fatalf("final reads differ: %+v", res)
	}
}
