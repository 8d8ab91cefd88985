package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"raftset/cluster"
	"raftset/fsm"
)

const recoverUsage = `usage: raftset recover --dir DIR [--shard N[,N...]] [--meta] [--node-id ID] [--peers id=raft-addr,...]

For a cluster that lost its quorum for good. Run it on a STOPPED survivor:
it rewrites the node's Raft configuration so that it starts as a cluster of
--peers (every one a voter; default: this node alone at its Raft address),
keeping every log entry the node had, committed or not. Start the node as
before, then add new nodes with --join. Never run it while the old cluster
may still have a quorum: two clusters would accept writes.

A sharded process (cluster-enabled yes, shard-map) holds one Raft group per
shard and, on the metadata group's voters, that group's too: name the ones
that lost their quorum with --shard N[,N...] (shards of DIR) and --meta
(the metadata group, which holds the cluster map), either or both. Once the
process runs again, bring the map in line with RAFT.SHARD REMOVEREPLICA N
<lost node> for each lost member, then add replicas (RAFT.SHARD ADDREPLICA,
raftset cluster rebalance --replicas); docs/operations.md, Recover.
`

func runRecover(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftset recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage); fs.PrintDefaults() }
	dir := fs.String("dir", "", "the stopped node's data directory")
	id := fs.String("node-id", "", "the node's id (default: the one kept in DIR/node-id)")
	peers := fs.String("peers", "", "members of the recovered cluster, id=raft-addr,... (this node among them)")
	shard := fs.String("shard", "", "on a sharded process, the shards to recover (ids, comma-separated)")
	meta := fs.Bool("meta", false, "on a sharded process, recover the metadata group (this node must be one of its voters)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if err := recoverNode(*dir, *id, *peers, *shard, *meta, stdout); err != nil {
		fmt.Fprintf(stderr, "raftset recover: %v\n", err)
		return 1
	}
	return 0
}

// raftGroup is a Raft group of a process's directory that recover rewrites.
type raftGroup struct {
	name  string // as printed: "node n1", "node n1, shard 2", "node n1, metadata group"
	label string // before its errors: "shard 2: ", "metadata group: ", none for an unsharded node
	dir   string
	next  string // what the operator does once it is rewritten
}

func recoverNode(dir, id, peerList, shard string, meta bool, stdout io.Writer) error {
	kept, err := os.ReadFile(filepath.Join(dir, "node-id"))
	switch {
	case err == nil && id != "" && strings.TrimSpace(string(kept)) != id:
		return fmt.Errorf("--node-id %q differs from %q kept in %s", id, strings.TrimSpace(string(kept)), filepath.Join(dir, "node-id"))
	case err == nil:
		id = strings.TrimSpace(string(kept))
	case id == "":
		return fmt.Errorf("no node id: %v (give --node-id)", err)
	}
	peers, err := ParsePeers(peerList)
	if err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	if len(peers) > 0 && !slices.ContainsFunc(peers, func(p cluster.Peer) bool { return p.ID == id }) {
		// Checked before any group is rewritten: with --shard and --meta a
		// refusal of the second would leave the first done.
		return fmt.Errorf("--peers must include this node, %s", id)
	}
	groups, hint, err := groupsToRecover(dir, id, shard, meta)
	if err != nil {
		return err
	}
	for _, g := range groups {
		old, now, err := cluster.Recover(cluster.RecoverOptions{
			DataDir: g.dir, NodeID: id, Peers: peers, FSM: fsm.New(fsm.Config{}),
		})
		if err != nil {
			return fmt.Errorf("%s%w", g.label, err)
		}
		fmt.Fprintf(stdout, "%s: configuration was %s\n%s: configuration is now %s (every entry kept); %s\n",
			g.name, old, g.name, now, g.next)
	}
	if hint != "" {
		fmt.Fprintln(stdout, hint)
	}
	return nil
}

// groupsToRecover are the groups of dir that --shard and --meta name, and
// a hint to print after them. Without either, dir must not be a sharded
// process's (its other groups would be left as they are, silently).
func groupsToRecover(dir, id, shard string, meta bool) ([]raftGroup, string, error) {
	shards, hasMeta, err := cluster.GroupsIn(dir)
	if err != nil {
		return nil, "", err
	}
	// Shard 0 is dir itself, so a process holding it alone looks like an
	// unsharded one, and is recovered as one.
	sharded := hasMeta || slices.ContainsFunc(shards, func(s uint32) bool { return s != 0 })
	if shard == "" && !meta {
		if sharded {
			return nil, "", fmt.Errorf("%s is a sharded process's directory (%s): name the group that lost its quorum with --shard N or --meta",
				dir, describeGroups(shards, hasMeta))
		}
		return []raftGroup{{name: "node " + id, dir: dir, next: "start the node, then --join new ones"}}, "", nil
	}
	var out []raftGroup
	var hint string
	var ids []string
	if shard != "" {
		ids = strings.Split(shard, ",")
	}
	for _, f := range ids {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil || n >= uint64(cluster.MetaGroup) {
			return nil, "", fmt.Errorf("--shard %q is not a shard id", f)
		}
		if n != 0 && !sharded {
			return nil, "", fmt.Errorf("%s is not a sharded process's directory (%s): recover it without --shard", dir, describeGroups(shards, hasMeta))
		}
		if !slices.Contains(shards, uint32(n)) {
			return nil, "", fmt.Errorf("%s holds no shard %d (%s)", dir, n, describeGroups(shards, hasMeta))
		}
		if slices.ContainsFunc(out, func(g raftGroup) bool { return g.dir == cluster.ShardDir(dir, uint32(n)) }) {
			continue
		}
		out = append(out, raftGroup{name: fmt.Sprintf("node %s, shard %d", id, n), label: fmt.Sprintf("shard %d: ", n), dir: cluster.ShardDir(dir, uint32(n)),
			next: fmt.Sprintf("start the process, then RAFT.SHARD REMOVEREPLICA %d <node> for each lost member and add replicas", n)})
		if hasMeta && !meta {
			hint = "node " + id + " is also a voter of the metadata group: if that group lost its majority too (map changes fail for good), run raftset recover --dir " + dir + " --meta before starting the process"
		}
	}
	if meta {
		if !hasMeta {
			return nil, "", fmt.Errorf("%s holds no metadata group (%s): recover it on one of its voters, the processes of the shard-map directive's first shard or those the map's meta line names (RAFT.SHARD MAP)", dir, describeGroups(shards, hasMeta))
		}
		out = append(out, raftGroup{name: fmt.Sprintf("node %s, metadata group", id), label: "metadata group: ", dir: cluster.MetaDir(dir),
			next: "start the process: map changes work again"})
	}
	return out, hint, nil
}

// describeGroups says which groups a directory holds, as "shards 0, 2 and
// the metadata group".
func describeGroups(shards []uint32, meta bool) string {
	var ids []string
	for _, s := range shards {
		ids = append(ids, strconv.FormatUint(uint64(s), 10))
	}
	var d string
	switch len(ids) {
	case 0:
		d = "no shard"
	case 1:
		d = "shard " + ids[0]
	default:
		d = "shards " + strings.Join(ids, ", ")
	}
	if meta {
		d += " and the metadata group"
	}
	return d
}
