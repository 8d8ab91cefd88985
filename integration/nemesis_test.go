//go:build jepsen

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// fault is one step of a nemesis schedule, fully determined by the seed:
// wait Wait, then inject Kind on Target for Hold, then heal.
type fault struct {
	Wait   time.Duration `json:"wait"`
	Kind   string        `json:"kind"`   // kill, pause
	Target string        `json:"target"` // "leader" or a node id
	Hold   time.Duration `json:"hold"`
}

// faultKinds: what a schedule may draw from.
var (
	faultsKillPause = []string{"kill-random", "kill-leader", "pause-leader"}
)

// schedule draws faults from kinds until total is filled. The same seed
// gives the same schedule; "leader" is resolved when the fault fires.
func schedule(seed uint64, kinds []string, nodes []string, total time.Duration) []fault {
	r := rand.New(rand.NewPCG(seed, 0x6e656d65))
	var out []fault
	var at time.Duration
	for i := 0; i < 1000; i++ {
		f := fault{Wait: time.Duration(2000+r.IntN(2000)) * time.Millisecond}
		switch kinds[r.IntN(len(kinds))] {
		case "kill-random":
			f.Kind, f.Target = "kill", nodes[r.IntN(len(nodes))]
			f.Hold = time.Duration(1000+r.IntN(3000)) * time.Millisecond
		case "kill-leader":
			f.Kind, f.Target = "kill", "leader"
			f.Hold = time.Duration(1000+r.IntN(3000)) * time.Millisecond
		case "pause-leader":
			// Longer than the election timeout (500 ms default, 1 s before).
			f.Kind, f.Target = "pause", "leader"
			f.Hold = time.Duration(2000+r.IntN(2500)) * time.Millisecond
		}
		if at+f.Wait+f.Hold > total {
			break
		}
		at += f.Wait + f.Hold
		out = append(out, f)
	}
	return out
}

// runNemesis executes sched until it ends or ctx is done, recording each
// action in the history; it heals whatever it broke before returning.
// It returns the number of faults injected.
func runNemesis(ctx context.Context, cl Cluster, rec *recorder, sched []fault, logf func(string, ...any)) int {
	injected := 0
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for _, f := range sched {
		if !sleep(f.Wait) {
			break
		}
		target := f.Target
		if target == "leader" {
			target = cl.Leader(3 * time.Second)
			if target == "" {
				rec.nemesis("skip", "no leader found for "+f.Kind)
				continue
			}
		}
		var err error
		switch f.Kind {
		case "kill":
			err = cl.Kill9(target)
		case "pause":
			err = cl.Pause(target)
		}
		rec.nemesis("start-"+f.Kind, fmt.Sprintf("%s (%s) hold %v err=%v", target, f.Target, f.Hold, err))
		if err != nil {
			logf("nemesis %s %s: %v", f.Kind, target, err)
			continue
		}
		injected++
		sleep(f.Hold) // heal even when ctx is done
		switch f.Kind {
		case "kill":
			err = cl.Restart(target)
		case "pause":
			err = cl.Resume(target)
		}
		rec.nemesis("stop-"+f.Kind, fmt.Sprintf("%s err=%v", target, err))
		if err != nil {
			logf("nemesis heal %s %s: %v", f.Kind, target, err)
		}
	}
	return injected
}

// TestScheduleFromSeed: a seed fully determines the nemesis schedule.
func TestScheduleFromSeed(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	a := schedule(42, faultsKillPause, nodes, 60*time.Second)
	b := schedule(42, faultsKillPause, nodes, 60*time.Second)
	c := schedule(43, faultsKillPause, nodes, 60*time.Second)
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("different seeds, same schedule: %v", a)
	}
	var total time.Duration
	for _, f := range a {
		total += f.Wait + f.Hold
		if f.Kind == "pause" && f.Hold <= time.Second {
			t.Errorf("pause %v not longer than the election timeout", f.Hold)
		}
	}
	if total > 60*time.Second {
		t.Errorf("schedule %v longer than the run", total)
	}
}
