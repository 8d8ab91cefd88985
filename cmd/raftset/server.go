package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // served only when pprof-addr is set
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/cluster"
	"raftset/fsm"
	"raftset/internal/memlimit"
	"raftset/internal/metrics"
	"raftset/internal/setenc"
	"raftset/resp"
)

// node is a running raftset: state machine, Raft node and RESP server.
type node struct {
	cfg    *Config
	log    hclog.Logger
	fsm    *fsm.FSM // the home shard's with shard-map
	raft   raftNode
	server *resp.Server
	ln     net.Listener
	// shutdown receives the SHUTDOWN command's request to stop, which takes
	// the same path as SIGTERM.
	shutdown chan struct{}
	metrics  *metricsServer // nil unless metrics-addr is set
}

// raftNode is the process's Raft side: one cluster.Node, or with shard-map
// a cluster.Host of several.
type raftNode interface {
	Fatal() <-chan struct{}
	FatalErr() error
	Close() error
}

// serve runs a node until SIGINT, SIGTERM or the SHUTDOWN command, or until
// the node cannot apply the log any more (an entry written by a newer
// raftset, or corrupt), which is an error: the process exits non-zero
// rather than serve a state that no longer follows the cluster.
func serve(cfg *Config, logOut io.Writer) error {
	n, err := start(cfg, logOut)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan error, 1)
	go func() { served <- n.server.Serve(n.ln) }()
	drain := true
	select {
	case s := <-sig:
		n.log.Info("shutting down", "signal", s.String())
	case <-n.shutdown:
		n.log.Info("shutting down", "command", "SHUTDOWN")
	case err := <-served:
		if err != nil && !errors.Is(err, resp.ErrServerClosed) {
			n.log.Error("RESP server stopped", "error", err)
		}
		drain = false
	case <-n.raft.Fatal():
		return n.fatal()
	}
	if d := cfg.ShutdownDrain; drain && d > 0 {
		// Not ready, still serving: a load balancer polling /readyz moves
		// clients away before the port closes on them.
		n.metrics.shuttingDown()
		n.log.Info("draining: /readyz answers shutting down; a second SIGTERM or SHUTDOWN stops now", "shutdown-drain", d)
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case s := <-sig:
			n.log.Info("drain cut short", "signal", s.String())
		case <-n.shutdown:
			n.log.Info("drain cut short", "command", "SHUTDOWN")
		case <-served:
		case <-n.raft.Fatal():
			return n.fatal()
		}
	}
	return n.close()
}

// fatal stops a node that cannot apply the log and returns why.
func (n *node) fatal() error {
	err := n.raft.FatalErr()
	n.log.Error("shutting down: this node cannot apply the replicated log", "error", err)
	_ = n.close()
	return err
}

