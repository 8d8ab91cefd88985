package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/testutil"
	"raftset/resp"
)

// Multi-node tests: real state machines on in-memory Raft transports, each
// node with a RESP front end on loopback, so followers forward to the
// leader's client address as in production.

// respStore adapts *Node to resp.Store.
type respStore struct{ *Node }

func (s respStore) Info() []resp.InfoSection {
	in := s.Node.Info()
	out := make([]resp.InfoSection, len(in))
	for i, sec := range in {
		out[i] = resp.InfoSection{Name: sec.Name, Fields: sec.Fields}
	}
	return out
}

// member is one node of a served cluster.
type member struct {
	id    string
	cfg   Config
	node  *Node
	fsm   *fsm.FSM
	trans *raft.InmemTransport
	ln    net.Listener
	srv   *resp.Server
	done  chan struct{}
}

// servedCluster is a set of members on connected InmemTransports.
type servedCluster struct {
	t       *testing.T
	mu      sync.Mutex
	members []*member
	// wrap, when set, wraps a starting member's state machine.
	wrap func(id string, f *fsm.FSM) stateMachine
	// transport, when set, wraps a starting member's transport.
	transport func(tr *raft.InmemTransport) raft.Transport
}

// newServedCluster starts size voters bootstrapped from one peer list, on
// disk in dirs when dirs is set.
func newServedCluster(t *testing.T, size int, tweak func(*Config)) *servedCluster {
	t.Helper()
	c := &servedCluster{t: t}
	c.startVoters(size, tweak)
	return c
}

// startVoters starts size voters bootstrapped from one peer list.
func (c *servedCluster) startVoters(size int, tweak func(*Config)) {
	c.t.Helper()
	var peers []Peer
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, Peer{ID: id, Addr: id})
	}
	for i := range size {
		cfg := clusterConfig(c.t, peers[i].ID)
		cfg.Peers = peers
		if tweak != nil {
			tweak(&cfg)
		}
		c.start(cfg)
	}
}

// clusterConfig is fastConfig with timeouts that survive -race on a loaded
// two-core machine: at 50 ms, heartbeats from a busy leader miss and the
// cluster churns through elections that the tests do not expect.
func clusterConfig(t *testing.T, id string) Config {
	cfg := fastConfig(t, id)
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 150 * time.Millisecond
	return cfg
}

// start starts a member with cfg (its Raft address is its id) and connects
// its transport both ways with every running member.
func (c *servedCluster) start(cfg Config) *member {
	t := c.t
	t.Helper()
	addr := cfg.ClientAddr // a restart keeps its address
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	_, tr := raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
	c.mu.Lock()
	for _, o := range c.members {
		if o.trans != nil {
			tr.Connect(raft.ServerAddress(o.id), o.trans)
			o.trans.Connect(raft.ServerAddress(cfg.NodeID), tr)
		}
	}
	c.mu.Unlock()
	cfg.Transport = tr
	if c.transport != nil {
		cfg.Transport = c.transport(tr)
	}
	cfg.ClientAddr = ln.Addr().String()
	f := fsm.New(fsm.Config{Logger: cfg.Logger})
	n, err := c.newNode(cfg, f)
	if err != nil {
		ln.Close()
		t.Fatalf("New %s: %v", cfg.NodeID, err)
	}
	m := &member{id: cfg.NodeID, cfg: cfg, node: n, fsm: f, trans: tr, ln: ln, done: make(chan struct{})}
	m.srv = resp.NewServer(resp.Config{
		Logger:      cfg.Logger.Named("resp"),
		RequirePass: cfg.Password,
		NodeSecret:  NodeSecret(cfg.ClusterSecret, cfg.Password),
	}, respStore{n})
	// As cmd/raftset does: the node's +switch-master goes out through the
	// front end's PUBLISH.
	n.SetPublish(m.srv.Publish)
	go func() { defer close(m.done); m.srv.Serve(ln) }()
	t.Cleanup(m.stop)
	c.mu.Lock()
	replaced := false
	for i, o := range c.members {
		if o.id == m.id {
			c.members[i], replaced = m, true
		}
	}
	if !replaced {
		c.members = append(c.members, m)
	}
	c.mu.Unlock()
	return m
}

var stopMu sync.Mutex

// stop closes the member's front end and node.
func (m *member) stop() {
	stopMu.Lock()
	defer stopMu.Unlock()
	if m.srv == nil {
		return
	}
	m.srv.Close()
	<-m.done
	m.node.Close()
	m.srv = nil
}

