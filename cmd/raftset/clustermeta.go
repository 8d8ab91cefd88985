package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"raftset/cluster"
)

// raftset cluster add-meta ID / remove-meta ID: RAFT.SHARD ADDMETA and
// REMOVEMETA (docs/sharding.md, The metadata group), then a wait until the
// node asked routes by the map that names the voters, which it prints.

func runMeta(name string, add bool, args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags(name, stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	id := fs.Arg(0)
	if badNodeID(name, id, stderr) {
		return 2
	}
	sub := "REMOVEMETA"
	if add {
		sub = "ADDMETA"
	}
	return runAdminFunc(name, af, stderr, func(ac *adminConn) error {
		if _, err := ac.callRetrying("RAFT.SHARD", sub, id); err != nil {
			return fmt.Errorf("%s %s: %w", sub, id, err)
		}
		var voters []string
		if err := waitMap(ac, "the metadata voters with node "+id+" changed", func(m *cluster.ShardMap) bool {
			voters = m.Meta
			return len(m.Meta) > 0 && slices.Contains(m.Meta, id) == add
		}); err != nil {
			return err
		}
		if add {
			fmt.Fprintf(stdout, "node %s is a voter of the metadata group (voters: %s)\n", id, strings.Join(voters, ","))
		} else {
			fmt.Fprintf(stdout, "node %s left the metadata group (voters: %s): its replica closes within a map refresh, its directory meta stays\n", id, strings.Join(voters, ","))
		}
		return nil
	})
}

// badNodeID refuses, on stderr, a node id that the RAFT.SHARD command
// would refuse (cluster.CheckNodeID), before anything is sent.
func badNodeID(name, id string, stderr io.Writer) bool {
	if cluster.CheckNodeID(id) == nil {
		return false
	}
	fmt.Fprintf(stderr, "raftset cluster %s: bad node id %q (the node's id only, as in RAFT.SHARD MAP)\n", name, id)
	return true
}
