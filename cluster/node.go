package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"raftset/snapshot"
)

// Node is one member of a raftset cluster: the Raft instance, its stores, the
// proposer that is the only caller of raft.Apply, the linearizable read
// barrier and the leader-only expiry sweeper. Its methods are safe for
// concurrent use.
type Node struct {
	cfg  Config
	log  hclog.Logger
	fsm  stateMachine
	raft *raft.Raft
	logs raft.LogStore // LogCache over bolt (or the in-memory store), notifying
	// stores counts and signals the log store's writes (pace).
	stores *storeNotifier
	bolt   *raftboltdb.BoltStore
	// walLog is the log store when it is not bolt (logstore.go); nil else.
	walLog io.Closer
	// walSyncs counts walLog's fsyncs (walsync.go); zero for other stores.
	walSyncs *syncStats
	cache    *logCache // over bolt; nil in memory
	// The bounds of a snapshot for the log's size: cfg.SnapshotLogBytes and
	// cfg.SnapshotLogPercent until CONFIG SET changes them.
	snapLogBytes, snapLogPercent atomic.Int64
	snaps                        raft.SnapshotStore
	opened                       *openedSnapshots // snaps, noting what Raft opens (stalesnap.go)
	sized                        *sizedSnapshots  // below opened, noting the size of what Raft writes (retention.go)
	// raftStarted is set once n.raft is assigned; Raft's goroutines, started
	// inside NewRaft, read n.raft only after seeing it.
	raftStarted atomic.Bool

	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc
	stopCh  chan struct{} // closed by Close, before Raft shuts down
	stall   *stallWatch   // read.go's guard against replies from before a stall
	acks    *freshAcks    // read.go: acknowledgements of requests sent after a round began; nil without the Raft port
	stopped chan struct{} // closed once Raft has shut down
	wg      sync.WaitGroup
	closing sync.Once

	port *RaftPort // the Raft port (transport.go); nil in memory or with Config.Transport
	// ownPort is port when the node opened it (no Config.RaftPort): the node
	// closes it after Raft, which only closes its group's share.
	ownPort *RaftPort
	// heartbeats guards Raft's heartbeat handler on a network transport
	// (heartbeatguard.go): closed before the stores are.
	heartbeats heartbeatGuard
	meta       *metaFSM // the state machine as Raft sees it (meta.go)
	pool       pool     // connections to the leader (rpcconn.go)
	// queries holds connections to every member, for WAIT (wait.go).
	queries pool
	// formats is the leader's view of the log formats members read
	// (formats.go).
	formats formats
	trans   raft.Transport
	// joined is set once RAFT.JOIN through Config.Join succeeded.
	joined atomic.Bool

	w  writer        // write path (propose.go)
	rd reader        // read path (read.go)
	sw switchNotices // +switch-master (switch.go)
	st nodeStats

	obs obsState // lag, readiness, metrics (obs.go)

	activeExpire atomic.Bool
	ev           evictState // maxmemory (evict.go)
	bgsave       atomic.Bool
	saveMu       sync.Mutex // one snapshot request at a time
	importMu     sync.Mutex // one restore at a time (import.go)
	lastSave     atomic.Int64
	started      time.Time
	clock        *clusterClock // cluster time (clock.go)

	// accepted holds what CONFIG SET gave the parameters raftset accepts
	// without effect (save, appendonly), so that CONFIG GET echoes them.
	accepted sync.Map
	// sentinelProbes remembers which members' client ports answered
	// (SENTINEL REPLICAS flags the others s_down).
	sentinelProbes sentinelProbes
}

// nodeStats are the node's own counters, reported by Info.
type nodeStats struct {
	entries           atomic.Uint64 // log entries proposed
	ops               atomic.Uint64 // ops in them
	expired           atomic.Uint64 // keys proposed for active expiry
	readBarriers      atomic.Uint64 // VerifyLeader rounds
	reads             atomic.Uint64 // linearizable reads served
	saves             atomic.Uint64 // snapshots taken on request
	forwarded         atomic.Uint64 // write ops forwarded to the leader
	promotionsRefused atomic.Uint64 // raftset.promote refused for lag (leader)
	peakHeap          atomic.Uint64 // highest heap in use Info has seen
	defragMoved       atomic.Int64  // bytes the defragmenter packed into slabs
	defragCycles      atomic.Uint64 // its full passes
	defragSlabBytes   atomic.Int64  // bytes held in its slabs
	retentionRounds   atomic.Uint64 // log retention checks made (tests wait on them)
	logSizeSnapshots  atomic.Uint64 // snapshots taken for the log's size
}

