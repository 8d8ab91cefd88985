package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/cluster"
)

func runRebalance(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("rebalance", stderr)
	leaders := fs.Bool("leaders", false, "spread shard leaderships (RAFT.SHARD BALANCE-LEADERS) instead of slots")
	replicas := fs.Bool("replicas", false, "even out replica counts per node (RAFT.SHARD ADDREPLICA/REMOVEREPLICA) instead of slots")
	dry := fs.Bool("dry-run", false, "print the plan only")
	parallel := fs.Int("parallel", 2, "run up to this many slot moves at once (1: one after another)")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 0 || *leaders && *replicas || *parallel < 1 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	return runAdminFunc("rebalance", af, stderr, func(ac *adminConn) error {
		switch {
		case *leaders:
			return balanceLeaders(ac, *dry, stdout)
		case *replicas:
			return rebalanceReplicas(ac, *dry, stdout)
		default:
			return rebalanceSlots(ac, *dry, *parallel, stdout)
		}
	})
}

func balanceLeaders(ac *adminConn, dry bool, stdout io.Writer) error {
	args := []string{"RAFT.SHARD", "BALANCE-LEADERS"}
	if dry {
		args = append(args, "DRY-RUN")
	}
	r, err := ac.callRetrying(args...)
	if err != nil {
		return err
	}
	if len(r.Elems) == 0 {
		fmt.Fprintln(stdout, "leaders are spread: nothing to move")
	}
	for _, e := range r.Elems {
		fmt.Fprintln(stdout, e.Str)
	}
	return nil
}

// shardMap reads the map the node routes by.
func shardMap(ac *adminConn) (*cluster.ShardMap, error) {
	r, err := ac.callRetrying("RAFT.SHARD", "MAP")
	if err != nil {
		return nil, fmt.Errorf("RAFT.SHARD MAP: %w", err)
	}
	return cluster.DecodeShardMap(r.Str)
}

