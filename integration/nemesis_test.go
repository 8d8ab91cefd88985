//go:build jepsen

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
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
	// faultMoveSlots moves a small range of slots to another shard while
	// the workloads write (sharded scenarios): RAFT.SHARD MOVESLOTS <first>
	// <last> <to-shard>, sent to a running node. The move stays (no heal):
	// the per-key and set checks then span keys written before, during and
	// after it. Until a move of a set's slot has succeeded, and on every
	// other firing after, the range is drawn around the slot of one of
	// the set workload's keys (moveSlotsArgs' around); the other firings
	// move a random range (the per-key workload's keys).
	faultMoveSlots = "move-slots"
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
		if i == 0 && slices.Contains(kinds, faultMoveSlots) {
			// A row that moves slots moves some in every run, whatever
			// its seed draws: its sharded checks need a move.
			kind = faultMoveSlots
		}
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
		case faultMoveSlots:
			// Pick decides the range (up to 32 slots) and the target shard
			// when the fault fires.
			f.Kind, f.Target, f.Hold = "move-slots", nodes[r.IntN(len(nodes))], ms(1000, 2000)
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
	RemoveTryAgainDone int `json:"remove_tryagain_but_done,omitempty"`
	// Moves counts move-slots faults that moved slots to another shard
	// (+OK); SetSlotMoves those whose range held a set workload key's
	// slot; MovesFinished moves a failed firing left in the map, which
	// the next one completed or aborted before its own.
	Moves        int `json:"moves,omitempty"`
	SetSlotMoves int `json:"set_slot_moves,omitempty"`
	// MovesAborted: moves the driver stopped before their flip
	// (debug-move-fault) that RAFT.SHARD ABORT undid under the workloads.
	MovesAborted int `json:"moves_aborted,omitempty"`
	// ConcurrentMoves: firings whose two moves, of disjoint ranges, ran at
	// the same time and both succeeded.
	ConcurrentMoves int      `json:"concurrent_moves,omitempty"`
	MovesFinished   []string `json:"moves_finished,omitempty"`
	MoveErrors      []string `json:"move_errors,omitempty"`
	Errors          []string `json:"errors,omitempty"`
}

// nemesis runs a schedule against a cluster.
type nemesis struct {
	cl    Cluster
	rec   *recorder
	logf  func(string, ...any)
	stats nemesisStats
	// shards: the scenario's shard count (move-slots picks a target
	// among them); setSlots: the slots of the set workload's keys.
	shards   int
	setSlots []int
	// moveFirings counts move-slots faults fired.
	moveFirings int
	// keeper, when set, keeps cluster time slewing (keepSlewing) between
	// the nemesis' steps, and transfer faults go to the node whose clock
	// is farthest from cluster time; lastChange is when the nemesis last
	// changed the cluster (a sample from before says nothing of it);
	// keepRetry is when the keeper may try again after a refused transfer.
	keeper     *slewWatch
	lastChange time.Time
	keepRetry  time.Time
}

// moveSlotsArgs is the command a move-slots fault sends: a range of up to
// 32 slots, all in the shard owning its first slot in m, and another
// shard to move it to, all from pick; around, when >= 0, is a slot the
// range must hold (a set's).
func moveSlotsArgs(pick uint64, shards int, m slotOwners, around int) []string {
	first := int(pick % 16384)
	last := min(first+int(pick>>14%32), 16383)
	if around >= 0 {
		// Up to 16 slots either side of it.
		first, last = max(around-int(pick%17), 0), min(around+int(pick>>14%17), 16383)
	}
	from := m[first]
	if around >= 0 {
		from = m[around]
	}
	// The range stays in one shard: the driver moves one shard's slots.
	for m[first] != from {
		first++
	}
	for s := first; s <= last; s++ {
		if m[s] != from {
			last = s - 1
			break
		}
	}
	to := (from + 1 + int(pick>>20%uint64(shards-1))) % shards
	return []string{"RAFT.SHARD", "MOVESLOTS", strconv.Itoa(first), strconv.Itoa(last), strconv.Itoa(to)}
}

// slotOwners is a cluster map's shard of every slot.
type slotOwners [16384]int