const (
	raftDBFile   = "raft.db"
	snapshotsDir = "snapshots"
	// Up to logCacheSize entries and logCacheBytes of recent log stay in
	// memory for replication and a follower's apply (logcache.go), and none
	// once the log has been quiet for logCacheIdle. 256 entries cover about
	// a fifth of a second of writes at full speed.
	logCacheSize   = 256
	logCacheBytes  = 4 << 20
	logCacheIdle   = 2 * time.Second
	tcpMaxPool     = 3
	tcpTimeout     = 10 * time.Second
	closeGraceWait = 2 * time.Second
)

// newNode builds and starts a node over any state machine; New is the public
// constructor for *fsm.FSM. The steps: open the log, stable and snapshot
// stores; make the transport; restore the latest snapshot; start Raft
// (bootstrapping a new static cluster); start the node's goroutines.
func newNode(cfg Config, f stateMachine) (_ *Node, err error) {
	if f == nil {
		return nil, errors.New("cluster: nil state machine")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillDefaults()
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.Named("cluster"),
		fsm:     f,
		stopCh:  make(chan struct{}),
		formats: formats{byID: map[string]int{}},
		stopped: make(chan struct{}),
		started: time.Now(),
		clock:   newNodeClock(cfg.ClockOffset),
		stall:   newStallWatch(cfg.HeartbeatTimeout / 2),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.snapLogBytes.Store(cfg.SnapshotLogBytes)
	n.snapLogPercent.Store(int64(cfg.SnapshotLogPercent))
	n.meta = newMetaFSM(f)
	n.pool.leaderOnly = true
	n.pool.timeout = cfg.ApplyTimeout + cfg.BarrierTimeout
	n.queries.timeout = appliedQueryTimeout
	n.activeExpire.Store(true)
	n.ev.wake = make(chan struct{}, 1)
	n.lastSave.Store(n.started.Unix())

	var trans raft.Transport
	defer func() {
		if err != nil {
			n.cancel()
			n.heartbeats.close()
			if n.walLog != nil {
				n.walLog.Close()
			}
			if n.bolt != nil {
				n.bolt.Close()
			}
			if c, ok := trans.(raft.WithClose); ok && cfg.Transport == nil {
				c.Close()
			}
			if n.ownPort != nil {
				n.ownPort.Close()
			}
		}
	}()
	stable, err := n.openStores()
	if err != nil {
		return nil, err
	}
	if trans, err = n.openTransport(); err != nil {
		return nil, err
	}

	// Restore the latest snapshot ourselves, so that a damaged one stops the
	// node instead of Raft silently falling back to an older snapshot whose
	// log suffix was already compacted away.
	floor, err := n.restoreLatest(n.meta)
	if err != nil {
		return nil, err
	}
	n.rd.floor.Store(floor)
	n.startClock()

	if err := n.startRaft(stable, trans); err != nil {
		return nil, err
	}
	n.startLoops()
	return n, nil
}

// openStores opens the log, stable and snapshot stores (in memory, or in
// Config.DataDir) and wraps the log store and snapshot store with the
// node's observers. It returns the stable store, which only Raft uses.
func (n *Node) openStores() (raft.StableStore, error) {
	cfg := &n.cfg
	var stable raft.StableStore
	n.walSyncs = &syncStats{}
	if cfg.InMemory {
		store := raft.NewInmemStore()
		n.logs, stable = store, store
		n.snaps = raft.NewInmemSnapshotStore()
	} else {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("cluster: create data dir: %w", err)
		}
		var err error
		n.bolt, err = raftboltdb.New(raftboltdb.Options{
			Path: filepath.Join(cfg.DataDir, raftDBFile),
			BoltOptions: &bbolt.Options{
				Timeout:        time.Second, // another process holds the file: fail, don't hang
				NoFreelistSync: true,
				FreelistType:   bbolt.FreelistMapType,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: open %s: %w", filepath.Join(cfg.DataDir, raftDBFile), err)
		}
		stable = n.bolt
		var logs raft.LogStore
		if logs, n.walLog, err = openLogStore(cfg.DataDir, cfg.LogStore, n.bolt, cfg.Logger.Named("logstore")); err != nil {
			return nil, err
		}
		if w, ok := logs.(walStore); ok {
			n.walSyncs = w.syncs
		}
		if n.cache, err = newLogCache(logs, logCacheSize, logCacheBytes); err != nil {
			return nil, fmt.Errorf("cluster: log cache: %w", err)
		}
		n.logs = n.cache
		n.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, cfg.Logger.Named("snapshot"))
		if err != nil {
			return nil, fmt.Errorf("cluster: snapshot store: %w", err)
		}
	}
	if cfg.wrapLogStore != nil {
		n.logs = cfg.wrapLogStore(n.logs)
	}
	n.sized = &sizedSnapshots{SnapshotStore: n.snaps}
	n.opened = &openedSnapshots{SnapshotStore: n.sized}
	n.snaps = n.opened
	n.meta.checkRestore = n.refuseStaleRestore
	n.stores = &storeNotifier{LogStore: n.logs, signal: make(chan struct{}, 1)}
	n.logs = n.stores
	return stable, nil
}

// openTransport returns Config.Transport, an in-memory transport, or a TCP
// transport listening on Config.RaftBind.
func (n *Node) openTransport() (raft.Transport, error) {
	cfg := &n.cfg
	switch {
	case cfg.Transport != nil:
		return cfg.Transport, nil
	case cfg.InMemory:
		_, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftAdvertise))
		return trans, nil
	}
	return n.openNetworkTransport()
}