// leader waits until every running member agrees on one leader that has
// published its client address everywhere, and returns it.
func (c *servedCluster) leader() *member {
	c.t.Helper()
	var l *member
	testutil.WaitFor(c.t, 10*time.Second, "an agreed leader with a known client address", func() bool {
		l = nil
		var lid string
		for _, m := range c.members {
			if m.srv == nil {
				continue
			}
			id, addr := m.node.leaderClient()
			if id == "" || addr == "" || (lid != "" && id != lid) {
				return false
			}
			lid = id
		}
		for _, m := range c.members {
			if m.id == lid && m.srv != nil && m.node.IsLeader() {
				l = m
			}
		}
		return l != nil
	})

	return l
}

// published waits until every running member knows every running
// member's client address.
func (c *servedCluster) published() {
	c.t.Helper()
	testutil.WaitFor(c.t, 10*time.Second, "every client address published everywhere", func() bool {
		for _, m := range c.members {
			for _, o := range c.members {
				if m.srv != nil && o.srv != nil && m.node.ClientAddr(o.id) != o.cfg.ClientAddr {
					return false
				}
			}
		}
		return true
	})

}

func (c *servedCluster) followers(l *member) []*member {
	var out []*member
	for _, m := range c.members {
		if m != l && m.srv != nil {
			out = append(out, m)
		}
	}
	return out
}

// converged waits until every running member has applied as far as the
// leader and has the same digest.
func (c *servedCluster) converged(l *member) string {
	c.t.Helper()
	ctx := context.Background()
	want := string(l.node.Admin(ctx, args("debug", "digest")))
	for _, m := range c.followers(l) {
		testutil.WaitFor(c.t, 10*time.Second, m.id+" to converge", func() bool {
			return string(m.node.Read(ctx, args("debug", "digest"), true)) == want
		})

	}
	return want
}

func write1(t *testing.T, n *Node, a ...string) string {
	t.Helper()
	return string(n.Write(context.Background(), []command.Op{cmd(a...)})[0])
}

func TestFollowerForwardsWrites(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	ctx := context.Background()
	for i, f := range c.followers(l) {
		if got := write1(t, f.node, "sadd", "s", fmt.Sprint(i), "x"); got != fmt.Sprintf(":%d\r\n", 2-i) {
			t.Fatalf("SADD through follower %s = %q", f.id, got)
		}
		if got := write1(t, f.node, "get", "s"); !strings.HasPrefix(got, "-WRONGTYPE") && !strings.HasPrefix(got, "-ERR") {
			t.Logf("GET s through %s = %q", f.id, got)
		}
	}
	// A transaction forwarded as one op stays atomic, and a pipeline of
	// ops gets its replies in order.
	f := c.followers(l)[0]
	tx := command.Op{Kind: command.OpTx, Tx: &command.Tx{Ops: []command.Op{
		cmd("sadd", "t", "a"), cmd("srem", "s", "x"), cmd("sadd", "t", "b"),
	}}}
	got := f.node.Write(ctx, []command.Op{cmd("sadd", "u", "1"), tx, cmd("sadd", "u", "1")})
	if len(got) != 3 || string(got[0]) != ":1\r\n" || string(got[1]) != "*3\r\n:1\r\n:1\r\n:1\r\n" || string(got[2]) != ":0\r\n" {
		t.Fatalf("forwarded pipeline = %q", got)
	}
	// Syntax errors come back as the leader's Prepare gives them.
	if got := write1(t, f.node, "expire", "s", "notanumber"); !strings.HasPrefix(got, "-ERR") {
		t.Errorf("forwarded bad EXPIRE = %q", got)
	}
	if got := string(l.node.Read(ctx, args("smembers", "t"), false)); got != "*2\r\n$1\r\na\r\n$1\r\nb\r\n" && got != "*2\r\n$1\r\nb\r\n$1\r\na\r\n" {
		t.Errorf("leader SMEMBERS t = %q", got)
	}
	if v := infoField(f.node, "Raft", "raft_forwarded_write_ops"); v == "0" || v == "" {
		t.Errorf("raft_forwarded_write_ops = %q", v)
	}
	c.converged(l)
}

// A follower's linearizable read sees every write acknowledged before it
// started, with no waiting by the test.
func TestFollowerLinearizableReads(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	ctx := context.Background()
	for i := range 50 {
		m := fmt.Sprint(i)
		if got := write1(t, l.node, "sadd", "s", m); got != ":1\r\n" {
			t.Fatalf("SADD = %q", got)
		}
		for _, f := range c.followers(l) {
			if got := string(f.node.Read(ctx, args("sismember", "s", m), false)); got != ":1\r\n" {
				t.Fatalf("follower %s SISMEMBER s %s right after the ack = %q", f.id, m, got)
			}
		}
	}
	f := c.followers(l)[0]
	out := f.node.ReadBatch(ctx, [][][]byte{args("scard", "s"), args("sismember", "s", "49")}, false)
	if string(out[0]) != ":50\r\n" || string(out[1]) != ":1\r\n" {
		t.Errorf("follower ReadBatch = %q", out)
	}
	if _, reply := f.node.Watch(ctx, args("s")); reply != nil {
		t.Errorf("follower Watch = %q", reply)
	}
}

