package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Peer is a voting member of a statically bootstrapped cluster.
type Peer struct {
	ID   string // the node's stable id (raft.ServerID)
	Addr string // the node's Raft address, host:port
}

// Config configures a Node. Start from DefaultConfig; cmd/ maps flags onto it.
type Config struct {
	// NodeID is the node's stable identity in the cluster (raft.ServerID).
	// The caller persists it; addresses may change, the id may not.
	NodeID string
	// RaftBind is the host:port the Raft transport listens on.
	RaftBind string
	// RaftAdvertise is the address peers dial; default the address the
	// transport listens on (RaftBind, with the port chosen when it is 0).
	RaftAdvertise string
	// ClientAddr is the RESP address other nodes and clients use to reach
	// this node (host:port). It is published through the log (raftset.node)
	// so that followers can forward to the leader and ROLE, INFO and
	// SENTINEL can name it. Empty: this node never publishes one, and
	// followers cannot forward to it.
	ClientAddr string
	// Password authenticates forwarded commands on the leader's client
	// port (its requirepass; the same on every node).
	Password string
	// ClusterSecret is the secret nodes prove (RAFTSET.AUTH) before they
	// may send each other internal commands; empty derives it from
	// Password (see NodeSecret and auth.go).
	ClusterSecret string
	// PeerTLS, when set, is mutual TLS on the Raft port (tls-cluster yes):
	// peers must present a certificate the cluster's CA signed. Without it,
	// the Raft port admits only peers that prove the node secret (see
	// NodeSecret) in a challenge-response handshake.
	PeerTLS *PeerTLS
	// ClientTLS, when set, is how this node dials other nodes' client
	// addresses (forwarding, read indexes, WAIT, joins): TLS presenting
	// this node's certificate and checking theirs. Set it when the
	// published client addresses are TLS ports (tls-cluster yes, or port 0
	// with tls-port).
	ClientTLS *tls.Config
	// ProtectedMode refuses to serve Raft on a non-loopback address when
	// there is neither PeerTLS nor a node secret: anyone who could reach the
	// port could otherwise become the leader and write. Redis applies the
	// same rule to clients (protected-mode).
	ProtectedMode bool
	// Join is the client address of any member of an existing cluster. A
	// node with an empty store and no Bootstrap asks it (RAFT.JOIN, relayed
	// to the leader) to be added, as a non-voter promoted once caught up.
	Join string

	// MasterName is a master name +switch-master is always published
	// under, besides those Sentinel queries used on this node (which a
	// restart forgets, while a client's subscription comes back by
	// itself). Empty: "mymaster" when no query named one.
	MasterName string

	// PromoteLag is how many entries a joining non-voter may still be
	// behind the leader's applied index when the leader makes it a voter.
	// Default 1000.
	PromoteLag uint64

	// DataDir holds raft.db (the stable store, and the log with
	// LogStoreBolt), wal/ (the log with LogStoreWAL) and snapshots/.
	DataDir string

	// LogStore is where the Raft log is kept: LogStoreBolt or LogStoreWAL;
	// empty: DefaultLogStore. A directory whose log is in the other store
	// is migrated at start (logstore.go).
	LogStore string

	// Bootstrap makes a node whose store is empty bootstrap a cluster of
	// itself plus Peers. Every node of a static cluster may be given the same
	// Peers; a node with existing state ignores it.
	Bootstrap bool
	// Peers are the other voters of a static bootstrap (this node excluded or
	// included; it is deduplicated by id).
	Peers []Peer

	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one. Default 8192.
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks SnapshotThreshold. Default 30s.
	SnapshotInterval time.Duration
	// SnapshotRetain is how many snapshots are kept on disk. Default 2.
	SnapshotRetain int
	// SnapshotLogBytes also triggers a snapshot: once this many bytes of log
	// entries were stored since the last one. Group commit makes entries of
	// a few bytes to hundreds of KiB, so an entry count alone bounds the log
	// (and raft.db, which never shrinks) badly. Default 32 MiB; negative: off.
	SnapshotLogBytes int64
	// SnapshotLogPercent scales SnapshotLogBytes with the data: a snapshot
	// for the log's size waits until the log grew by this percentage of the
	// latest snapshot's size too (the larger of the two bounds wins), as
	// Redis rewrites its AOF once it grew by auto-aof-rewrite-percentage.
	// A snapshot costs time in proportion to the data, so with a fixed
	// bound a large dataset was written out again every few seconds of
	// writes. Default 100; negative: the fixed bound alone.
	SnapshotLogPercent int
	// TrailingLogBytes bounds the log kept after a snapshot in bytes: the
	// node lowers TrailingLogs to this many bytes' worth of recent entries
	// (at their recent average size), never below 64 entries. Default 8 MiB;
	// negative: entries only.
	TrailingLogBytes int64
	// TrailingLogs is how many entries stay in the log after a snapshot, so a
	// slightly lagging follower catches up without a snapshot. Default 10240.
	TrailingLogs uint64

	// Raft timers. The defaults are half of hashicorp/raft's, so that a
	// leader's failure costs about a second (detection is a random 1–2×
	// HeartbeatTimeout) rather than two.
	HeartbeatTimeout   time.Duration // default 500ms
	ElectionTimeout    time.Duration // default 500ms
	LeaderLeaseTimeout time.Duration // default 250ms
	CommitTimeout      time.Duration // default 50ms
	// MaxAppendEntries caps the entries of one AppendEntries RPC (Raft's
	// MaxAppendEntries, 1..1024). Default 64.
	MaxAppendEntries int

	// ApplyTimeout bounds how long a proposal waits to enter Raft's queue;
	// past it the write is refused (-TRYAGAIN: it was not appended).
	// Default 5s.
	ApplyTimeout time.Duration
	// BarrierTimeout bounds the barrier a new leader commits before it serves
	// linearizable reads. Default 10s.
	BarrierTimeout time.Duration

	// MaxEntryBytes caps one log entry (a group of writes). Default
	// raft.SuggestedMaxDataSize (512 KiB); a single command bigger than this
	// is refused.
	MaxEntryBytes int
	// MaxOpBytes caps one command, which then travels alone in its entry
	// when it is bigger than MaxEntryBytes (a large string or member, as
	// Redis accepts up to proto-max-bulk-len). Default 512 MiB + 1 MiB.
	MaxOpBytes int
	// MaxEntryOps caps the number of ops in one log entry. Default 4096.
	MaxEntryOps int
	// MaxInflight caps the entries proposed but not yet applied; the proposer
	// waits past it. Default 64.
	MaxInflight int

	// Logger is the parent logger; the node logs as "cluster" and Raft as
	// "raft". Default: hclog's default logger at Info.
	Logger hclog.Logger

	// InMemory keeps the log, stable store and snapshots in memory and, unless
	// Transport is set, uses an in-memory transport. For tests.
	InMemory bool
	// Transport overrides the Raft transport (tests connect
	// raft.InmemTransports with it). Raft closes it on shutdown.
	Transport raft.Transport
	// RaftPort is a Raft port shared with other groups of the process
	// (OpenRaftPort; its owner closes it); nil: the node opens its own on
	// RaftBind. The node's group on it is Shard.
	RaftPort *RaftPort
	// LeaderBalanceInterval is how long every shard's leadership must
	// have stayed put (and no slot move be under way) before the metadata
	// leader's process moves one leadership towards AssignLeaders' choice
	// (autobalance.go); it is also the least time between two such
	// transfers. Zero: never by itself (RAFT.SHARD BALANCE-LEADERS only).
	// Host.SetLeaderBalanceInterval changes it at run time. Unlike the other
	// tunables, zero is not filled in: cmd/raftset gives the directive's
	// default (10 s), a library user opts in.
	LeaderBalanceInterval time.Duration

	// Shard is the node's Raft group id on the Raft port: 0 for the
	// single-group cluster (no mux header: previous releases talk to it),
	// the shard id otherwise (docs/sharding.md).
	Shard uint32

	// Test-only switches for the Jepsen suite (cmd/raftset refuses them
	// unless enable-debug-flags is set as well).
	//
	// ClockOffset shifts this node's clock (clock.go) by a fixed amount.
	ClockOffset time.Duration
	// AckBeforeCommit makes the leader answer writes as soon as it hands
	// their entry to Raft, before a quorum stored it (ackearly.go). UNSAFE:
	// it loses acknowledged writes on failover; it exists to prove that the
	// suite's checkers notice.
	AckBeforeCommit bool
	// MoveFault makes this process's slot-move driver fail once, the first
	// time it reaches that step ("copy", "flip", "drop", "abort-drop"; the
	// package's tests also stop it before "freeze"), as if a node had died
	// there: the move (or abort) is left half done in the map, for
	// RAFT.SHARD ABORT and resuming to be tested end to end.
	MoveFault string

	// readFormat and writeFormat, when set, replace command.Version as the
	// log format this node says it reads and the one its proposals need
	// (tests: an older member, a newer leader; formats.go).
	readFormat, writeFormat int

	// wrapLogStore wraps the log store (tests: simulated disk latency).
	wrapLogStore func(raft.LogStore) raft.LogStore
}