// raftConfig is Raft's configuration for this node.
func (n *Node) raftConfig() (*raft.Config, error) {
	cfg := &n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NoSnapshotRestoreOnStart = true // newNode restored it
	rc.Logger = cfg.Logger.Named("raft")
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("cluster: raft config: %w", err)
	}
	return rc, nil
}

// startRaft starts Raft over the node's stores and, for a static cluster
// (Config.Bootstrap) with no state yet, bootstraps its configuration.
func (n *Node) startRaft(stable raft.StableStore, trans raft.Transport) error {
	rc, err := n.raftConfig()
	if err != nil {
		return err
	}
	var bootstrap bool
	if n.cfg.Bootstrap {
		has, err := raft.HasExistingState(n.logs, stable, n.snaps)
		if err != nil {
			return fmt.Errorf("cluster: inspect raft state: %w", err)
		}
		bootstrap = !has
	}
	n.trans = trans
	n.raft, err = raft.NewRaft(rc, n.meta, n.logs, stable, n.snaps, trans)
	if err != nil {
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	n.raftStarted.Store(true) // publishes n.raft to Raft's own goroutines
	if !bootstrap {
		return nil
	}
	conf := n.bootstrapConfiguration(trans.LocalAddr())
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		n.raft.Shutdown().Error()
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	n.log.Info("bootstrapped cluster", "servers", len(conf.Servers))
	return nil
}

// bootstrapConfiguration is the configuration every node of a static
// cluster bootstraps: the same for all, so this node's entry takes its
// address from Peers when listed there (else self).
func (n *Node) bootstrapConfiguration(self raft.ServerAddress) raft.Configuration {
	for _, p := range n.cfg.Peers {
		if p.ID == n.cfg.NodeID {
			self = raft.ServerAddress(p.Addr)
		}
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.NodeID), Address: self,
	}}}
	for _, p := range n.cfg.Peers {
		if p.ID == n.cfg.NodeID {
			continue
		}
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
		})
	}
	return conf
}

// startLoops starts the write path and the node's background goroutines.
func (n *Node) startLoops() {
	n.w.init(n)
	n.rd.init()
	n.wg.Add(13)
	go n.runStallWatch()
	go n.runClock()
	go n.runFormats()
	go n.runObs()
	go n.runDefrag()
	go n.runLogRetention()
	go n.runProposer()
	go n.runCompleter()
	go n.runReadBarrier()
	go n.runExpiry()
	go n.runEvictor()
	go n.runMembership()
	go n.runSwitchNotices()
}