func TestRoleInfoAndSentinel(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	ctx := context.Background()
	host, port, _ := net.SplitHostPort(l.cfg.ClientAddr)
	for _, m := range c.members {
		want := command.AppendBulkString(command.AppendBulkString(command.AppendArray(nil, 2), host), port)
		testutil.WaitFor(t, 5*time.Second, "SENTINEL on "+m.id, func() bool {
			return string(m.node.Admin(ctx, args("sentinel", "get-master-addr-by-name", "any"))) == string(want)
		})

		if got := string(m.node.Admin(ctx, args("sentinel", "replicas", "any"))); !strings.HasPrefix(got, "*2\r\n") {
			t.Errorf("SENTINEL replicas = %q", got)
		}
	}
	for _, f := range c.followers(l) {
		role := string(f.node.Admin(ctx, args("role")))
		if !strings.Contains(role, "$"+fmt.Sprint(len(host))+"\r\n"+host+"\r\n:"+port+"\r\n") {
			t.Errorf("follower ROLE = %q, want the leader's client address %s", role, l.cfg.ClientAddr)
		}
		if got := infoField(f.node, "Replication", "master_port"); got != port {
			t.Errorf("follower master_port = %q, want %s", got, port)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "every client address in the leader's ROLE", func() bool {
		role := string(l.node.Admin(ctx, args("role")))
		for _, f := range c.followers(l) {
			_, p, _ := net.SplitHostPort(f.cfg.ClientAddr)
			if !strings.Contains(role, p) {
				return false
			}
		}
		return true
	})

	info := string(c.followers(l)[0].node.Admin(ctx, args("raft.info")))
	for _, want := range []string{"role:follower", "leader_id:" + l.id, "suffrage=voter", "client_addr=" + l.cfg.ClientAddr} {
		if !strings.Contains(info, want) {
			t.Errorf("RAFT.INFO lacks %q:\n%s", want, info)
		}
	}
}

func infoField(n *Node, section, field string) string {
	for _, s := range n.Info() {
		if s.Name == section {
			for _, f := range s.Fields {
				if f[0] == field {
					return f[1]
				}
			}
		}
	}
	return ""
}

func TestJoinPromoteRemove(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	ctx := context.Background()
	write1(t, l.node, "sadd", "s", "before")
	// Join through a follower: RAFT.JOIN is relayed to the leader.
	via := c.followers(l)[0]
	cfg := clusterConfig(t, "n4")
	cfg.Bootstrap = false
	cfg.Join = via.cfg.ClientAddr
	n4 := c.start(cfg)
	testutil.WaitFor(t, 10*time.Second, "n4 promoted to voter", func() bool {
		s, ok := l.node.server("n4")
		return ok && s.Suffrage == raft.Voter
	})

	// A membership change can cost an election on a loaded machine: replies
	// that say the command certainly did not run (-TRYAGAIN) are retried.
	if got := untilNotTryAgain(t, func() string { return string(n4.node.Read(ctx, args("smembers", "s"), false)) }); got != "*1\r\n$6\r\nbefore\r\n" {
		t.Errorf("n4 linearizable SMEMBERS = %q", got)
	}
	if got := untilNotTryAgain(t, func() string { return write1(t, n4.node, "sadd", "s", "from-n4") }); got != ":1\r\n" {
		t.Errorf("write through n4 = %q", got)
	}
	l = c.leader()
	c.converged(l)

	// Remove it through another follower.
	if got := untilNotTryAgain(t, func() string {
		return string(c.followers(c.leader())[1].node.Admin(ctx, args("raft.remove", "n4")))
	}); got != "+OK\r\n" {
		t.Fatalf("RAFT.REMOVE n4 = %q", got)
	}
	l = c.leader()
	if _, ok := l.node.server("n4"); ok {
		t.Errorf("n4 still a member after RAFT.REMOVE")
	}
	if got := string(l.node.Admin(ctx, args("raft.remove", "nosuch"))); !strings.HasPrefix(got, "-ERR") {
		t.Errorf("RAFT.REMOVE nosuch = %q", got)
	}
	n4.stop()

	// A node coming back under its id with a new address rejoins.
	cfg5 := clusterConfig(t, "n4")
	cfg5.Bootstrap = false
	cfg5.Join = l.cfg.ClientAddr
	n4b := c.start(cfg5)
	testutil.WaitFor(t, 10*time.Second, "n4 rejoined as voter", func() bool {
		s, ok := l.node.server("n4")
		return ok && s.Suffrage == raft.Voter
	})

	if got := string(n4b.node.Read(ctx, args("smembers", "s"), false)); !strings.Contains(got, "from-n4") {
		t.Errorf("rejoined n4 SMEMBERS = %q", got)
	}
}

// A leader confirms reads on the reader's goroutine only while it is the
// one voter: once a second voter joined, reads go through VerifyLeader again
// (the new voter may elect a leader without it), and they see every write
// acknowledged before them on both paths.
func TestSoleVoterReads(t *testing.T) {
	c := newServedCluster(t, 1, nil)
	l := c.leader()
	ctx := context.Background()
	if !l.node.soleVoter() {
		t.Fatalf("a one-node cluster's leader is not its sole voter")
	}
	readAfterWrite := func(i int) {
		t.Helper()
		if got := untilNotTryAgain(t, func() string { return write1(t, l.node, "sadd", "s", strconv.Itoa(i)) }); got != ":1\r\n" {
			t.Fatalf("SADD s %d = %q", i, got)
		}
		if got, want := string(l.node.Read(ctx, args("scard", "s"), false)), ":"+strconv.Itoa(i+1)+"\r\n"; got != want {
			t.Fatalf("SCARD after %d adds = %q, want %q", i+1, got, want)
		}
	}
	readAfterWrite(0)
	if _, ok := l.node.soloReadIndex(); !ok {
		t.Errorf("a one-node leader ready for reads did not confirm them itself")
	}

	cfg := clusterConfig(t, "n2")
	cfg.Bootstrap = false
	cfg.Join = l.cfg.ClientAddr
	n2 := c.start(cfg)
	testutil.WaitFor(t, 10*time.Second, "n2 promoted to voter", func() bool {
		s, ok := l.node.server("n2")
		return ok && s.Suffrage == raft.Voter
	})
	l = c.leader()
	if l.node.soleVoter() {
		t.Errorf("the leader of two voters takes itself for the sole voter")
	}
	if _, ok := l.node.soloReadIndex(); ok {
		t.Errorf("the leader of two voters confirmed a read without VerifyLeader")
	}
	readAfterWrite(1)

	if got := untilNotTryAgain(t, func() string {
		return string(c.leader().node.Admin(ctx, args("raft.remove", "n2")))
	}); got != "+OK\r\n" {
		t.Fatalf("RAFT.REMOVE n2 = %q", got)
	}
	n2.stop()
	l = c.members[0]
	testutil.WaitFor(t, 10*time.Second, "n1 the sole voter and leader", func() bool {
		return l.node.soleVoter() && l.node.raft.State() == raft.Leader
	})
	readAfterWrite(2)
}

func TestLeadershipTransfer(t *testing.T) {
	c := newServedCluster(t, 3, nil)
	l := c.leader()
	ctx := context.Background()
	write1(t, l.node, "sadd", "s", "a")
	target := c.followers(l)[1]
	// Asked on the other follower: relayed to the leader.
	if got := untilNotTryAgain(t, func() string {
		return string(c.followers(l)[0].node.Admin(ctx, args("raft.transfer", target.id)))
	}); got != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER = %q", got)
	}
	nl := c.leader()
	if nl != target {
		t.Fatalf("leader after transfer = %s, want %s", nl.id, target.id)
	}
	if got := untilNotTryAgain(t, func() string { return write1(t, l.node, "sadd", "s", "b") }); got != ":1\r\n" {
		t.Errorf("write through the old leader = %q", got)
	}
	if got := string(l.node.Read(ctx, args("scard", "s"), false)); got != ":2\r\n" {
		t.Errorf("old leader SCARD = %q", got)
	}
	// Without an id: any other voter.
	if got := string(nl.node.Admin(ctx, args("raft.transfer"))); got != "+OK\r\n" {
		t.Fatalf("RAFT.TRANSFER = %q", got)
	}
	if c.leader() == nl {
		t.Errorf("leadership did not move")
	}
}