// start builds and starts a node; the caller serves n.ln with n.server.
func start(cfg *Config, logOut io.Writer) (_ *node, err error) {
	logger := newLogger(cfg, logOut)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	id, err := nodeID(cfg)
	if err != nil {
		return nil, err
	}
	fresh, err := isEmptyDataDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if cfg.Import != "" && !fresh {
		return nil, fmt.Errorf("--import needs a new node: %s already holds Raft state", cfg.Dir)
	}
	f := newFSM(cfg, logger)

	peers, err := ParsePeers(cfg.Peers)
	if err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	var smap *cluster.ShardMap
	if cfg.ShardMap != "" {
		if smap, err = cluster.ParseShardMap(cfg.ShardMap); err != nil {
			return nil, fmt.Errorf("shard-map: %w", err)
		}
	}
	// A sharded node the map names in no shard is one raftset cluster
	// add-node recorded: the others learn its addresses from the map, not
	// from peers (docs/sharding.md, Adding a node).
	added := smap != nil && len(smap.Hosts(id)) == 0
	if len(peers) > 0 && !added && !slices.ContainsFunc(peers, func(p cluster.Peer) bool { return p.ID == id }) {
		return nil, fmt.Errorf("peers: this node's id %q is not in the list (set node-id to one of its ids)", id)
	}

	// Listen for clients first: the client address is published to the
	// other nodes (the TLS port's when port is 0).
	addr := net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port))
	ln, ctls, err := listenClients(cfg, logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = ln.Close()
		}
	}()

	ms, err := startMetrics(cfg, ctls, logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ms.close()
		}
	}()

	cc := cluster.DefaultConfig()
	cc.NodeID = id
	cc.RaftBind = cfg.RaftAddr
	cc.RaftAdvertise = cfg.RaftAdvertiseAddr
	published := ln.Addr()
	if cfg.TLSCluster == "yes" {
		// Peers dial the published address with TLS.
		published = ctls.tlsAddr
	}
	cc.ClientAddr = clientAddr(cfg, published)
	if cc.PeerTLS, cc.ClientTLS, err = ctls.peerTLS(cfg); err != nil {
		return nil, err
	}
	cc.Password = cfg.RequirePass
	cc.ClusterSecret = cfg.ClusterSecret
	// protected-mode guards both doors: clients without a password, and a
	// Raft port without peer authentication (cluster/transport.go).
	cc.ProtectedMode = cfg.ProtectedMode != "no"
	cc.PromoteLag = cfg.PromoteLag
	cc.MasterName = cfg.MasterName
	cc.DataDir = cfg.Dir
	cc.LogStore = cfg.RaftLogStore
	// A joining node never bootstraps: it is added by the cluster.
	cc.Bootstrap = cfg.Join == ""
	cc.Peers = peers
	cc.Join = cfg.Join
	cc.SnapshotThreshold = cfg.SnapshotThreshold
	cc.SnapshotInterval = cfg.SnapshotInterval
	cc.TrailingLogs = cfg.TrailingLogs
	cc.SnapshotLogBytes, cc.TrailingLogBytes = cluster.OffIsNegative(cfg.SnapshotLogBytes), cluster.OffIsNegative(cfg.TrailingLogBytes)
	cc.SnapshotLogPercent = int(cluster.OffIsNegative(int64(cfg.SnapshotLogPercent)))
	cc.HeartbeatTimeout, cc.ElectionTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout
	cc.LeaderLeaseTimeout, cc.CommitTimeout = cfg.LeaderLeaseTimeout, cfg.CommitTimeout
	cc.MaxAppendEntries = cfg.MaxAppendEntries
	cc.Logger = logger
	cc.ClockOffset, cc.AckBeforeCommit = cfg.Debug.ClockOffset, cfg.Debug.AckBeforeCommit
	cc.MoveFault = cfg.Debug.MoveFault
	cc.LeaderBalanceInterval = time.Duration(cfg.LeaderBalanceInterval) * time.Second
	if d := cfg.Debug.active(); d != nil {
		logger.Warn("TEST-ONLY debug flags are on: this node is wrong on purpose", d...)
	}
	var (
		rn *cluster.Node // the home shard's with shard-map
		rs raftNode
		st resp.Store
	)
	var host *cluster.Host
	if smap != nil {
		// f is the home shard's: NewHost asks for it first (the lowest
		// id hosted, or on a node with no replica yet the one its first
		// replica will take).
		first := true
		host, err = cluster.NewHost(cc, smap, func(uint32) *fsm.FSM {
			if first {
				first = false
				return f
			}
			return newFSM(cfg, logger)
		})
		if err != nil {
			return nil, fmt.Errorf("start raft: %w", err)
		}
		rn, rs, st = host.Home(), host, hostStore{host}
	} else {
		if rn, err = cluster.New(cc, f); err != nil {
			return nil, fmt.Errorf("start raft: %w", err)
		}
		rs, st = rn, store{rn}
	}
	defer func() {
		if err != nil {
			_ = rs.Close()
		}
	}()
	if cfg.Import != "" {
		if cfg.ShardMap != "" {
			return nil, errors.New("--import into a sharded node is not supported yet")
		}
		if err := importDump(rn, f.Limits(), cfg, logger); err != nil {
			return nil, err
		}
	}

	shutdown := make(chan struct{}, 1)
	var n *node
	var rewrite func() error
	if cfg.File != "" {
		rewrite = func() error { return n.rewriteConfig() }
	}
	srv := resp.NewServer(resp.Config{
		ConfigRewrite: rewrite,
		Addr:          addr,
		RequirePass:   cfg.RequirePass,
		NodeSecret:    cluster.NodeSecret(cfg.ClusterSecret, cfg.RequirePass),
		ACLFile:       cfg.ACLFile,
		Logger:        logger.Named("resp"),
		Version:       version,
		Mode:          map[bool]string{true: "cluster", false: "standalone"}[cfg.ClusterEnabled == "yes"],
		// Client limits.
		ProtectedModeOff:        cfg.ProtectedMode == "no",
		MaxClients:              cfg.MaxClients,
		IdleTimeout:             time.Duration(cfg.Timeout) * time.Second,
		TCPKeepAlive:            time.Duration(cluster.OffIsNegative(int64(cfg.TCPKeepAlive))) * time.Second,
		ProtoMaxBulkLen:         cfg.ProtoMaxBulkLen,
		ClientQueryBufferLimit:  cfg.ClientQueryBufferLimit,
		ClientOutputBufferLimit: cfg.ClientOutputBufferLimit,
		Shutdown: func() {
			select {
			case shutdown <- struct{}{}:
			default: // already asked
			}
		},
	}, st)
	// The node's events for clients (+switch-master on a leader change) go
	// out through the front end's PUBLISH.
	if host != nil {
		host.SetPublish(srv.Publish) // the home shard's, once there is one
	} else {
		rn.SetPublish(srv.Publish)
	}
	if cfg.PprofAddr != "" {
		go func() {
			// net/http/pprof registers on the default mux.
			logger.Warn("pprof server stopped", "error", http.ListenAndServe(cfg.PprofAddr, nil))
		}()
	}
	srv.SetSlowlog(int64(cfg.SlowlogLogSlowerThan), int64(cfg.SlowlogMaxLen))
	srv.SetLatencyMonitorThreshold(int64(cfg.LatencyMonitorThreshold))
	// /readyz and the node series: a sharded process is ready when every
	// replica it holds is (Host.Ready), and exports the series of each,
	// labelled by shard; one that holds none yet only the process's.
	var mn metrics.Node = rn
	if host != nil {
		mn = host
	}
	if err := ms.register(srv, mn); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	n = &node{cfg: cfg, log: logger, fsm: f, raft: rs, server: srv, ln: ln, shutdown: shutdown, metrics: ms}
	n.registerConfig()
	ctls.register(srv)
	logger.Info("raftset ready", "version", version, "commit", buildCommit(), "node-id", id, "addr", ln.Addr().String(),
		"advertise-addr", cc.ClientAddr, "raft-addr", cfg.RaftAddr, "peers", len(peers), "join", cfg.Join, "dir", cfg.Dir,
		"tls-port", cfg.TLSPort, "tls-cluster", cfg.TLSCluster)
	return n, nil
}

