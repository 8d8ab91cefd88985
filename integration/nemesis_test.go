//go:build jepsen

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fault is one step of a nemesis schedule, fully determined by the seed:
// wait Wait, then inject Kind on Target for Hold, then heal.
type fault struct {
	Wait   time.Duration `json:"wait"`
	Kind   string        `json:"kind"`           // kill, pause, partition, remove, snapshot
	Target string        `json:"target"`         // "leader", "follower", a node id, or "" (the partition decides)
	Net    string        `json:"net,omitempty"`  // partition family (partition.go), also for remove-isolated
	Wipe   bool          `json:"wipe,omitempty"` // remove: rejoin with an empty data dir
	Pick   uint64        `json:"pick,omitempty"` // random choices made when the fault fires
	Hold   time.Duration `json:"hold"`
}

// Fault families a scenario draws from.
var (
	faultsKillPause = []string{"kill-random", "kill-leader", "pause-leader", "kill-majority"}
	faultsPartition = []string{"partition-majority", "partition-leader", "partition-ring", "partition-oneway"}
	faultsMember    = []string{"remove-leader", "remove-random", "remove-wipe", "remove-isolated", "island"}
	// faultTransfer moves leadership to another running node (RAFT.TRANSFER):
	// with skewed clocks, from one wall clock to another.
	faultTransfer = "transfer"
)

// schedule draws faults from kinds until total is filled. The same seed
// gives the same schedule; "leader" and "follower" are resolved when the
// fault fires.
func schedule(seed uint64, kinds []string, nodes []string, total time.Duration) []fault {
	r := rand.New(rand.NewPCG(seed, 0x6e656d65))
	var out []fault
	var at time.Duration
	ms := func(lo, span int) time.Duration { return time.Duration(lo+r.IntN(span)) * time.Millisecond }
	for i := 0; i < 1000; i++ {
		f := fault{Wait: ms(2000, 2000)}
		kind := kinds[r.IntN(len(kinds))]
		f.Pick = r.Uint64()
		switch kind {
		case "kill-random":
			f.Kind, f.Target, f.Hold = "kill", nodes[r.IntN(len(nodes))], ms(1000, 3000)
		case "kill-leader":
			f.Kind, f.Target, f.Hold = "kill", "leader", ms(1000, 3000)
		case "kill-majority":
			// The leader and enough others for a majority: no quorum until
			// they restart, and every acknowledged write must survive.
			f.Kind, f.Target, f.Hold = "kill-majority", "leader", ms(1000, 3000)
		case "pause-leader":
			// Longer than the election timeout (500 ms default, 1 s before).
			f.Kind, f.Target, f.Hold = "pause", "leader", ms(2000, 2500)
		case "partition-ring":
			f.Kind, f.Net, f.Hold = "partition", strings.TrimPrefix(kind, "partition-"), ms(2000, 4000)
		case "partition-majority", "partition-leader", "partition-oneway":
			f.Kind, f.Target, f.Net, f.Hold = "partition", "leader", strings.TrimPrefix(kind, "partition-"), ms(2000, 4000)
		case "remove-leader":
			f.Kind, f.Target, f.Hold = "remove", "leader", ms(1000, 3000)
		case "remove-random":
			f.Kind, f.Target, f.Hold = "remove", nodes[r.IntN(len(nodes))], ms(1000, 3000)
		case "remove-wipe":
			f.Kind, f.Target, f.Wipe, f.Hold = "remove", nodes[r.IntN(len(nodes))], true, ms(1000, 3000)
		case "remove-isolated":
			// Cut a follower off, remove it while it cannot hear of its
			// removal, heal, and let it come back with its old state.
			f.Kind, f.Target, f.Net, f.Hold = "remove", "follower", netLeader, ms(2000, 3000)
		case "island":
			// Jepsen's island: cut the leader off, then ask it to remove
			// every other node. It cannot commit that without them.
			f.Kind, f.Target, f.Net, f.Hold = "island", "leader", netLeader, ms(2000, 2000)
		case faultTransfer:
			f.Kind, f.Target, f.Hold = "transfer", "leader", ms(500, 1500)
		case "snapshot-catchup":
			// Down long enough for more than --trailing-logs entries.
			f.Kind, f.Target, f.Hold = "snapshot", "follower", ms(3000, 2000)
		default:
			panic("unknown fault kind " + kind)
		}
		if at+f.Wait+f.Hold > total {
			break
		}
		at += f.Wait + f.Hold
		out = append(out, f)
	}
	return out
}