func TestSnapshotInstallOnLaggingFollower(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) { cfg.TrailingLogs = 5; cfg.SnapshotThreshold = 1 << 30 })
	l := c.leader()
	ctx := context.Background()
	lag := c.followers(l)[0]
	c.published()
	// Cut lag off.
	lag.trans.DisconnectAll()
	for _, m := range c.followers(lag) {
		m.trans.Disconnect(raft.ServerAddress(lag.id))
	}
	for i := range 200 {
		if got := write1(t, l.node, "sadd", fmt.Sprintf("k%d", i%7), fmt.Sprint(i)); got != ":1\r\n" {
			t.Fatalf("SADD = %q", got)
		}
	}
	// Snapshot (and compact) both connected nodes: whichever leads when
	// lag comes back must send it a snapshot.
	for _, m := range c.followers(lag) {
		if got := string(m.node.Admin(ctx, args("raft.snapshot"))); got != "+OK\r\n" {
			t.Fatalf("RAFT.SNAPSHOT on %s = %q", m.id, got)
		}
	}
	for _, m := range c.followers(lag) {
		lag.trans.Connect(raft.ServerAddress(m.id), m.trans)
		m.trans.Connect(raft.ServerAddress(lag.id), lag.trans)
	}
	c.converged(l)
	// Raft records the installed snapshot just after the state machine
	// restored it.
	testutil.WaitFor(t, 5*time.Second, "the installed snapshot in "+lag.id+"'s Raft stats", func() bool {
		return lag.node.raft.Stats()["last_snapshot_index"] != "0"
	})

	// The node metadata came with the snapshot.
	for _, m := range c.members {
		if got := lag.node.ClientAddr(m.id); got != m.cfg.ClientAddr {
			t.Errorf("after install, client address of %s = %q, want %q", m.id, got, m.cfg.ClientAddr)
		}
	}
}

