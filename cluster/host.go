package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/fsm"
	"raftset/internal/acl"
	"raftset/internal/command"
)

// Host is a process that holds replicas of several shards
// (docs/sharding.md): one Node per shard it hosts, all on one Raft port
// (group id = shard id) and one client port, in front of which it routes
// each command by its keys' slot through the ShardMap. It has the methods
// of the front end's Store, as Node does.
//
// The shard with the lowest id hosted here is the home shard: keyless
// commands (FLUSHALL, ACL, CONFIG SET of replicated parameters, INFO's
// store sections, WAIT) and the RAFT.* commands run there; RAFT.SHARD id
// ... runs them on another shard's replica. A process started with no
// replica (a node RAFT.SHARD ADDNODE recorded) has no home until its
// first replica starts, which becomes its home whatever its id
// (noreplica.go).
type Host struct {
	self string
	smap atomic.Pointer[ShardMap] // the newest map known (metagroup.go)
	port *RaftPort
	// held are the shards hosted here: those of the shard-map directive
	// from the start, and those a newer map adds with this node as a
	// member (addshard.go), which the map refresh starts. Replaced, never
	// changed, so that commands read it without a lock.
	held atomic.Pointer[heldShards]
	// home is the lowest id's replica at start, or for a process started
	// with none (or drained of all: stopRemovedShards) its first replica;
	// nil until then (noreplica.go). The map records it where it is not
	// the lowest id the map gives the node (homes.go).
	home atomic.Pointer[Node]
	// firstFSM is, on a process started with no replica, the state machine
	// its first replica gets: made at start, so that the front end takes
	// its ACL users (Users) before there is a replica.
	firstFSM *fsm.FSM
	// firstUsers are firstFSM's, kept after the replica took it; or the
	// users of the home a drained process closed (stopRemovedShards).
	firstUsers atomic.Pointer[acl.Registry]
	// publish is the front end's PUBLISH, handed to the home shard's
	// +switch-master notices once there is one.
	publish  atomic.Pointer[func(channel string, message []byte) int]
	newFSM   func(shard uint32) *fsm.FSM
	cfg      Config            // the process's, for shards started later
	raftAddr map[string]string // node id → Raft address (peers)

	// remote caches the leaders of the shards not held here, as their
	// members answer raftset.leader (refreshRemote).
	remoteMu sync.Mutex
	remote   map[uint32]remoteLeader
	pool     pool // connections to those members

	// The metadata group (metagroup.go): meta is this process's replica,
	// nil while it runs none (metavoters.go decides: started and closed
	// under startMu, as the shards).
	bootstrap *ShardMap // the shard-map directive
	meta      atomic.Pointer[Node]
	// metaFirst is the index in metaVoters of the voter a process outside
	// the group asks for the map first (fetchMap).
	metaFirst atomic.Uint32
	// bootChecked: the directive was compared with the replicated
	// bootstrap map (refreshMap's goroutine only).
	bootChecked bool
	log         hclog.Logger
	// moveMu: the slot moves and aborts driven here hold it shared, each
	// for its whole run, and the other map changes (ADDSHARD, ADDNODE,
	// REMOVENODE, replica and voter changes, REMOVESHARD, the leader
	// balancer) exclusively, so that those run between moves as before
	// several moves could run at once (moveslots.go).
	moveMu sync.RWMutex
	// mapStepMu serialises the map changes of the moves driven here (each
	// a read, a change of its own move, a compare-and-set): concurrent
	// drivers take turns instead of failing each other's compare-and-set.
	mapStepMu sync.Mutex
	// driving holds the ranges whose move or abort runs here, each closed
	// when it ends: one driver per move (moveslots.go, lockRange).
	drivingMu sync.Mutex
	driving   map[[2]int]chan struct{}
	// balanceMu: one BALANCE-LEADERS at a time (leaders.go); two at once
	// would chase each other's transfers.
	balanceMu sync.Mutex
	bal       leaderBalance // the automatic balancer (autobalance.go)
	// startMu: one startNewShards at a time (addshard.go), and none once
	// Close began (closing).
	startMu  sync.Mutex
	closing  bool
	movePool pool // calls that may take as long as a move
	// moveFault, set by tests only, fails the driver before a step.
	moveFault atomic.Pointer[func(step string, mv SlotMove) error]
	// beforeMapCAS, set by tests only, runs between a map step's read and
	// its compare-and-set (mapStep): where another driver's change can
	// land and make the compare-and-set fail.
	beforeMapCAS atomic.Pointer[func(step string)]
	stop         chan struct{}
	wg           sync.WaitGroup
}

// remoteLeader is a shard's leader as one of its members knows it.
type remoteLeader struct {
	id, addr string
	term     uint64
}

// remoteRefresh is how often a process asks the members of the shards it
// does not hold who leads them: after a leader change, the redirects it
// gives for those shards go to the old leader, which redirects again,
// for at most this long.
const remoteRefresh = 250 * time.Millisecond