// clusterMap is RAFT.SHARD MAP of the node at addr: every slot's shard,
// and the moves in progress ("first-last from to epoch flip [abort]": a
// "move" line, or "moving" lines when several run at once).
func clusterMap(addr string) (*slotOwners, []string, error) {
	r := rawCommand(addr, 10*time.Second, "RAFT.SHARD", "MAP")
	if !strings.HasPrefix(r, "$") {
		return nil, nil, fmt.Errorf("RAFT.SHARD MAP on %s: %s", addr, r)
	}
	var m slotOwners
	var moves []string
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(r[1:]), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "move", "moving":
			moves = append(moves, rest)
		case "shard":
			// shard ID:first-last+first-last:members
			parts := strings.Split(rest, ":")
			if len(parts) < 2 {
				return nil, nil, fmt.Errorf("RAFT.SHARD MAP: bad line %q", line)
			}
			id, err := strconv.Atoi(parts[0])
			if err != nil {
				return nil, nil, fmt.Errorf("RAFT.SHARD MAP: bad line %q", line)
			}
			for _, rg := range strings.Split(parts[1], "+") {
				var a, b int
				if _, err := fmt.Sscanf(rg, "%d-%d", &a, &b); err != nil || a < 0 || b > 16383 || a > b {
					return nil, nil, fmt.Errorf("RAFT.SHARD MAP: bad range in %q", line)
				}
				for s := a; s <= b; s++ {
					m[s] = id
				}
				seen += b - a + 1
			}
		}
	}
	if seen != 16384 {
		return nil, nil, fmt.Errorf("RAFT.SHARD MAP covers %d slots: %q", seen, r)
	}
	return &m, moves, nil
}

// finishMove completes or aborts a move a failed firing left in the map
// (no range overlapping it can move until it is): before its flip it is
// aborted (RAFT.SHARD ABORT first last), after it completed.
func (nm *nemesis) finishMove(addr, move string) error {
	var first, last, from, to, epoch, flip int
	if _, err := fmt.Sscanf(move, "%d-%d %d %d %d %d", &first, &last, &from, &to, &epoch, &flip); err != nil {
		return fmt.Errorf("move in the map %q: %w", move, err)
	}
	args, done := []string{"RAFT.SHARD", "MOVESLOTS", strconv.Itoa(first), strconv.Itoa(last), strconv.Itoa(to)}, "completed "
	if flip == 0 {
		// Not flipped: nobody wrote to the range in the target yet, so
		// it can be given back to the source.
		args, done = []string{"RAFT.SHARD", "ABORT", strconv.Itoa(first), strconv.Itoa(last)}, "aborted "
	}
	if r := rawCommand(addr, 60*time.Second, args...); r != "+OK" {
		return fmt.Errorf("%s: %s", strings.Join(args, " "), r)
	}
	nm.stats.MovesFinished = append(nm.stats.MovesFinished, done+move)
	return nil
}

// moveSlots is the move-slots fault on the node at addr. The first firing
// of a run, and about every other one after, also moves a second, random
// range at the same time (several moves at once: each its own driver).
func (nm *nemesis) moveSlots(f fault, addr string) (string, error) {
	m, moves, err := clusterMap(addr)
	for _, mv := range moves {
		if err = nm.finishMove(addr, mv); err != nil {
			break
		}
	}
	if err == nil && len(moves) > 0 {
		m, _, err = clusterMap(addr)
	}
	if err != nil {
		return "", err
	}
	around := -1
	if len(nm.setSlots) > 0 && (nm.stats.SetSlotMoves == 0 || nm.moveFirings%2 == 0) {
		around = nm.setSlots[f.Pick>>40%uint64(len(nm.setSlots))]
	}
	nm.moveFirings++
	ranges := [][]string{moveSlotsArgs(f.Pick, nm.shards, *m, around)}
	if nm.moveFirings == 1 || f.Pick>>50%2 == 1 {
		pick := f.Pick
		for range 8 {
			pick = pick*0x9e3779b97f4a7c15 + 1
			if second := moveSlotsArgs(pick, nm.shards, *m, -1); !rangesOverlap(ranges[0], second) {
				ranges = append(ranges, second)
				break
			}
		}
	}
	results := make([]moveResult, len(ranges))
	var wg sync.WaitGroup
	for i, args := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runMove(addr, args)
		}()
	}
	wg.Wait()
	var descs []string
	var errs []error
	for i, r := range results {
		desc := r.desc
		nm.stats.MovesAborted += r.aborted
		if r.err != nil {
			nm.stats.MoveErrors = append(nm.stats.MoveErrors, r.desc+": "+r.err.Error())
			errs = append(errs, r.err)
			descs = append(descs, desc)
			continue
		}
		nm.stats.Moves++
		first, _ := strconv.Atoi(ranges[i][2])
		last, _ := strconv.Atoi(ranges[i][3])
		if slices.ContainsFunc(nm.setSlots, func(s int) bool { return s >= first && s <= last }) {
			nm.stats.SetSlotMoves++
			desc += " (a set's slot)"
		}
		descs = append(descs, desc)
	}
	if len(ranges) == 2 && len(errs) == 0 {
		nm.stats.ConcurrentMoves++
	}
	return strings.Join(descs, " | at once: "), errors.Join(errs...)
}

// rangesOverlap says whether two MOVESLOTS commands' ranges share a slot.
func rangesOverlap(a, b []string) bool {
	af, _ := strconv.Atoi(a[2])
	al, _ := strconv.Atoi(a[3])
	bf, _ := strconv.Atoi(b[2])
	bl, _ := strconv.Atoi(b[3])
	return af <= bl && bf <= al
}

