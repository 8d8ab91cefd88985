package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"raftset/cluster"
	"raftset/internal/respwire"
)

// raftset cluster: builds a sharded cluster's configuration (create) and
// drives its map through RAFT.SHARD commands that any node takes
// (move-slots, rebalance, add-shard, remove-shard, add-node, remove-node,
// add-meta, remove-meta;
// docs/sharding.md).
const clusterUsage = `usage: raftset cluster create --shards S --replicas R [--out DIR] ID@HOST:PORT[,RAFTHOST:RAFTPORT] ...
       raftset cluster move-slots [--addr host:port] [--password P] [--timeout 10m] FIRST LAST SHARD [FIRST LAST SHARD ...]
       raftset cluster move-slots --abort [--addr host:port] [--password P] [--timeout 10m] [FIRST LAST]
       raftset cluster rebalance [--leaders | --replicas] [--dry-run] [--parallel N] [--addr host:port] [--password P] [--timeout 10m]
       raftset cluster add-shard [--id N] [--addr host:port] [--password P] [--timeout 10m] NODE-ID ...
       raftset cluster remove-shard [--dry-run] [--addr host:port] [--password P] [--timeout 10m] ID
       raftset cluster add-node [--addr host:port] [--password P] [--timeout 10m] ID@HOST:PORT[,RAFTHOST:RAFTPORT]
       raftset cluster remove-node [--dry-run] [--addr host:port] [--password P] [--timeout 10m] ID
       raftset cluster add-meta [--addr host:port] [--password P] [--timeout 10m] ID
       raftset cluster remove-meta [--addr host:port] [--password P] [--timeout 10m] ID

create lays out a new cluster of S shards with R replicas each on the nodes
given (client address; Raft address, default the client port + 10000):
slots split evenly into S contiguous ranges, no two replicas of a shard on
one node, replica counts and preferred leaders (each shard's first member)
even across the nodes. It prints the directives every node needs (peers,
shard-map, cluster-enabled), or with --out writes DIR/ID.conf per node
(node-id, bind, port, raft-addr, dir ID-data, and those), to start as
"raftset DIR/ID.conf".

move-slots moves hash slots FIRST..LAST (all in one shard) to shard SHARD
while clients keep writing: RAFT.SHARD MOVESLOTS, run by the metadata
group's leader (any node forwards it). Clients get -TRYAGAIN for the moving
slots only, then -MOVED to the new shard. -TRYAGAIN answers (no metadata
leader yet) are retried until --timeout. A move that failed half way (a
node died, the timeout passed) is completed by running the same command
again; a range that overlaps it cannot move until it is, or until --abort
undid it. Several ranges (three numbers each) move at the same time, as
do moves run by separate commands: any number of disjoint ranges may be
moving at once, from and to any shards.

--abort undoes the move in progress (RAFT.SHARD ABORT), or with FIRST LAST
the move of exactly that range (needed when several are in progress): the
slots stay in their shard, writable again, and the other shard drops what
it imported. It is refused once the move has flipped the slots to the
other shard (clients may have written there): such a move can only be
completed. An abort that failed half way is finished by running it again;
with no such move in progress it does nothing.

rebalance evens out the shards' slot counts (they end up differing by at
most 1): it reads the map (RAFT.SHARD MAP), completes the moves in
progress, and runs the moves that even it out through MOVESLOTS, --parallel
of them at a time (default 2; 1 runs them one after another),
printing each; --dry-run prints the plan only. With --leaders it instead
spreads the shards' leaderships so that each process leads a fair share
(RAFT.SHARD BALANCE-LEADERS), printing each transfer. With --replicas it
instead evens out the number of replicas per node (they end up differing by
at most 1, never two replicas of a shard on one node), moving one replica
at a time: RAFT.SHARD ADDREPLICA to the emptiest node (answered once the new
replica is a voter), then REMOVEREPLICA from the fullest, printing each. It
never moves a node's home shard (the map's: its lowest id unless the map
names another), and works over the nodes the map names, those add-node
recorded included.

add-shard adds a shard that owns no slot, with the nodes named (ids of
running nodes, in peers) as its replicas, the first its preferred leader:
RAFT.SHARD ADDSHARD, run by the metadata group's leader. Its members start
it when they see the new map; it answers once the shard has a leader.
Then rebalance gives it its share of the slots. With --id N (the next
shard id: one past the highest in RAFT.SHARD MAP and its removed-shard
lines) it is safe to run again after a lost reply: a repeat finds shard N
with the same nodes and adds nothing. Without it, a CLUSTERDOWN reply means
it may have added the shard: look in the map before running it again.

remove-shard removes a shard that owns no slot any more (move-slots or
rebalance moved them off) from the map: RAFT.SHARD REMOVESHARD, run by the
metadata group's leader. Its members close their replicas when they see
the new map; their directories (shards/ID in each member's data
directory) stay for you to delete. Refused: a shard that still owns a
slot, one a slot move in progress involves, the only shard, the first
shard of the map the cluster was created with (processes started with
shard-map find the metadata group through its members), and a node's
home shard while that node holds other replicas. --dry-run runs those checks only. A shard removed already
is reported so.

add-node records a new node in the cluster map (RAFT.SHARD ADDNODE, run by
the metadata group's leader): its id, client address and Raft address
(default the client port + 10000), which every process looks up after its
peers. Start the node first or after, holding no replica: the same
cluster-enabled, peers and shard-map directives as the others, its own
node-id, port and raft-addr (docs/sharding.md, Adding a node); then
rebalance --replicas gives it its share. An id or address another node
has is refused; the same record again does nothing.

remove-node takes a node out of the cluster to decommission its machine:
it moves each of its replicas to the node with the fewest that holds none
of that shard (ADDREPLICA, then REMOVEREPLICA, which hands a shard's
leadership over first when the node leads it; its home shard last), then
removes it from the map (RAFT.SHARD REMOVENODE), then evens out the
replica counts of the nodes left as rebalance --replicas does, printing
each step; --dry-run prints the plan only. Refused before anything moves:
an unknown node, and a voter of the metadata group (run remove-meta
first); and when no other node can take a replica. A removed node
holds no replica and no other process lists it; stop its process (its
directory can be deleted). Running it again after a failure resumes; for
a node removed already it only evens out the rest.

add-meta makes a node (one the map names, or add-node recorded) a voter of
the metadata group, which holds the cluster map (RAFT.SHARD ADDMETA, run by
the group's leader): it joins as a non-voter, its process starts the
group's replica in its directory's meta, and it answers once the node is a
voter. remove-meta takes a voter out of the group (RAFT.SHARD REMOVEMETA;
the leader hands its leadership over first when it is the one removed):
its process closes the replica, the directory stays. The group's only
voter is not removed. Both print the voters the map then names. They are
how the group grows back after "raftset recover --meta", and how a voter
is made removable by remove-node (docs/operations.md).

Environment: RAFTSET_CLUSTER_PASSWORD (default --password, for a node with
requirepass).
`