const errCrossSlot = "CROSSSLOT Keys in request don't hash to the same slot"

// replyMapUnknown refuses keyed commands until the replicated map is known:
// the shard-map directive may differ from it (a restart with an edited
// directive), and every shard's state machine starts owning every slot, so
// routing by the directive could write a key into a shard that does not own
// it in the map.
var replyMapUnknown = command.Error("TRYAGAIN the cluster map is not known yet, retry")

// Shard 0 keeps the data directory as it is (an existing single-group
// directory upgrades in place, with no copy); every other shard lives under
// dir/shards/<id>.
const shardsDir = "shards"

// ShardDir is the data directory of shard id under a node's directory.
func ShardDir(dir string, id uint32) string {
	if id == 0 {
		return dir
	}
	return filepath.Join(dir, shardsDir, strconv.FormatUint(uint64(id), 10))
}

// NewHost starts a Node for every shard of m that cfg.NodeID is a member
// of, sharing one Raft port on cfg.RaftBind. cfg is the process's
// configuration: each shard's copy gets its own DataDir (ShardDir), its
// group id, and as Peers the shard's members with their addresses from
// cfg.Peers. newFSM makes each shard's state machine.
func NewHost(cfg Config, m *ShardMap, newFSM func(shard uint32) *fsm.FSM) (_ *Host, err error) {
	if cfg.Join != "" {
		return nil, errors.New("cluster: a sharded node cannot join (the shard map is static)")
	}
	ids := m.Hosts(cfg.NodeID)
	if len(ids) == 0 && !slices.ContainsFunc(m.Shards[0].Members, func(v string) bool { return m.Addrs[v] != "" }) {
		// A process with no replica learns the map from the metadata
		// voters only (fetchMap), at the client addresses the directive
		// gives them.
		return nil, fmt.Errorf("cluster: node %q is a member of no shard in the shard map, and the map gives no client address of shard %d's members (id@host:port), the metadata voters it would learn the replicated map from", cfg.NodeID, m.Shards[0].ID)
	}
	raftAddr := map[string]string{}
	for _, p := range cfg.Peers {
		raftAddr[p.ID] = p.Addr
	}
	for _, sh := range m.Shards {
		for _, mem := range sh.Members {
			if _, ok := raftAddr[mem]; !ok && mem != cfg.NodeID {
				return nil, fmt.Errorf("cluster: shard %d member %q is not in peers", sh.ID, mem)
			}
		}
	}
	cfg.fillDefaults()
	h := &Host{self: cfg.NodeID, raftAddr: raftAddr, newFSM: newFSM,
		remote: map[uint32]remoteLeader{}, stop: make(chan struct{}), bootstrap: m, log: cfg.Logger.Named("host")}
	// Filled in place below, before anything else reads it.
	nodes := map[uint32]*Node{}
	h.held.Store(&heldShards{nodes: nodes, ids: ids})
	// Epoch 0: the directive names shards and members (CLUSTER replies,
	// remote leaders) but routes no keyed command (replyMapUnknown) until
	// the replicated map, epoch 1 or later, is known; that one wins even
	// when it was bootstrapped from another directive.
	initial := m.clone()
	initial.Epoch = 0
	h.smap.Store(initial)
	h.movePool.timeout = moveCallTimeout
	if step := cfg.MoveFault; step != "" {
		var once atomic.Bool
		f := func(s string, _ SlotMove) error {
			if s == step && once.CompareAndSwap(false, true) {
				return errors.New("debug-move-fault: failed before " + s)
			}
			return nil
		}
		h.moveFault.Store(&f)
	}
	h.pool.timeout = time.Second
	if h.port, err = OpenRaftPort(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	h.cfg = cfg
	if len(ids) == 0 {
		// No shard is known yet: the argument names none.
		h.firstFSM = newFSM(MetaGroup)
		h.firstUsers.Store(h.firstFSM.Users())
	}
	metaStart, metaBoot, err := h.planMeta()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		sh, _ := m.Shard(id)
		n, err := h.startShard(sh)
		if err != nil {
			return nil, err
		}
		nodes[id] = n
	}
	if len(ids) > 0 {
		h.home.Store(nodes[ids[0]])
	}
	if err := h.startMeta(metaStart, metaBoot); err != nil {
		return nil, err
	}
	h.bal.interval.Store(int64(max(cfg.LeaderBalanceInterval, 0)))
	h.wg.Add(2)
	go h.runRemote()
	go h.runLeaderBalance()
	return h, nil
}

// heldShards are the shards a Host holds a replica of.
type heldShards struct {
	nodes map[uint32]*Node
	ids   []uint32 // ascending
}

