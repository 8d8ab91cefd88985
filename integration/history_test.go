//go:build jepsen

package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"

	"raftset/integration/check"
)

// The history format and the checkers live in integration/check (no build
// tag) so that cmd/recheck can check a saved history again; these names
// keep the suite's code short.
type (
	event     = check.Event
	op        = check.Op
	linResult = check.LinResult
)

// setResult adds the suite's ok() to check.SetResult.
type setResult struct{ check.SetResult }

func (s setResult) ok() bool { return s.OK() }

// recorder writes events as JSON lines and keeps the completed client
// operations for the checkers.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	n    int
	ops  []op
	// closed: Close ran (a run closes the history before re-checking it).
	closed bool
}

func newRecorder(path string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &recorder{base: time.Now(), f: f, w: bufio.NewWriter(f)}, nil
}

func (r *recorder) now() int64 { return int64(time.Since(r.base)) }

func (r *recorder) write(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = r.n
	r.n++
	b, _ := json.Marshal(e)
	r.w.Write(b)
	r.w.WriteByte('\n')
}

// invoke records an invocation and returns its time.
func (r *recorder) invoke(proc int, f, key string, elem int64, node string) int64 {
	return r.invokeOp(op{Proc: proc, F: f, Key: key, Elem: elem, Node: node})
}

// invokeOp records the invocation of o (its arguments set) and returns its
// time.
func (r *recorder) invokeOp(o op) int64 {
	o.Call = r.now()
	r.write(o.InvokeEvent())
	return o.Call
}

// complete records the completion of o (Call already set) and keeps it.
func (r *recorder) complete(o op) {
	r.write(o.CompleteEvent())
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) nemesis(f, value string) {
	r.write(event{Proc: check.NemesisProc, Type: "info", F: f, Value: value, T: r.now()})
}

// finalReads records the final reads of key (one per node, taken after
// healing) so that a saved history can be checked again on its own.
func (r *recorder) finalReads(key string, nodes []string, finals [][]int64) {
	for i, members := range finals {
		o := op{Proc: check.FinalProc, F: "final", Key: key, Outcome: check.OK, Members: members}
		if i < len(nodes) {
			o.Node = nodes[i]
		}
		o.Call = r.invokeOp(o)
		o.Ret = r.now()
		r.complete(o)
	}
}

// Close flushes and closes the history; later calls do nothing.
func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if err := r.w.Flush(); err != nil {
		r.f.Close()
		return err
	}
	return r.f.Close()
}

func (r *recorder) operations() []op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]op(nil), r.ops...)
}

// checkLinearizable runs porcupine over workload (a)'s ops; on anything
// but Ok it writes the HTML visualisation to vizPath.
func checkLinearizable(ops []op, vizPath string, timeout time.Duration) (linResult, error) {
	return check.Linearizable(ops, vizPath, timeout)
}

// checkSet compares the set workload's adds with the final reads (one per
// node, taken after healing).
func checkSet(adds []op, finals [][]int64) setResult {
	return setResult{check.Set(adds, finals)}
}
