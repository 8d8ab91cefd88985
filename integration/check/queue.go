package check

// Workload (d): SPOP as a queue. Producers SADD unique elements, consumers
// SPOP them; after healing, a final SMEMBERS on every node.

// QueueResult is the verdict of the queue workload.
type QueueResult struct {
	Attempted     int `json:"attempted"`    // SADDs invoked
	Acknowledged  int `json:"acknowledged"` // SADDs answered :1
	Pops          int `json:"pops"`         // SPOPs answered with an element
	EmptyPops     int `json:"empty_pops"`   // SPOPs answered nil
	Indeterminate int `json:"indeterminate_pops"`
	FinalSize     int `json:"final_size"`
	// Duplicated: popped by two SPOPs, or popped and still in the final
	// read.
	Duplicated []int64 `json:"duplicated"`
	// Missing: acknowledged, never popped by an ok SPOP, not in the final
	// read. Each indeterminate SPOP may account for one of them; Lost is
	// how many no indeterminate SPOP can account for.
	Missing []int64 `json:"missing"`
	Lost    int     `json:"lost"`
	// Recovered: an indeterminate SADD whose element was popped or is in
	// the final read (allowed).
	Recovered int `json:"recovered"`
	// Unexpected: popped or present, never added.
	Unexpected []int64 `json:"unexpected"`
	// FailedPresent: a SADD answered -TRYAGAIN whose element was popped or
	// is present (a dishonest error).
	FailedPresent []int64 `json:"failed_but_present"`
	// PoppedBeforeAdded: an SPOP returned an element before its SADD was
	// invoked.
	PoppedBeforeAdded []int64 `json:"popped_before_added"`
	BadReplies        int     `json:"unexpected_replies"` // a unique SADD answered :0
	FinalDiffer       bool    `json:"final_reads_differ"`
}

// OK: nothing lost, duplicated or invented, and something was popped.
func (q QueueResult) OK() bool {
	return q.Lost == 0 && len(q.Duplicated) == 0 && len(q.Unexpected) == 0 && len(q.FailedPresent) == 0 &&
		len(q.PoppedBeforeAdded) == 0 && q.BadReplies == 0 && !q.FinalDiffer && q.Acknowledged > 0 && q.Pops > 0
}

// Queue checks the queue workload's SADD and SPOP ops against the final
// reads (one per node).
func Queue(ops []Op, finals [][]int64) QueueResult {
	var res QueueResult
	type add struct {
		outcome Outcome
		call    int64
	}
	adds := map[int64]add{}
	popped := map[int64]int{}
	for _, o := range ops {
		switch o.F {
		case "sadd":
			res.Attempted++
			adds[o.Elem] = add{o.Outcome, o.Call}
			if o.Outcome == OK {
				res.Acknowledged++
				if o.N != 1 {
					res.BadReplies++
				}
			}
		case "spop":
			switch {
			case o.Outcome == Info:
				res.Indeterminate++
			case o.Outcome != OK:
			case o.Nil:
				res.EmptyPops++
			default:
				res.Pops++
				popped[o.Elem]++
			}
		}
	}
	for _, o := range ops {
		if o.F == "spop" && o.Outcome == OK && !o.Nil {
			if a, ok := adds[o.Elem]; ok && o.Ret < a.call {
				res.PoppedBeforeAdded = append(res.PoppedBeforeAdded, o.Elem)
			}
		}
	}
	final, differ := agree(finals)
	res.FinalDiffer = differ
	res.FinalSize = len(final)
	for e, n := range popped {
		if n > 1 || final[e] {
			res.Duplicated = append(res.Duplicated, e)
		}
	}
	seen := func(e int64) bool { return popped[e] > 0 || final[e] }
	for e, a := range adds {
		switch {
		case a.outcome == OK && !seen(e):
			res.Missing = append(res.Missing, e)
		case a.outcome == Info && seen(e):
			res.Recovered++
		case a.outcome == Fail && seen(e):
			res.FailedPresent = append(res.FailedPresent, e)
		}
	}
	res.Lost = max(0, len(res.Missing)-res.Indeterminate)
	for e := range popped {
		if _, ok := adds[e]; !ok {
			res.Unexpected = append(res.Unexpected, e)
		}
	}
	for e := range final {
		if _, ok := adds[e]; !ok && popped[e] == 0 {
			res.Unexpected = append(res.Unexpected, e)
		}
	}
	for _, s := range [][]int64{res.Duplicated, res.Missing, res.Unexpected, res.FailedPresent, res.PoppedBeforeAdded} {
		sortInts(s)
	}
	return res
}