// clientAddr is the client address published to the other nodes:
// advertise-addr, or the listener's address with an unspecified host
// replaced by the Raft advertise (or bind) host, or by 127.0.0.1.
func clientAddr(cfg *Config, ln net.Addr) string {
	if cfg.AdvertiseAddr != "" {
		return cfg.AdvertiseAddr
	}
	host, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return ln.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		for _, a := range []string{cfg.RaftAdvertiseAddr, cfg.RaftAddr} {
			if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
				if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
					host = h
					break
				}
			}
		}
	}
	return net.JoinHostPort(host, port)
}

func (n *node) close() error {
	n.metrics.shuttingDown()
	err := n.server.Close()
	if cerr := n.raft.Close(); cerr != nil && err == nil {
		err = cerr
	}
	n.metrics.close()
	n.log.Info("stopped")
	return err
}

// registerConfig exposes the node's directives to CONFIG GET; the ones that
// can change at run time also to CONFIG SET.
func (n *node) registerConfig() {
	for _, name := range []string{"dir", "node-id", "raft-addr", "log-format", "import",
		"peers", "join", "advertise-addr", "raft-advertise-addr", "promote-lag", "sentinel-master-name",
		"tls-cluster", "tls-cluster-peer-names", "raft-log-store"} {
		name := name
		n.server.RegisterConfig(name, func() string { v, _ := n.cfg.Get(name); return v }, nil)
	}
	// gc-percent answers the directive, as CONFIG REWRITE must write it; the
	// target in force (GOGC's when that is set, until a CONFIG SET) is INFO
	// memory's go_gc_percent.
	n.server.RegisterConfig("gc-percent", func() string { return strconv.Itoa(n.cfg.GCPercent) }, func(v string) error {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			return errors.New("argument must be an integer ≥ 1")
		}
		memlimit.SetPercent(p)
		n.cfg.GCPercent = p
		return nil
	})
	n.server.RegisterConfig("gc-follow-live", func() string { return n.cfg.GCFollowLive }, func(v string) error {
		v = strings.ToLower(v)
		if v != "yes" && v != "no" {
			return errors.New("argument must be 'yes' or 'no'")
		}
		applyGCFollowLive(v)
		n.cfg.GCFollowLive = v
		return nil
	})
	// The balancer runs on a sharded node's Host; a single group stores the
	// value only (CONFIG REWRITE keeps it for a later shard-map).
	n.server.RegisterConfig("cluster-leader-balance-interval", func() string { return strconv.Itoa(n.cfg.LeaderBalanceInterval) }, func(v string) error {
		s, err := strconv.Atoi(v)
		if err != nil || s < 0 {
			return errors.New("argument must be an integer ≥ 0 (seconds; 0: off)")
		}
		if h, ok := n.raft.(*cluster.Host); ok {
			h.SetLeaderBalanceInterval(time.Duration(s) * time.Second)
		}
		n.cfg.LeaderBalanceInterval = s
		return nil
	})
	n.server.RegisterConfig("loglevel", func() string { return n.cfg.LogLevel }, func(v string) error {
		lv, ok := logLevel(v)
		if !ok {
			return errors.New("argument(s) must be one of the following: trace, debug, info, warn, error (or Redis's debug, verbose, notice, warning)")
		}
		n.log.SetLevel(lv)
		n.cfg.LogLevel = strings.ToLower(v)
		return nil
	})
}