func runCluster(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "move-slots":
			return runMoveSlots(args[1:], stdout, stderr)
		case "create":
			return runCreate(args[1:], stdout, stderr)
		case "rebalance":
			return runRebalance(args[1:], stdout, stderr)
		case "add-shard":
			return runAddShard(args[1:], stdout, stderr)
		case "remove-shard":
			return runRemoveShard(args[1:], stdout, stderr)
		case "add-node":
			return runAddNode(args[1:], stdout, stderr)
		case "remove-node":
			return runRemoveNode(args[1:], stdout, stderr)
		case "add-meta":
			return runMeta("add-meta", true, args[1:], stdout, stderr)
		case "remove-meta":
			return runMeta("remove-meta", false, args[1:], stdout, stderr)
		}
	}
	fmt.Fprint(stderr, clusterUsage)
	if len(args) > 0 && (args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
		return 0
	}
	return 2
}

// adminFlags are the flags of the subcommands that talk to a node.
type adminFlags struct {
	addr, password *string
	timeout        *time.Duration
}

func newClusterFlags(name string, stderr io.Writer) (*flag.FlagSet, adminFlags) {
	fs := flag.NewFlagSet("raftset cluster "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, clusterUsage) }
	return fs, adminFlags{
		addr:     fs.String("addr", "127.0.0.1:6379", "RESP address of any node"),
		password: fs.String("password", os.Getenv("RAFTSET_CLUSTER_PASSWORD"), "AUTH with this password first"),
		timeout:  fs.Duration("timeout", 10*time.Minute, "give up waiting after this long (a move may go on; run it again)"),
	}
}

