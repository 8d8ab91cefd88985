package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"raftset/cluster"
	"raftset/fsm"
)

const recoverUsage = `usage: raftset recover --dir DIR [--node-id ID] [--peers id=raft-addr,...]

For a cluster that lost its quorum for good. Run it on a STOPPED survivor:
it rewrites the node's Raft configuration so that it starts as a cluster of
--peers (every one a voter; default: this node alone at its Raft address),
keeping every log entry the node had, committed or not. Start the node as
before, then add new nodes with --join. Never run it while the old cluster
may still have a quorum: two clusters would accept writes.
`

func runRecover(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftset recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsage); fs.PrintDefaults() }
	dir := fs.String("dir", "", "the stopped node's data directory")
	id := fs.String("node-id", "", "the node's id (default: the one kept in DIR/node-id)")
	peers := fs.String("peers", "", "members of the recovered cluster, id=raft-addr,... (this node among them)")
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
	if err := recoverNode(*dir, *id, *peers, stdout); err != nil {
		fmt.Fprintf(stderr, "raftset recover: %v\n", err)
		return 1
	}
	return 0
}

func recoverNode(dir, id, peerList string, stdout io.Writer) error {
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
	old, now, err := cluster.Recover(cluster.RecoverOptions{
		DataDir: dir, NodeID: id, Peers: peers, FSM: fsm.New(fsm.Config{}),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node %s: configuration was %s\nnode %s: configuration is now %s (every entry kept); start the node, then --join new ones\n",
		id, old, id, now)
	return nil
}