// PeerTLS is the two sides of mutual TLS between nodes.
type PeerTLS struct {
	Server, Client *tls.Config
}

// DefaultConfig returns a Config with every tunable set; NodeID, RaftBind and
// DataDir are left for the caller.
func DefaultConfig() Config {
	return Config{
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		SnapshotRetain:     2,
		TrailingLogs:       10240,
		SnapshotLogBytes:   32 << 20,
		SnapshotLogPercent: 100,
		TrailingLogBytes:   8 << 20,
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		MaxAppendEntries:   64,
		ApplyTimeout:       5 * time.Second,
		BarrierTimeout:     10 * time.Second,
		MaxEntryBytes:      raft.SuggestedMaxDataSize,
		MaxOpBytes:         513 << 20,
		MaxEntryOps:        4096,
		MaxInflight:        64,
		PromoteLag:         1000,
		ProtectedMode:      true,
	}
}

// fillDefaults sets every zero tunable to its default.
func (c *Config) fillDefaults() {
	d := DefaultConfig()
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = d.SnapshotInterval
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = d.SnapshotRetain
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.SnapshotLogBytes == 0 {
		c.SnapshotLogBytes = d.SnapshotLogBytes
	}
	if c.SnapshotLogPercent == 0 {
		c.SnapshotLogPercent = d.SnapshotLogPercent
	}
	if c.TrailingLogBytes == 0 {
		c.TrailingLogBytes = d.TrailingLogBytes
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = d.LeaderLeaseTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = d.CommitTimeout
	}
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = d.MaxAppendEntries
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = d.ApplyTimeout
	}
	if c.BarrierTimeout == 0 {
		c.BarrierTimeout = d.BarrierTimeout
	}
	if c.MaxOpBytes == 0 {
		c.MaxOpBytes = d.MaxOpBytes
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = d.MaxEntryBytes
	}
	if c.MaxEntryOps == 0 {
		c.MaxEntryOps = d.MaxEntryOps
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = d.MaxInflight
	}
	if c.PromoteLag == 0 {
		c.PromoteLag = d.PromoteLag
	}
	if c.RaftAdvertise == "" && c.InMemory {
		c.RaftAdvertise = c.NodeID
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info})
	}
}