func TestRestartEveryNode(t *testing.T) {
	c := newServedCluster(t, 3, func(cfg *Config) {
		cfg.InMemory = false
		cfg.DataDir = t.TempDir()
		// fsyncs under -race: timers that tolerate them.
		cfg.HeartbeatTimeout = 300 * time.Millisecond
		cfg.ElectionTimeout = 300 * time.Millisecond
		cfg.LeaderLeaseTimeout = 150 * time.Millisecond
	})
	l := c.leader()
	acked := 0
	for i, f := range c.followers(l) {
		for j := range 30 {
			got := write1(t, f.node, "sadd", "s", fmt.Sprint(i*100+j))
			switch {
			case got == ":1\r\n":
				acked++
			case strings.HasPrefix(got, "-TRYAGAIN"), strings.HasPrefix(got, "-CLUSTERDOWN"):
				// An election under load: not acknowledged.
			default:
				t.Fatalf("SADD = %q", got)
			}
		}
	}
	if acked < 30 {
		t.Fatalf("only %d of 60 writes acknowledged", acked)
	}
	l = c.leader()
	before := c.converged(l)
	card := string(l.node.Read(context.Background(), args("scard", "s"), false))
	// Every node restarts from a snapshot: the leader's first read index
	// then lies below its snapshot floor (serveReadIndex's special case).
	for _, m := range c.members {
		if got := string(m.node.Admin(context.Background(), args("raft.snapshot"))); got != "+OK\r\n" {
			t.Fatalf("RAFT.SNAPSHOT on %s = %q", m.id, got)
		}
	}
	cfgs := []Config{}
	for _, m := range c.members {
		m.stop()
		m.trans = nil
		cfgs = append(cfgs, m.cfg)
	}
	for _, cfg := range cfgs {
		cfg.Transport = nil
		c.start(cfg)
	}
	l = c.leader()
	// Linearizable follower reads right away, before any new write.
	for _, f := range c.followers(l) {
		if got := string(f.node.Read(context.Background(), args("scard", "s"), false)); got != card {
			t.Errorf("%s SCARD s right after restart = %q, want %q", f.id, got, card)
		}
	}
	if after := c.converged(l); after != before {
		t.Errorf("digest after restart %s, before %s", after, before)
	}
	// Writes with an unknown outcome may have been applied too.
	if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(card, ":"))); err != nil || n < acked || n > 60 {
		t.Errorf("SCARD before restart = %q, want %d..60", card, acked)
	}
	for _, f := range c.followers(l) {
		if got := string(f.node.Read(context.Background(), args("scard", "s"), false)); got != card {
			t.Errorf("%s SCARD s after restart = %q, want %q", f.id, got, card)
		}
	}
}

// untilNotTryAgain repeats do while it answers -TRYAGAIN (the command was
// certainly not run: safe to repeat), for at most 10 seconds.
func untilNotTryAgain(t *testing.T, do func() string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := do()
		if !strings.HasPrefix(got, "-TRYAGAIN") || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}