// waitMap reads the map the node asked routes by until done holds for it
// (a node adopts the driver's map within a refresh), so that what runs
// next (a plan, a count) starts from it; what names the awaited state in
// the error when the context ends first.
func waitMap(ac *adminConn, what string, done func(*cluster.ShardMap) bool) error {
	for {
		m, err := shardMap(ac)
		if err != nil {
			return err
		}
		if done(m) {
			return nil
		}
		select {
		case <-ac.ctx.Done():
			return fmt.Errorf("waiting for the map to show %s: %w", what, ac.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rebalanceSlots runs the moves that even out the shards' slot counts,
// parallel at a time (their ranges are disjoint, each in its donor from
// the start: cluster.PlanSlotMoves): the moves in progress are completed
// first, then the plan of the map as it is then, then the map is read
// again (empty plan: done; another change came meanwhile: planned and run
// again).
func rebalanceSlots(ac *adminConn, dry bool, parallel int, stdout io.Writer) error {
	for {
		m, err := shardMap(ac)
		if err != nil {
			return err
		}
		if len(m.Moves) > 0 {
			var resume []cluster.SlotMovePlan
			for _, mv := range m.Moves {
				if dry {
					fmt.Fprintf(stdout, "a move is in progress: slots %d-%d from shard %d to shard %d (rebalance completes it first)\n",
						mv.First, mv.Last, mv.From, mv.To)
				}
				resume = append(resume, cluster.SlotMovePlan{First: mv.First, Last: mv.Last, From: mv.From, To: mv.To})
			}
			if !dry {
				if err := runMoves(ac, stdout, resume, "completed", parallel); err != nil {
					return err
				}
				continue
			}
		}
		plan := cluster.PlanSlotMoves(m)
		if dry {
			for _, p := range plan {
				fmt.Fprintf(stdout, "move slots %d-%d from shard %d to shard %d\n", p.First, p.Last, p.From, p.To)
			}
			fmt.Fprintf(stdout, "slots per shard: %s\n", slotCounts(m, plan))
			return nil
		}
		if len(plan) == 0 {
			fmt.Fprintf(stdout, "slots per shard: %s\n", slotCounts(m, nil))
			return nil
		}
		// The whole plan: planning again half way could pick other shards
		// to keep the extra slot of an uneven split, and move more.
		if err := runMoves(ac, stdout, plan, "moved", parallel); err != nil {
			return err
		}
	}
}

// runMoves runs the moves of plan, parallel at a time, each on its own
// connection (the driver answers MOVESLOTS once its move is complete), and
// prints each once it and every move planned before it ended, so the
// output reads in plan order whichever finishes first. After a failure it
// starts no other move, lets those running end, and returns every failure.
func runMoves(ac *adminConn, stdout io.Writer, plan []cluster.SlotMovePlan, verb string, parallel int) error {
	if parallel <= 1 || len(plan) == 1 {
		for _, p := range plan {
			if err := runMove(ac, stdout, p, verb); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		mu     sync.Mutex // errs, outs, ended, next
		errs   []error
		outs   = make([]bytes.Buffer, len(plan))
		ended  = make([]bool, len(plan))
		next   int // the first move not printed yet
		wg     sync.WaitGroup
		tokens = make(chan struct{}, parallel)
	)
	for i, p := range plan {
		tokens <- struct{}{}
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-tokens }()
			c, err := ac.another()
			if err == nil {
				defer c.close()
				err = runMove(c, &outs[i], p, verb)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for ended[i] = true; next < len(plan) && ended[next]; next++ {
				_, _ = outs[next].WriteTo(stdout)
			}
		}()
	}
	wg.Wait()
	// After a failure, what ended behind a move that never started.
	for i := range plan {
		if ended[i] && outs[i].Len() > 0 {
			_, _ = outs[i].WriteTo(stdout)
		}
	}
	return errors.Join(errs...)
}

// runMove runs one MOVESLOTS, then waits until the node it asked routes by
// a map with the move done (it adopts the driver's map within a refresh),
// so that the next plan starts from it.
func runMove(ac *adminConn, stdout io.Writer, p cluster.SlotMovePlan, verb string) error {
	first, last, to := strconv.Itoa(p.First), strconv.Itoa(p.Last), strconv.FormatUint(uint64(p.To), 10)
	if _, err := ac.callRetrying("RAFT.SHARD", "MOVESLOTS", first, last, to); err != nil {
		return fmt.Errorf("MOVESLOTS %s %s %s: %w", first, last, to, err)
	}
	if err := waitMap(ac, "slots "+first+"-"+last+" in shard "+to, func(m *cluster.ShardMap) bool {
		_, moving := m.MoveOf(p.First)
		return !moving && m.ShardOf(p.First) == p.To && m.ShardOf(p.Last) == p.To
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s slots %d-%d from shard %d to shard %d\n", verb, p.First, p.Last, p.From, p.To)
	return nil
}

// slotCounts is "id=count ..." for m after plan.
func slotCounts(m *cluster.ShardMap, plan []cluster.SlotMovePlan) string {
	count := map[uint32]int{}
	for _, sh := range m.Shards {
		count[sh.ID] = cluster.SlotCount(sh)
	}
	for _, p := range plan {
		count[p.From] -= p.Last - p.First + 1
		count[p.To] += p.Last - p.First + 1
	}
	parts := make([]string, 0, len(m.Shards))
	for _, sh := range m.Shards {
		parts = append(parts, fmt.Sprintf("%d=%d", sh.ID, count[sh.ID]))
	}
	return strings.Join(parts, " ")
}

// rebalanceReplicas runs the replica moves that even out replica counts
// per node (cluster.PlanReplicaMoves over the map's nodes), one at a time:
// ADDREPLICA (answered once the new replica is a voter), then
// REMOVEREPLICA from the donor; then it reads the map again, to plan anew
// if another change came meanwhile. A failed step stops it with the
// reason; running it again plans from the map as the failure left it (an
// added replica whose donor was not removed yet counts as the donor's
// surplus and is planned away again).
func rebalanceReplicas(ac *adminConn, dry bool, stdout io.Writer) error {
	for {
		m, err := shardMap(ac)
		if err != nil {
			return err
		}
		plan := cluster.PlanReplicaMoves(m, nil)
		if dry || len(plan) == 0 {
			printReplicaPlan(stdout, m, plan)
			return nil
		}
		for _, p := range plan {
			if err := moveReplica(ac, p, stdout); err != nil {
				return err
			}
		}
	}
}

// printReplicaMoves prints replica moves as a plan names them, one a line.
func printReplicaMoves(w io.Writer, moves []cluster.ReplicaMovePlan) {
	for _, p := range moves {
		fmt.Fprintf(w, "move shard %d's replica from %s to %s\n", p.Shard, p.From, p.To)
	}
}

// printReplicaPlan prints the plan of moves that even out m's replica
// counts, then the counts they leave: what rebalance --replicas --dry-run
// prints, and remove-node --dry-run after the drain and the removal that
// lead to m.
func printReplicaPlan(w io.Writer, m *cluster.ShardMap, moves []cluster.ReplicaMovePlan) {
	printReplicaMoves(w, moves)
	fmt.Fprintf(w, "replicas per node: %s\n", replicaCounts(m, moves))
}

// replicaCounts is "node=count ..." for m after plan, by node id: every
// member, and every node record (a node added with none).
func replicaCounts(m *cluster.ShardMap, plan []cluster.ReplicaMovePlan) string {
	count := m.ReplicaCounts()
	nodes := slices.Sorted(maps.Keys(count)) // before the plan: a node it names that m does not is not listed
	for _, p := range plan {
		count[p.From]--
		count[p.To]++
	}
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s=%d", n, count[n]))
	}
	return strings.Join(parts, " ")
}
