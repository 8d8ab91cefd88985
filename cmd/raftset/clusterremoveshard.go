package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"raftset/cluster"
)

// raftset cluster remove-shard ID: RAFT.SHARD REMOVESHARD, once
// rebalance or move-slots moved every slot off the shard
// (docs/sharding.md, Placement). The refusals are the command's, so
// --dry-run sends it with DRY-RUN rather than judging the map here.

func runRemoveShard(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("remove-shard", stderr)
	dry := fs.Bool("dry-run", false, "print what it would do only")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	id, err := strconv.ParseUint(fs.Arg(0), 10, 32)
	if err != nil || id >= uint64(cluster.MetaGroup) {
		fmt.Fprintf(stderr, "raftset cluster remove-shard: %q is not a shard id\n", fs.Arg(0))
		return 2
	}
	return runAdminFunc("remove-shard", af, stderr, func(ac *adminConn) error {
		return removeShard(ac, uint32(id), *dry, stdout)
	})
}

// removeShard removes shard id (or says it would), printing its members,
// whose replicas close and whose directories stay.
func removeShard(ac *adminConn, id uint32, dry bool, stdout io.Writer) error {
	m, err := shardMap(ac)
	if err != nil {
		return err
	}
	if slices.Contains(m.RemovedShards, id) {
		// Removed already (a repeat after a lost reply): what the
		// command answers too, with nothing to wait for.
		fmt.Fprintf(stdout, "shard %d was removed already\n", id)
		return nil
	}
	sh, _ := m.Shard(id) // an unknown shard: REMOVESHARD's refusal says so
	members := strings.Join(sh.Members, ",")
	s := strconv.FormatUint(uint64(id), 10)
	if dry {
		if _, err := ac.callRetrying("RAFT.SHARD", "REMOVESHARD", s, "DRY-RUN"); err != nil {
			return fmt.Errorf("REMOVESHARD %s DRY-RUN: %w", s, err)
		}
		fmt.Fprintf(stdout, "remove shard %d (no slot; replicas on %s)\n", id, members)
		return nil
	}
	if _, err := ac.callRetrying("RAFT.SHARD", "REMOVESHARD", s); err != nil {
		return fmt.Errorf("REMOVESHARD %s: %w", s, err)
	}
	// What runs next against the node (a rebalance, CLUSTER SHARDS) must
	// no longer see the shard.
	removed := func(m *cluster.ShardMap) bool { return slices.Contains(m.RemovedShards, id) }
	if err := waitMap(ac, fmt.Sprintf("shard %d removed", id), removed); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed shard %d: %s close their replicas within a map refresh; then delete shards/%d in their data directories\n", id, members, id)
	return nil
}