// moveResult is what one MOVESLOTS of a firing did.
type moveResult struct {
	desc    string
	aborted int // moves stopped before their flip and aborted
	err     error
}

// runMove sends one MOVESLOTS (args) to addr until it is done: again after
// a -TRYAGAIN (not run), and after the driver's deliberate failure before
// the flip (debug-move-fault) once that move is aborted under the
// workloads. It touches no shared state, so moves run side by side.
func runMove(addr string, args []string) moveResult {
	res := moveResult{desc: strings.Join(args, " ")}
	retryUntil := time.Now().Add(10 * time.Second)
	for {
		r := rawCommand(addr, 60*time.Second, args...)
		if r == "+OK" {
			return res
		}
		if strings.HasPrefix(r, "-TRYAGAIN") && time.Now().Before(retryUntil) {
			// Not run (no reachable metadata leader, an election after
			// a fault): ask again, as raftset cluster move-slots does.
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if res.aborted < 3 && strings.Contains(r, "debug-move-fault: failed before flip") {
			// The driver stopped before the flip on purpose (sharded
			// rows run with debug-move-fault flip: once per process):
			// abort the move under the workloads, then move again.
			if a := rawCommand(addr, 60*time.Second, "RAFT.SHARD", "ABORT", args[2], args[3]); a != "+OK" {
				res.err = fmt.Errorf("answered %s, then ABORT %s", r, a)
				return res
			}
			res.aborted++
			res.desc += " (failed before its flip, aborted, run again)"
			continue
		}
		res.err = fmt.Errorf("answered %s", r)
		return res
	}
}

// resolve turns "leader"/"follower" into a node id ("" if there is none).
func (nm *nemesis) resolve(f fault) string {
	switch f.Target {
	case "leader":
		return nm.cl.Leader(3 * time.Second)
	case "follower":
		l := nm.cl.Leader(3 * time.Second)
		fs := nm.liveOthers(l)
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
	case "move-slots":
		if nm.shards < 2 {
			return target, nil, errors.New("move-slots needs a sharded scenario (Shards > 1)")
		}
		desc, err := nm.moveSlots(f, cl.Addr(target))
		if err != nil {
			return target + ": " + desc, nil, fmt.Errorf("%s: %s: %w", target, desc, err)
		}
		return target + ": " + desc, func() error { return nil }, nil
	case "transfer":
		to := nm.liveOthers(target)
		if len(to) == 0 {
			return target, nil, errors.New("no other running node to transfer to")
		}
		next, desc := to[f.Pick%uint64(len(to))], ""
		if nm.keeper != nil {
			// Across clocks: to a node whose clock is cluster time the
			// transfer would stop the slew instead of starting one.
			if far, skew := nm.keeper.farthest(to); far != "" {
				next, desc = far, fmt.Sprintf(" (its clock %v from cluster time)", skew)
			}
		}
		return target + " -> " + next + desc, func() error { return nil }, adminCommand(cl.Addr(target), "RAFT.TRANSFER", next)
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
		deadline := time.Now().Add(d)
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return true
			}
			if nm.keeper != nil {
				left = min(left, slewSamplePeriod)
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(left):
			}
			if nm.keeper != nil && time.Until(deadline) > 0 {
				nm.keepSlewing()
			}
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
		nm.lastChange = time.Now()
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
		nm.lastChange = time.Now()
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

// TestMoveSlotsArgs: a move-slots fault's range lies in one shard, holds
// the set slot it was drawn around, and goes to another shard.
func TestMoveSlotsArgs(t *testing.T) {
	var m slotOwners
	for s := range m {
		m[s] = s * 3 / 16384 // shardArgs(3, ...)'s thirds, near enough
	}
	for _, around := range []int{-1, 0, 5460, 5461, 10923, 16383} {
		for pick := uint64(1); pick < 1<<62; pick = pick*7 + 12345 {
			args := moveSlotsArgs(pick, 3, m, around)
			first, _ := strconv.Atoi(args[2])
			last, _ := strconv.Atoi(args[3])
			to, _ := strconv.Atoi(args[4])
			if first > last || m[first] != m[last] || to == m[first] || to < 0 || to > 2 ||
				(around >= 0 && (first > around || last < around)) {
				t.Fatalf("moveSlotsArgs(%d, 3, around %d) = %v", pick, around, args)
			}
		}
	}
	keys := shardedSetKeys(3, 2)
	for s := range 3 {
		n := 0
		for _, k := range keys {
			if shardOf(k, 3) == s {
				n++
			}
		}
		if n != 2 {
			t.Errorf("shardedSetKeys(3, 2) = %v: %d in shard %d, want 2", keys, n, s)
		}
	}
}
