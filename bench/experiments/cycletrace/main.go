// Command cycletrace reads a Go execution trace of a raftset leader built
// with ../cycle-trace.patch (runtime/trace.Log marks on the write path) and
// prints where an entry's cycle goes: each phase's time from the entry's
// hand-over to Raft (percentiles over the trace's entries), the connections'
// turnaround (a reply's flush to that connection's next read), the system
// calls' durations by the raftset or Raft function that made them, and with
// -cycle one entry's marks in order. docs/benchmarks.md, "Three nodes at
// -P1: an entry's cycle in an execution trace", shows its use:
//
//	curl -o l.trace 'http://127.0.0.1:PPROF/debug/pprof/trace?seconds=1'
//	go run . -cycle 300 l.trace
//
// Its own module, so that golang.org/x/exp/trace stays out of raftset's.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// mark is one runtime/trace.Log of category "rs".
type mark struct {
	t   trace.Time
	g   trace.GoID
	msg string
}

// syscall is one system call of a goroutine, named by the first raftset
// or Raft function on its stack.
type syscall struct {
	start trace.Time
	d     time.Duration
	site  string
}

func main() {
	cycle := flag.Int("cycle", -1, "print the marks of this entry's cycle")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: cycletrace [-cycle n] trace.out")
		os.Exit(2)
	}
	marks, calls, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cycletrace:", err)
		os.Exit(1)
	}
	phases(marks, *cycle)
	turnaround(marks)
	syscalls(calls)
}

func read(path string) ([]mark, []syscall, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	var marks []mark
	var calls []syscall
	inCall := map[trace.GoID]syscall{}
	for {
		e, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		switch e.Kind() {
		case trace.EventLog:
			if l := e.Log(); l.Category == "rs" {
				marks = append(marks, mark{e.Time(), e.Goroutine(), l.Message})
			}
		case trace.EventStateTransition:
			st := e.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			switch {
			case to == trace.GoSyscall:
				inCall[g] = syscall{start: e.Time(), site: site(e.Stack())}
			case from == trace.GoSyscall:
				if c, ok := inCall[g]; ok {
					c.d = e.Time().Sub(c.start)
					calls = append(calls, c)
					delete(inCall, g)
				}
			}
		}
	}
	slices.SortFunc(marks, func(a, b mark) int { return int(a.t - b.t) })
	return marks, calls, nil
}

func site(s trace.Stack) string {
	for fr := range s.Frames() {
		if strings.Contains(fr.Func, "raftset/") || strings.Contains(fr.Func, "hashicorp/raft") {
			return fr.Func
		}
	}
	return "other"
}

// phases prints, for the entries between the first and the last hand-over,
// when each mark came after the entry's hand-over. Flushes and submits
// count once the entry was applied (the replies of this entry, the
// requests of the next).
func phases(marks []mark, detail int) {
	var hand []int
	for i, m := range marks {
		if m.msg == "handover" {
			hand = append(hand, i)
		}
	}
	fmt.Println("entries", len(hand))
	names := []string{"stored", "applied", "first flush", "last flush", "first submit", "last submit", "gathered", "cycle", "flush count", "submit count"}
	vals := make(map[string][]float64)
	for k := 0; k+1 < len(hand); k++ {
		h0, h1 := marks[hand[k]].t, marks[hand[k+1]].t
		got := map[string]float64{"cycle": us(h1.Sub(h0))}
		applied := false
		for _, m := range marks[hand[k]+1 : hand[k+1]] {
			d := us(m.t.Sub(h0))
			switch m.msg {
			case "stored", "gathered":
				got[m.msg] = d
			case "applied":
				got[m.msg], applied = d, true
			case "flushed", "submit":
				if !applied {
					continue
				}
				name := strings.TrimSuffix(m.msg, "ed")
				if _, ok := got["first "+name]; !ok {
					got["first "+name] = d
				}
				got["last "+name] = d
				got[name+" count"]++
			}
			if k == detail && m.msg != "submit" {
				fmt.Printf("  %8.1f µs  g%-5d %s\n", d, m.g, m.msg)
			}
		}
		for _, n := range names {
			if v, ok := got[n]; ok {
				vals[n] = append(vals[n], v)
			}
		}
	}
	fmt.Println("from the hand-over, µs (counts: per entry):")
	for _, n := range names {
		p25, p50, p75 := pct(vals[n])
		fmt.Printf("  %-13s p25 %8.1f  p50 %8.1f  p75 %8.1f\n", n, p25, p50, p75)
	}
}

// turnaround prints how long after a connection's flush its next request
// was read.
func turnaround(marks []mark) {
	flushed := map[trace.GoID]trace.Time{}
	var ds []float64
	for _, m := range marks {
		switch m.msg {
		case "flushed":
			flushed[m.g] = m.t
		case "read":
			if t, ok := flushed[m.g]; ok {
				ds = append(ds, us(m.t.Sub(t)))
				delete(flushed, m.g)
			}
		}
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		fmt.Printf("turnaround, flush → next read, µs: p10 %.1f  p50 %.1f  p90 %.1f  (n %d)\n",
			ds[len(ds)/10], ds[len(ds)/2], ds[len(ds)*9/10], len(ds))
	}
}

func syscalls(calls []syscall) {
	by := map[string][]float64{}
	for _, c := range calls {
		by[c.site] = append(by[c.site], us(c.d))
	}
	sites := make([]string, 0, len(by))
	for s := range by {
		sites = append(sites, s)
	}
	slices.Sort(sites)
	fmt.Println("system calls by site, µs:")
	for _, s := range sites {
		v := by[s]
		slices.Sort(v)
		fmt.Printf("  %-62s n %7d  p50 %7.1f  p90 %7.1f\n", s, len(v), v[len(v)/2], v[len(v)*9/10])
	}
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func pct(v []float64) (p25, p50, p75 float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	slices.Sort(v)
	return v[len(v)/4], v[len(v)/2], v[len(v)*3/4]
}