// restoreLatest restores the newest snapshot into f and returns its index (0
// with no snapshot). Any problem with the newest snapshot is an error that
// names the files, which are left untouched.
func (n *Node) restoreLatest(f stateMachine) (uint64, error) {
	list, err := n.snaps.List()
	if err != nil {
		return 0, fmt.Errorf("cluster: list snapshots: %w", err)
	}
	if !n.cfg.InMemory {
		if err := n.checkSnapshotDirs(list); err != nil {
			return 0, err
		}
	}
	if len(list) == 0 {
		return 0, nil
	}
	latest := list[0]
	where := latest.ID
	if !n.cfg.InMemory {
		where = filepath.Join(n.cfg.DataDir, snapshotsDir, latest.ID)
	}
	meta, rc, err := n.snaps.Open(latest.ID)
	if err != nil {
		return 0, fmt.Errorf("%w: open %s: %v (files left untouched; move that directory away to fall back to an older snapshot, which may lose writes whose log entries were compacted)",
			ErrCorruptSnapshot, where, err)
	}
	defer rc.Close()
	start := time.Now()
	if err := f.Restore(rc); err != nil {
		if errors.Is(err, snapshot.ErrNewerFormat) {
			return 0, fmt.Errorf("cluster: snapshot %s (index %d): %w (files left untouched; run a raftset that reads it)",
				where, meta.Index, err)
		}
		return 0, fmt.Errorf("%w: restore %s (index %d): %v (files left untouched; move that directory away to fall back to an older snapshot, which may lose writes whose log entries were compacted)",
			ErrCorruptSnapshot, where, meta.Index, err)
	}
	n.log.Info("restored snapshot", "id", latest.ID, "index", meta.Index, "term", meta.Term,
		"size", meta.Size, "took", time.Since(start))
	return meta.Index, nil
}

// checkSnapshotDirs refuses a snapshot directory whose metadata the file
// store cannot read and that is newer than the newest listed snapshot (the
// store would skip it silently).
func (n *Node) checkSnapshotDirs(list []*raft.SnapshotMeta) error {
	dir := filepath.Join(n.cfg.DataDir, snapshotsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cluster: read %s: %w", dir, err)
	}
	listed := make(map[string]bool, len(list))
	for _, m := range list {
		listed[m.ID] = true
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasSuffix(name, ".tmp") || listed[name] {
			continue
		}
		if len(list) == 0 || snapshotNewer(name, list[0]) {
			return fmt.Errorf("%w: %s has no readable meta.json (files left untouched)",
				ErrCorruptSnapshot, filepath.Join(dir, name))
		}
	}
	return nil
}

// snapshotNewer reports whether the snapshot directory name (term-index-ms)
// sorts after meta, as the file store orders snapshots.
func snapshotNewer(name string, meta *raft.SnapshotMeta) bool {
	var term, index, ms uint64
	if _, err := fmt.Sscanf(name, "%d-%d-%d", &term, &index, &ms); err != nil {
		return true // unparseable: be safe, it may be the newest
	}
	if term != meta.Term {
		return term > meta.Term
	}
	if index != meta.Index {
		return index > meta.Index
	}
	return name > meta.ID
}

// Close shuts Raft down cleanly and stops every goroutine of the node.
// Queued writes not yet proposed get -TRYAGAIN; proposed ones whose outcome
// Raft does not report get -CLUSTERDOWN. Close is idempotent.
func (n *Node) Close() error {
	var err error
	n.closing.Do(func() {
		close(n.stopCh)
		n.cancel()
		n.pool.close()
		n.queries.close()
		err = n.raft.Shutdown().Error()
		if n.ownPort != nil {
			if cerr := n.ownPort.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		close(n.stopped)
		done := make(chan struct{})
		go func() { n.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGraceWait):
			// Raft drops futures of entries still queued for its FSM
			// goroutine at shutdown; a goroutine waiting on one never
			// returns. Callers were released through n.stopped.
			n.log.Warn("some raft futures were never resolved at shutdown")
		}
		n.heartbeats.close()
		if n.walLog != nil {
			if cerr := n.walLog.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if n.bolt != nil {
			if cerr := n.bolt.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil {
			err = fmt.Errorf("cluster: close: %w", err)
		}
	})
	return err
}

// WaitLeader blocks until a leader is known and, when this node is the
// leader, until it can serve linearizable reads (it has committed an entry
// of its term and applied everything before it), or ctx ends. Startup code
// uses it before its first SAVE or read.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if addr, _ := n.Leader(); addr != "" {
			if n.raft.State() != raft.Leader || n.linearize(ctx) == nil {
				return nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("cluster: wait for a leader: %w", ctx.Err())
		case <-n.stopCh:
			return errors.New("cluster: wait for a leader: node closed")
		}
	}
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// IsLeader reports whether this node is the Raft leader right now (not a
// linearizable check: see Read).
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's Raft address and id, empty if unknown.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// AppliedIndex returns the index of the last command entry the state machine
// applied on this node.
func (n *Node) AppliedIndex() uint64 { return n.fsm.AppliedIndex() }

// isClosing reports whether Close has begun.
func (n *Node) isClosing() bool {
	select {
	case <-n.stopCh:
		return true
	default:
		return false
	}
}