// parseFlags is fs.Parse with the exit code of a bad command line: 0 for
// -h, 2 otherwise, -1 when parsing succeeded.
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return -1
}

func runMoveSlots(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("move-slots", stderr)
	abort := fs.Bool("abort", false, "undo the move in progress instead (before its flip)")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if *abort {
		return runAbortMove(fs, af, stdout, stderr)
	}
	if fs.NArg() == 0 || fs.NArg()%3 != 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	var plan []cluster.SlotMovePlan
	for i, a := range fs.Args() {
		v, err := strconv.ParseUint(a, 10, 32)
		if err != nil {
			fmt.Fprintf(stderr, "raftset cluster move-slots: %q is not a slot or shard number\n", a)
			return 2
		}
		switch i % 3 {
		case 0:
			plan = append(plan, cluster.SlotMovePlan{First: int(v)})
		case 1:
			plan[len(plan)-1].Last = int(v)
		case 2:
			plan[len(plan)-1].To = uint32(v)
		}
	}
	if len(plan) > 1 {
		return runAdminFunc("move-slots", af, stderr, func(ac *adminConn) error {
			m, err := shardMap(ac)
			if err != nil {
				return err
			}
			for i := range plan {
				plan[i].From = m.ShardOf(plan[i].First)
			}
			return runMoves(ac, stdout, plan, "moved", len(plan))
		})
	}
	return runAdmin("move-slots", af, stdout, stderr, func(r respwire.Reply) string {
		return fmt.Sprintf("slots %s-%s moved to shard %s (%s)", fs.Arg(0), fs.Arg(1), fs.Arg(2), r.Str)
	}, "RAFT.SHARD", "MOVESLOTS", fs.Arg(0), fs.Arg(1), fs.Arg(2))
}

// runAbortMove is move-slots --abort.
func runAbortMove(fs *flag.FlagSet, af adminFlags, stdout, stderr io.Writer) int {
	if fs.NArg() != 0 && fs.NArg() != 2 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	if fs.NArg() == 2 {
		return runAdmin("move-slots --abort", af, stdout, stderr, func(respwire.Reply) string {
			return fmt.Sprintf("no move of slots %s-%s in progress: any was aborted", fs.Arg(0), fs.Arg(1))
		}, "RAFT.SHARD", "ABORT", fs.Arg(0), fs.Arg(1))
	}
	return runAdmin("move-slots --abort", af, stdout, stderr, func(respwire.Reply) string {
		return "no slot move in progress: any was aborted"
	}, "RAFT.SHARD", "ABORT")
}