func logLevel(v string) (hclog.Level, bool) {
	switch strings.ToLower(v) {
	case "trace":
		return hclog.Trace, true
	case "debug":
		return hclog.Debug, true
	case "info", "verbose", "notice":
		return hclog.Info, true
	case "warn", "warning":
		return hclog.Warn, true
	case "error", "nothing":
		return hclog.Error, true
	}
	return hclog.NoLevel, false
}

func newLogger(cfg *Config, out io.Writer) hclog.Logger {
	lv, _ := logLevel(cfg.LogLevel)
	return hclog.New(&hclog.LoggerOptions{
		Name:            "raftset",
		Level:           lv,
		Output:          out,
		JSONFormat:      cfg.LogFormat == "json",
		IncludeLocation: false,
	})
}

// nodeID returns the configured id, or the one kept in <dir>/node-id,
// generating it on first start: a node's identity must not change with its
// address.
func nodeID(cfg *Config) (string, error) {
	path := filepath.Join(cfg.Dir, "node-id")
	if cfg.NodeID != "" {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != cfg.NodeID {
			return "", fmt.Errorf("node-id %q differs from %q kept in %s", cfg.NodeID, strings.TrimSpace(string(b)), path)
		}
		return cfg.NodeID, os.WriteFile(path, []byte(cfg.NodeID+"\n"), 0o644)
	}
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(r[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

// isEmptyDataDir reports whether the directory holds no Raft state yet.
func isEmptyDataDir(dir string) (bool, error) {
	for _, name := range []string{"raft.db", "snapshots"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return false, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	return true, nil
}

// importDump makes a Redis dump.rdb the node's state, as Redis loads its dump
// at start-up: the dump is read (database 0, Redis's encodings on load,
// expired keys dropped) into a scratch state machine, written back as a
// raftset snapshot, and installed through Raft's user restore, so that the
// keys are part of the replicated log's base and reach every node, now or
// later. Progress is logged for large files.
func importDump(rn *cluster.Node, lim setenc.Limits, cfg *Config, log hclog.Logger) error {
	file, err := os.Open(cfg.Import)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	log.Info("importing Redis dump", "file", cfg.Import, "bytes", st.Size())
	scratch := fsm.New(fsm.Config{Limits: lim, Logger: log})
	pr := &progressReader{r: file, total: st.Size(), log: log, next: time.Now().Add(time.Second)}
	keys, err := scratch.LoadRDB(pr, fsm.LoadOptions{NowMs: time.Now().UnixMilli()})
	if err != nil {
		return fmt.Errorf("import %s: %w", cfg.Import, err)
	}
	tmp, err := os.CreateTemp(cfg.Dir, "import-*.rdb")
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := scratch.WriteRDB(tmp); err != nil {
		return fmt.Errorf("import: write snapshot: %w", err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := rn.Import(ctx, tmp, size); err != nil {
		return err
	}
	log.Info("import done", "file", cfg.Import, "keys", keys)
	return nil
}

type progressReader struct {
	r     io.Reader
	read  int64
	total int64
	log   hclog.Logger
	next  time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read += int64(n)
	if now := time.Now(); now.After(p.next) {
		p.next = now.Add(time.Second)
		p.log.Info("importing", "read-bytes", p.read, "percent", p.read*100/max(p.total, 1))
	}
	return n, err
}

// store adapts *cluster.Node to resp.Store (the packages do not import each
// other; only their INFO section types differ).
type store struct{ *cluster.Node }

func (s store) Info() []resp.InfoSection { return infoSections(s.Node.Info()) }

func infoSections(in []cluster.InfoSection) []resp.InfoSection {
	out := make([]resp.InfoSection, len(in))
	for i, sec := range in {
		out[i] = resp.InfoSection{Name: sec.Name, Fields: sec.Fields}
	}
	return out
}

// hostStore adapts *cluster.Host to resp.Store, as store does a Node.
type hostStore struct{ *cluster.Host }

func (s hostStore) Info() []resp.InfoSection { return infoSections(s.Host.Info()) }

// newFSM is a state machine with the configured encodings and eviction.
// A cluster-enabled node keeps the per-slot key index from the start: built
// on first use, it would hold Apply for ~150 ms per million keys.
func newFSM(cfg *Config, logger hclog.Logger) *fsm.FSM {
	f := fsm.New(fsm.Config{Limits: setenc.Limits{
		MaxIntsetEntries:   cfg.MaxIntsetEntries,
		MaxListpackEntries: cfg.MaxListpackEntries,
		MaxListpackValue:   cfg.MaxListpackValue,
	}, Evict: evictConfig(cfg), Logger: logger})
	if cfg.ClusterEnabled == "yes" {
		f.EnableSlotIndex()
	}
	return f
}

// evictConfig is the node's initial maxmemory settings (replicated from then
// on, like the set-max-* limits).
func evictConfig(cfg *Config) fsm.EvictConfig {
	e := fsm.DefaultEvictConfig()
	e.MaxMemory = cfg.MaxMemory
	if cfg.MaxMemoryPolicy == "" { // a Config not filled from the directive table
		return e
	}
	if p, ok := fsm.ParsePolicy(cfg.MaxMemoryPolicy); ok {
		e.Policy = p
	}
	if cfg.MaxMemorySamples > 0 {
		e.Samples = cfg.MaxMemorySamples
	}
	e.Tenacity = cfg.MaxMemoryTenacity
	return e
}
