package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"raftset/cluster"
)

// raftset cluster remove-node ID: takes a metadata voter out of the
// metadata group (a replacement added first: RAFT.SHARD REMOVENODE does
// both, DRY-RUN says how), moves every replica off the node
// (cluster.PlanDrain, each move as rebalance --replicas runs it), removes
// it from the map (RAFT.SHARD REMOVENODE), then evens out the replica
// counts of the remaining nodes (docs/sharding.md, Removing a node).

func runRemoveNode(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("remove-node", stderr)
	dry := fs.Bool("dry-run", false, "print the plan only")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	if badNodeID("remove-node", fs.Arg(0), stderr) {
		return 2
	}
	return runAdminFunc("remove-node", af, stderr, func(ac *adminConn) error {
		return removeNode(ac, fs.Arg(0), *dry, stdout)
	})
}

// removeNode drains node, removes it, and evens out the rest. Each step
// starts from the map as the previous one left it, so running it again
// after a failure resumes (a removed node's REMOVENODE answers +OK).
func removeNode(ac *adminConn, node string, dry bool, stdout io.Writer) error {
	// The metadata group's steps first (a voter is replaced, then leaves
	// it), which REMOVENODE runs before anything else: printed as planned.
	meta, err := ac.callRetrying("RAFT.SHARD", "REMOVENODE", node, "DRY-RUN")
	if err != nil {
		return fmt.Errorf("REMOVENODE %s: %w", node, err)
	}
	fmt.Fprint(stdout, meta.Str)
	for {
		m, err := shardMap(ac)
		if err != nil {
			return err
		}
		held := len(m.Hosts(node)) > 0
		if held && !dry {
			// What refuses the node whatever its replicas (unknown, a
			// metadata voter without a replacement) refuses it before
			// anything moves, and a voter leaves the metadata group; a
			// node that still holds replicas is refused for that only.
			// Not in a dry run, which changes nothing: the DRY-RUN
			// above refused what REMOVENODE would.
			if _, err := ac.callRetrying("RAFT.SHARD", "REMOVENODE", node); err == nil {
				break // drained meanwhile by someone else: removed now
			} else if !strings.Contains(err.Error(), "still holds a replica") {
				return fmt.Errorf("REMOVENODE %s: %w", node, err)
			}
		}
		plan, after, err := cluster.PlanDrain(m, node)
		if err != nil {
			return err
		}
		if dry {
			printReplicaMoves(stdout, plan)
			fmt.Fprintf(stdout, "remove node %s\n", node)
			printReplicaPlan(stdout, after, cluster.PlanReplicaMoves(after, nil))
			return nil
		}
		if !held {
			if _, err := ac.callRetrying("RAFT.SHARD", "REMOVENODE", node); err != nil {
				return fmt.Errorf("REMOVENODE %s: %w", node, err)
			}
			break
		}
		for _, p := range plan {
			if err := moveReplica(ac, p, stdout); err != nil {
				return err
			}
		}
	}
	// The rebalance that follows plans without the node.
	if err := waitMap(ac, "node "+node+" removed", func(m *cluster.ShardMap) bool {
		return slices.Contains(m.Removed, node)
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed node %s\n", node)
	if err := rebalanceReplicas(ac, false, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node %s holds no replica and is out of the cluster: stop its process (its directory can be deleted)\n", node)
	return nil
}

// moveReplica runs one planned move: ADDREPLICA (answered once the new
// replica is a voter), REMOVEREPLICA (which hands the shard's leadership
// over first if the donor leads it), then waits until the node asked
// routes by a map with the move done.
func moveReplica(ac *adminConn, p cluster.ReplicaMovePlan, stdout io.Writer) error {
	id := strconv.FormatUint(uint64(p.Shard), 10)
	if _, err := ac.callRetrying("RAFT.SHARD", "ADDREPLICA", id, p.To); err != nil {
		return fmt.Errorf("ADDREPLICA %s %s: %w", id, p.To, err)
	}
	if _, err := ac.callRetrying("RAFT.SHARD", "REMOVEREPLICA", id, p.From); err != nil {
		return fmt.Errorf("REMOVEREPLICA %s %s (after adding %s): %w", id, p.From, p.To, err)
	}
	if err := waitMap(ac, fmt.Sprintf("shard %d's replica on %s, not %s", p.Shard, p.To, p.From), func(m *cluster.ShardMap) bool {
		sh, ok := m.Shard(p.Shard)
		return ok && slices.Contains(sh.Members, p.To) && !slices.Contains(sh.Members, p.From)
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "moved shard %d's replica from %s to %s\n", p.Shard, p.From, p.To)
	return nil
}