// runAdmin sends one RAFT.SHARD command to the node of af (again while
// it answers TRYAGAIN) and prints done's line for its reply, or the error
// as "raftset cluster NAME: ADDR: ERR".
func runAdmin(name string, af adminFlags, stdout, stderr io.Writer, done func(respwire.Reply) string, cmd ...string) int {
	ctx, cancel := context.WithTimeout(context.Background(), *af.timeout)
	defer cancel()
	ac, err := dialAdmin(ctx, *af.addr, *af.password)
	if err == nil {
		defer ac.close()
		var r respwire.Reply
		if r, err = ac.callRetrying(cmd...); err == nil {
			fmt.Fprintln(stdout, done(r))
			return 0
		}
	}
	fmt.Fprintf(stderr, "raftset cluster %s: %s: %v\n", name, *af.addr, err)
	return 1
}

// adminConn is a connection to a node for RAFT.SHARD commands.
type adminConn struct {
	ctx context.Context
	cl  *respwire.Client
	// addr and password dial another connection to the same node
	// (another), for commands sent at the same time.
	addr, password string
}

func dialAdmin(ctx context.Context, addr, password string) (*adminConn, error) {
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	cl, err := respwire.DialContext(ctx, addr, respwire.DialOptions{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	ac := &adminConn{ctx: ctx, cl: cl, addr: addr, password: password}
	if password != "" {
		if _, err := ac.call("AUTH", password); err != nil {
			cl.Close()
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return ac, nil
}

func (ac *adminConn) close() { ac.cl.Close() }

// another is a new connection to ac's node: a connection carries one
// command at a time.
func (ac *adminConn) another() (*adminConn, error) { return dialAdmin(ac.ctx, ac.addr, ac.password) }

// call sends one command; an error reply is the error.
func (ac *adminConn) call(args ...string) (respwire.Reply, error) {
	return ac.cl.CallParsed(ac.ctx, args...)
}

// callRetrying is call, repeated while the answer is TRYAGAIN (nothing was
// done yet: no reachable metadata leader, an election) until the context
// ends.
func (ac *adminConn) callRetrying(args ...string) (respwire.Reply, error) {
	for {
		r, err := ac.call(args...)
		if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
			return r, err
		}
		select {
		case <-ac.ctx.Done():
			return respwire.Reply{}, fmt.Errorf("%w (last answer: %v)", ac.ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func runAddShard(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("add-shard", stderr)
	id := fs.String("id", "", "the id the new shard gets (the next one), which makes a repeat add nothing")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	cmd := []string{"RAFT.SHARD", "ADDSHARD"}
	if *id != "" {
		cmd = append(cmd, "ID", *id)
	}
	return runAdmin("add-shard", af, stdout, stderr, func(r respwire.Reply) string {
		return fmt.Sprintf("added shard %s on %s", r.Str, strings.Join(fs.Args(), ","))
	}, append(cmd, fs.Args()...)...)
}

func runAddNode(args []string, stdout, stderr io.Writer) int {
	fs, af := newClusterFlags("add-node", stderr)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	n, err := parseCreateNode(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "raftset cluster add-node: %v\n", err)
		return 2
	}
	return runAdminFunc("add-node", af, stderr, func(ac *adminConn) error {
		if _, err := ac.callRetrying("RAFT.SHARD", "ADDNODE", n.id, n.addr, n.raft); err != nil {
			return err
		}
		// A rebalance --replicas sent to this node next counts the new one.
		if err := waitMap(ac, "node "+n.id, func(m *cluster.ShardMap) bool {
			_, ok := m.Nodes[n.id]
			return ok
		}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added node %s (client %s, raft %s)\n", n.id, n.addr, n.raft)
		return nil
	})
}

// runAdminFunc dials the node of af and runs f on the connection, printing
// its error as "raftset cluster NAME: ADDR: ERR".
func runAdminFunc(name string, af adminFlags, stderr io.Writer, f func(*adminConn) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), *af.timeout)
	defer cancel()
	ac, err := dialAdmin(ctx, *af.addr, *af.password)
	if err == nil {
		defer ac.close()
		err = f(ac)
	}
	if err != nil {
		fmt.Fprintf(stderr, "raftset cluster %s: %s: %v\n", name, *af.addr, err)
		return 1
	}
	return 0
}