// nemesisStats: what the nemesis did.
type nemesisStats struct {
	Injected int `json:"injected"`
	// SnapshotInstalls counts snapshot-catchup faults after which the
	// restarted node logged that it installed the leader's snapshot.
	SnapshotInstalls int      `json:"snapshot_installs"`
	SnapshotMisses   []string `json:"snapshot_misses,omitempty"`
	// RemoveTryAgainDone counts RAFT.REMOVE calls answered -TRYAGAIN
	// ("not done, retry") whose removal happened anyway.
	RemoveTryAgainDone int      `json:"remove_tryagain_but_done,omitempty"`
	Errors             []string `json:"errors,omitempty"`
}

// nemesis runs a schedule against a cluster.
type nemesis struct {
	cl    Cluster
	rec   *recorder
	logf  func(string, ...any)
	stats nemesisStats
}

// resolve turns "leader"/"follower" into a node id ("" if there is none).
func (nm *nemesis) resolve(f fault) string {
	switch f.Target {
	case "leader":
		return nm.cl.Leader(3 * time.Second)
	case "follower":
		l := nm.cl.Leader(3 * time.Second)
		var fs []string
		for _, id := range nm.cl.Nodes() {
			if id != l && nm.cl.Running(id) && !nm.cl.Paused(id) {
				fs = append(fs, id)
			}
		}
		if l == "" || len(fs) == 0 {
			return ""
		}
		return fs[f.Pick%uint64(len(fs))]
	}
	return f.Target
}

// inject starts f on target and returns how to heal it.
func (nm *nemesis) inject(f fault, target string) (string, func() error, error) {
	cl := nm.cl
	switch f.Kind {
	case "kill":
		return target, func() error { return cl.Restart(target) }, cl.Kill9(target)
	case "kill-majority":
		victims := []string{target}
		others := slices.DeleteFunc(slices.Clone(cl.Nodes()), func(id string) bool { return id == target || !cl.Running(id) })
		for i := 0; len(victims) < len(cl.Nodes())/2+1 && len(others) > 0; i++ {
			k := int((f.Pick + uint64(i)) % uint64(len(others)))
			victims = append(victims, others[k])
			others = slices.Delete(others, k, k+1)
		}
		heal := func() error {
			var errs []error
			for _, id := range victims {
				errs = append(errs, cl.Restart(id))
			}
			return errors.Join(errs...)
		}
		for _, id := range victims {
			if err := cl.Kill9(id); err != nil {
				return strings.Join(victims, ","), heal, err
			}
		}
		return strings.Join(victims, ","), heal, nil
	case "pause":
		return target, func() error { return cl.Resume(target) }, cl.Pause(target)
	case "transfer":
		var to []string
		for _, id := range cl.Nodes() {
			if id != target && cl.Running(id) && !cl.Paused(id) {
				to = append(to, id)
			}
		}
		if len(to) == 0 {
			return target, nil, errors.New("no other running node to transfer to")
		}
		next := to[f.Pick%uint64(len(to))]
		return target + " -> " + next, func() error { return nil }, adminCommand(cl.Addr(target), "RAFT.TRANSFER", next)
	case "partition":
		p, err := buildPartition(f.Net, cl.Nodes(), target, f.Pick)
		if err != nil {
			return "", nil, err
		}
		return p.String(), cl.HealNetwork, cl.Partition(p)
	case "remove":
		mc, ok := cl.(memberCluster)
		if !ok {
			return "", nil, errors.New("this backend does not change membership")
		}
		desc := target
		if f.Net != "" {
			p, err := buildPartition(f.Net, cl.Nodes(), target, f.Pick)
			if err != nil {
				return "", nil, err
			}
			if err := cl.Partition(p); err != nil {
				return "", nil, err
			}
			desc += ", isolated first: " + p.String()
		}
		if f.Wipe {
			desc += ", rejoins with a wiped data dir"
		}
		heal := func() error {
			return errors.Join(cl.HealNetwork(), mc.Rejoin(target, f.Wipe), mc.WaitVoter(target, 30*time.Second))
		}
		err := mc.Remove(target)
		if errors.Is(err, errRemovedDespiteTryAgain) {
			nm.stats.RemoveTryAgainDone++
			nm.rec.nemesis("remove-tryagain-but-done", err.Error())
			err = nil
		}
		if err != nil {
			return desc, nil, errors.Join(err, cl.HealNetwork())
		}
		return desc, heal, nil
	case "island":
		p, err := buildPartition(f.Net, cl.Nodes(), target, f.Pick)
		if err != nil {
			return "", nil, err
		}
		if err := cl.Partition(p); err != nil {
			return "", nil, err
		}
		var others []string
		for _, id := range cl.Nodes() {
			if id != target {
				others = append(others, id)
			}
		}
		replies := make([]string, len(others))
		var wg sync.WaitGroup
		for i, id := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = rawCommand(cl.Addr(target), 3*time.Second, "RAFT.REMOVE", id)
			}()
		}
		wg.Wait()
		for i, id := range others {
			nm.rec.nemesis("island-remove", fmt.Sprintf("%s asked to remove %s: %s", target, id, replies[i]))
			if replies[i] == "+OK" {
				nm.stats.Errors = append(nm.stats.Errors,
					fmt.Sprintf("island: %s, cut off from every peer, acknowledged RAFT.REMOVE %s", target, id))
			}
		}
		heal := func() error {
			errs := []error{cl.HealNetwork()}
			for _, id := range others {
				errs = append(errs, waitVoter(cl, id, 30*time.Second))
			}
			return errors.Join(errs...)
		}
		return p.String() + ", then " + target + " was asked to remove " + strings.Join(others, ","), heal, nil
	case "snapshot":
		if err := cl.Kill9(target); err != nil {
			return target, nil, err
		}
		heal := func() error {
			// Every running node snapshots and compacts its log down to
			// --trailing-logs, so the leader no longer has the entries
			// the restarted node misses and must send its snapshot.
			var errs []error
			for _, id := range cl.Nodes() {
				if id != target && cl.Running(id) && !cl.Paused(id) {
					errs = append(errs, adminCommand(cl.Addr(id), "RAFT.SNAPSHOT"))
				}
			}
			errs = append(errs, cl.Restart(target))
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if waitLogLine(cl, target, "Installed remote snapshot", 20*time.Second) {
				nm.stats.SnapshotInstalls++
				nm.rec.nemesis("snapshot-installed", target)
			} else {
				nm.stats.SnapshotMisses = append(nm.stats.SnapshotMisses, target)
				nm.rec.nemesis("snapshot-not-installed", target)
			}
			return nil
		}
		return target + " down, all others snapshot, then it restarts", heal, nil
	}
	return "", nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// run executes sched until it ends or ctx is done, recording each action