// Validate reports the first setting that cannot work. Zero tunables are
// valid: New fills them with defaults.
func (c *Config) Validate() error {
	if c.NodeID == "" {
		return errors.New("cluster: NodeID is empty")
	}
	if !c.InMemory {
		if c.DataDir == "" {
			return errors.New("cluster: DataDir is empty")
		}
		if c.Transport == nil {
			if c.RaftBind == "" {
				return errors.New("cluster: RaftBind is empty")
			}
			if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
				return fmt.Errorf("cluster: RaftBind %q: %w", c.RaftBind, err)
			}
			if c.RaftAdvertise != "" {
				if err := checkAdvertise(c.RaftAdvertise); err != nil {
					return err
				}
			}
		}
	}
	for i, p := range c.Peers {
		if p.ID == "" || p.Addr == "" {
			return fmt.Errorf("cluster: peer %d has an empty id or address", i)
		}
	}
	switch c.LogStore {
	case "", LogStoreBolt, LogStoreWAL:
	default:
		return fmt.Errorf("cluster: LogStore %q: want %s or %s", c.LogStore, LogStoreBolt, LogStoreWAL)
	}
	if c.MaxEntryBytes < 0 || c.MaxEntryBytes > 64<<20 {
		return fmt.Errorf("cluster: MaxEntryBytes %d out of range (0..64 MiB)", c.MaxEntryBytes)
	}
	if c.MaxEntryOps < 0 || c.MaxInflight < 0 || c.SnapshotRetain < 0 {
		return errors.New("cluster: MaxEntryOps, MaxInflight and SnapshotRetain must not be negative")
	}
	return c.validateTimers()
}

// validateTimers applies Raft's own bounds (raft.ValidateConfig) to the
// timers, with messages that name them, so that a bad setting fails at start
// rather than deep inside raft.NewRaft. Zero means the default.
func (c *Config) validateTimers() error {
	d := DefaultConfig()
	or := func(v, def time.Duration) time.Duration {
		if v == 0 {
			return def
		}
		return v
	}
	hb, el := or(c.HeartbeatTimeout, d.HeartbeatTimeout), or(c.ElectionTimeout, d.ElectionTimeout)
	lease, commit := or(c.LeaderLeaseTimeout, d.LeaderLeaseTimeout), or(c.CommitTimeout, d.CommitTimeout)
	for _, t := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{{"HeartbeatTimeout", hb, 5 * time.Millisecond}, {"ElectionTimeout", el, 5 * time.Millisecond},
		{"LeaderLeaseTimeout", lease, 5 * time.Millisecond}, {"CommitTimeout", commit, time.Millisecond}} {
		if t.v < t.min {
			return fmt.Errorf("cluster: %s %s is below Raft's minimum %s", t.name, t.v, t.min)
		}
	}
	if lease > hb {
		return fmt.Errorf("cluster: LeaderLeaseTimeout %s exceeds HeartbeatTimeout %s", lease, hb)
	}
	if el < hb {
		return fmt.Errorf("cluster: ElectionTimeout %s is below HeartbeatTimeout %s", el, hb)
	}
	if c.MaxAppendEntries < 0 || c.MaxAppendEntries > 1024 {
		return fmt.Errorf("cluster: MaxAppendEntries %d out of range (1..1024)", c.MaxAppendEntries)
	}
	return nil
}

// checkAdvertise refuses an advertise address peers cannot dial, as
// raft.NewTCPTransport would with a less helpful message.
func checkAdvertise(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cluster: RaftAdvertise %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("cluster: RaftAdvertise %q is not a dialable address", addr)
	}
	return nil
}