// startShard starts this process's replica of sh: its directory
// (ShardDir), its group on the shared Raft port, and as Peers its members
// at their Raft addresses (peers, else the map's node records).
func (h *Host) startShard(sh Shard) (*Node, error) {
	sc := h.cfg
	sc.Shard = sh.ID
	sc.RaftPort = h.port
	sc.DataDir = ShardDir(h.cfg.DataDir, sh.ID)
	sc.Logger = h.cfg.Logger.With("shard", sh.ID)
	sc.Peers = nil
	if h.Map().joins(sh.ID, h.self) {
		// Added to a running group (RAFT.SHARD ADDREPLICA): its leader
		// already made this node a non-voter and sends it the log; a
		// bootstrap here would be a second, conflicting configuration.
		sc.Bootstrap = false
	}
	for _, mem := range sh.Members {
		if a, ok := h.raftAddrOf(mem); ok {
			sc.Peers = append(sc.Peers, Peer{ID: mem, Addr: a})
		}
	}
	f := h.firstFSM
	if f == nil {
		f = h.newFSM(sh.ID)
	}
	n, err := New(sc, f)
	if err != nil {
		return nil, fmt.Errorf("cluster: shard %d: %w", sh.ID, err)
	}
	if h.firstFSM != nil || h.Home() == nil {
		// The first replica of a process that holds none (started with
		// none, or drained and given one again) is its home.
		h.firstFSM = nil
		h.setHome(n)
	}
	return n, nil
}

// Close stops every shard's node, then the shared Raft port.
func (h *Host) Close() error {
	if h.stop != nil {
		select {
		case <-h.stop:
		default:
			close(h.stop)
		}
		h.pool.close()     // unblocks a refresh in flight
		h.movePool.close() // and a move's calls
		h.wg.Wait()
		// A driver that added a shard may be starting it: after this,
		// startNewShards starts nothing.
		h.startMu.Lock()
		h.closing = true
		h.startMu.Unlock()
	}
	var errs []error
	if m := h.meta.Load(); m != nil {
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("metadata group: %w", err))
		}
	}
	for _, id := range h.held.Load().ids {
		if n := h.held.Load().nodes[id]; n != nil {
			if err := n.Close(); err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", id, err))
			}
		}
	}
	if h.port != nil {
		if err := h.port.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: close raft port: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Home is the node of the home shard (the lowest id hosted here at
// start, or the first replica of a process that held none: the one the
// map names, homes.go), nil on a process that holds no replica.
func (h *Host) Home() *Node { return h.home.Load() }

// Node returns this process's replica of shard id.
func (h *Host) Node(id uint32) (*Node, bool) {
	n, ok := h.held.Load().nodes[id]
	return n, ok
}

// Map is the shard map commands are routed by.
func (h *Host) Map() *ShardMap { return h.smap.Load() }

// Fatal is closed once any shard's (or the metadata group's) state
// machine stops applying its log.
func (h *Host) Fatal() <-chan struct{} {
	out := make(chan struct{})
	var once sync.Once
	watch := func(n *Node) {
		select {
		case <-n.Fatal():
			once.Do(func() { close(out) })
		case <-n.stopped:
		}
	}
	watched := map[uint32]bool{}
	for id, n := range h.held.Load().nodes {
		watched[id] = true
		go watch(n)
	}
	meta := h.meta.Load()
	if meta != nil {
		go watch(meta)
	}
	// Shards the map adds later (addshard.go) are watched once started.
	go func() {
		t := time.NewTicker(remoteRefresh)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-out:
				return
			case <-t.C:
			}
			for id, n := range h.held.Load().nodes {
				if !watched[id] {
					watched[id] = true
					go watch(n)
				}
			}
			// A metadata replica started (or started again) later.
			if m := h.meta.Load(); m != nil && m != meta {
				meta = m
				go watch(m)
			}
		}
	}()
	return out
}

// FatalErr is the error of the first shard that stopped applying its log.
func (h *Host) FatalErr() error {
	for _, id := range h.held.Load().ids {
		if err := h.held.Load().nodes[id].FatalErr(); err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
	}
	if m := h.meta.Load(); m != nil {
		if err := m.FatalErr(); err != nil {
			return fmt.Errorf("metadata group: %w", err)
		}
	}
	return nil
}

// WaitLeader waits until every hosted shard knows its leader and the
// replicated map is known (keyed commands wait for it).
func (h *Host) WaitLeader(ctx context.Context) error {
	for _, id := range h.held.Load().ids {
		if err := h.held.Load().nodes[id].WaitLeader(ctx); err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for h.Map().Epoch == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster map: %w", ctx.Err())
		case <-t.C:
		}
	}
	if m := h.meta.Load(); m != nil {
		if err := m.FatalErr(); err != nil {
			return fmt.Errorf("metadata group: %w", err)
		}
	}
	return nil
}

// slotRefused is the state machine's refusal of a command on a slot it
// does not own (or that is moving).
const slotRefused = "-TRYAGAIN Multiple keys request during rehashing of slot"