// in the history; it heals whatever it broke before returning.
func (nm *nemesis) run(ctx context.Context, sched []fault) nemesisStats {
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
		target := nm.resolve(f)
		if target == "" && f.Target != "" {
			nm.rec.nemesis("skip", "no "+f.Target+" found for "+f.Kind)
			continue
		}
		desc, heal, err := nm.inject(f, target)
		nm.rec.nemesis("start-"+f.Kind, fmt.Sprintf("%s (%s) hold %v err=%v", desc, f.Target, f.Hold, err))
		if err != nil {
			nm.logf("nemesis %s %s: %v", f.Kind, target, err)
			if heal == nil {
				continue
			}
		}
		nm.stats.Injected++
		sleep(f.Hold) // heal even when ctx is done
		err = heal()
		nm.rec.nemesis("stop-"+f.Kind, fmt.Sprintf("%s err=%v", target, err))
		if err != nil {
			nm.logf("nemesis heal %s %s: %v", f.Kind, target, err)
			nm.stats.Errors = append(nm.stats.Errors, fmt.Sprintf("heal %s %s: %v", f.Kind, target, err))
		}
	}
	return nm.stats
}

// adminCommand sends one command to addr and wants +OK.
func adminCommand(addr string, args ...string) error {
	c, err := dialConn(addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Do(args...)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", args[0], addr, err)
	}
	if r.Kind != '+' {
		return fmt.Errorf("%s on %s: %s", args[0], addr, r.Str)
	}
	return nil
}

// rawCommand sends one command and returns the reply as text ("+OK",
// "-ERR ...", ":1") or the I/O error.
func rawCommand(addr string, timeout time.Duration, args ...string) string {
	c, err := dialConn(addr, timeout)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	r, err := c.Do(args...)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(r.Kind) + r.Str
}

// waitLogLine polls (bounded) until node's log, since its latest start,
// has a line containing s.
func waitLogLine(cl Cluster, node, s string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for i := 0; i < 1000; i++ {
		if l, err := cl.Log(node); err == nil && strings.Contains(sinceLastStart(l), s) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// sinceLastStart cuts a node log to what its latest start wrote.
func sinceLastStart(log string) string {
	if i := strings.LastIndex(log, startMarker); i >= 0 {
		return log[i:]
	}
	return log
}

// TestScheduleFromSeed: a seed fully determines the nemesis schedule.
func TestScheduleFromSeed(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	all := slices.Concat(faultsKillPause, faultsPartition, faultsMember, []string{"snapshot-catchup"})
	a := schedule(42, all, nodes, 60*time.Second)
	b := schedule(42, all, nodes, 60*time.Second)
	c := schedule(43, all, nodes, 60*time.Second)
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
