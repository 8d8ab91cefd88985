package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"raftset/cluster"
)

// createNode is one ID@HOST:PORT[,RAFTHOST:RAFTPORT] of raftset cluster
// create.
type createNode struct {
	id, addr, raft string
}

// parseCreateNode reads a node argument; the Raft address defaults to the
// client port + 10000 on the same host (6379 → 16379, the built-in
// defaults' pairing).
func parseCreateNode(arg string) (createNode, error) {
	id, rest, ok := strings.Cut(arg, "@")
	if !ok || id == "" {
		return createNode{}, fmt.Errorf("node %q: want ID@HOST:PORT[,RAFTHOST:RAFTPORT]", arg)
	}
	addr, raftAddr, hasRaft := strings.Cut(rest, ",")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return createNode{}, fmt.Errorf("node %s: client address %q: %w", id, addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return createNode{}, fmt.Errorf("node %s: client port %q", id, port)
	}
	if !hasRaft {
		if p+10000 > 65535 {
			return createNode{}, fmt.Errorf("node %s: client port %d + 10000 is no port: give the Raft address", id, p)
		}
		raftAddr = net.JoinHostPort(host, strconv.Itoa(p+10000))
	} else if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return createNode{}, fmt.Errorf("node %s: Raft address %q: %w", id, raftAddr, err)
	}
	return createNode{id: id, addr: addr, raft: raftAddr}, nil
}

func runCreate(args []string, stdout, stderr io.Writer) int {
	fs, _ := newClusterFlags("create", stderr)
	shards := fs.Int("shards", 0, "number of shards")
	replicas := fs.Int("replicas", 3, "replicas per shard (replication factor)")
	out := fs.String("out", "", "write DIR/ID.conf for each node instead of printing the shared directives")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	var nodes []createNode
	var place []cluster.PlaceNode
	for _, a := range fs.Args() {
		n, err := parseCreateNode(a)
		if err != nil {
			fmt.Fprintf(stderr, "raftset cluster create: %v\n", err)
			return 2
		}
		nodes = append(nodes, n)
		place = append(place, cluster.PlaceNode{ID: n.id, Addr: n.addr})
	}
	m, err := cluster.Place(place, *shards, *replicas)
	if err != nil {
		fmt.Fprintf(stderr, "raftset cluster create: %v\n", err)
		return 2
	}
	peers := make([]string, len(nodes))
	for i, n := range nodes {
		peers[i] = n.id + "=" + n.raft
	}
	shared := fmt.Sprintf("cluster-enabled yes\npeers %s\nshard-map %s\n",
		quoteValue(strings.Join(peers, ",")), quoteValue(m.Directive()))
	header := fmt.Sprintf("# raftset cluster create: %d shards, replication factor %d, %d nodes\n", *shards, *replicas, len(nodes))
	if *out == "" {
		fmt.Fprint(stdout, header+shared)
		fmt.Fprintln(stdout, "# and per node: --node-id ID --port PORT --raft-addr RAFTADDR (--bind, --dir as needed):")
		for _, n := range nodes {
			_, port, _ := net.SplitHostPort(n.addr)
			fmt.Fprintf(stdout, "#   --node-id %s --port %s --raft-addr %s\n", n.id, port, n.raft)
		}
		return 0
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "raftset cluster create: %v\n", err)
		return 1
	}
	for _, n := range nodes {
		host, port, _ := net.SplitHostPort(n.addr)
		text := header + fmt.Sprintf("node-id %s\nbind %s\nport %s\nraft-addr %s\ndir %s\n", quoteValue(n.id),
			quoteValue(host), port, quoteValue(n.raft), quoteValue(n.id+"-data")) + shared
		path := filepath.Join(*out, n.id+".conf")
		if err := writeFileAtomic(path, []byte(text)); err != nil {
			fmt.Fprintf(stderr, "raftset cluster create: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, path)
	}
	return 0
}
