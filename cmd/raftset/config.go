package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"raftset/cluster"
	"raftset/internal/tlsconf"
	"raftset/resp"
)

// Config is every setting of a raftset node. Each field is a directive that
// works the same in a config file ("name value") and on the command line
// ("--name value").
type Config struct {
	// File is the absolute path of the config file the node was started
	// with (CONFIG REWRITE writes it); empty without one. Not a directive.
	File string

	Bind             string
	Port             int
	NodeID           string
	RaftAddr         string
	Dir              string
	RaftLogStore     string // bolt|wal
	Save, AppendOnly string // accepted for redis.conf compatibility, no effect
	// Observability (metrics.go).
	MetricsAddr             string        // Prometheus metrics, /livez, /readyz; empty: off
	MetricsAuth             string        // "user:password" (basic) or a bearer token
	ShutdownDrain           time.Duration // /readyz fails this long before a stop closes the ports
	MetricsTLS              string        // yes: HTTPS with the client port's certificate when tls-port is set; no
	SlowlogLogSlowerThan    int           // µs; -1: off
	SlowlogMaxLen           int
	LatencyMonitorThreshold int // ms; 0: off
	SnapshotThreshold       uint64
	SnapshotInterval        time.Duration
	TrailingLogs            uint64
	SnapshotLogBytes        int64 // 0: off
	SnapshotLogPercent      int   // 0: off
	TrailingLogBytes        int64 // 0: off
	RequirePass             string
	ACLFile                 string // ACL LOAD / ACL SAVE; not read at start: users are replicated
	MaxIntsetEntries        int
	MaxListpackEntries      int
	MaxListpackValue        int
	MaxMemory               int64  // maxmemory: initial replicated bound (fsm.EvictConfig)
	MaxMemoryPolicy         string // maxmemory-policy
	MaxMemorySamples        int    // maxmemory-samples
	MaxMemoryTenacity       int    // maxmemory-eviction-tenacity
	GCPercent               int    // gc-percent: the Go collector's target (GOGC), unless GOGC is set
	GCFollowLive            string // gc-follow-live yes|no: a soft memory limit above the live heap (internal/memlimit)
	LogLevel                string
	LogFormat               string
	Import                  string // --import FILE: start a new node from a Redis dump.rdb
	PprofAddr               string // serve net/http/pprof here; empty: off
	// Client TLS (Redis's tls-* directives).
	TLSPort         int
	TLSCertFile     string
	TLSKeyFile      string
	TLSCACertFile   string
	TLSAuthClients  string // yes, no, optional
	TLSProtocols    string
	TLSCiphers      string // TLS 1.2 suites
	TLSCipherSuites string // TLS 1.3 suites: checked only, Go offers all three
	// TLSCluster is tls-cluster: mutual TLS between nodes, on the Raft port
	// and for their calls to each other's client (TLS) port.
	TLSCluster          string // yes, no
	TLSClusterPeerNames string // comma-separated names a peer's certificate must carry; empty: any the CA signed
	// Cluster.
	Peers             string // "id1=host1:raftport,id2=...": static bootstrap, the same on every node
	AdvertiseAddr     string // client address other nodes and clients use; default bind:port
	RaftAdvertiseAddr string // Raft address peers dial; default raft-addr
	Join              string // client address of a member to join through (new nodes)
	ClusterSecret     string // what nodes prove (Raft port, RAFTSET.AUTH) to each other
	PromoteLag        uint64 // entries a joining non-voter may lag when promoted to voter
	MasterName        string // a name +switch-master is always published under
	// Raft timers (cluster.Config's).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	Debug              DebugFlags // test-only switches (debugflags.go)

	// Client limits (Redis's directives).
	ProtectedMode           string // yes|no
	MaxClients              int
	Timeout                 int // seconds idle before a client is closed; 0: never
	TCPKeepAlive            int // seconds; 0: off
	ProtoMaxBulkLen         int64
	ClientQueryBufferLimit  int64
	ClientOutputBufferLimit string // Redis's syntax, every class

	ClusterEnabled string // yes|no: the Redis Cluster protocol (docs/sharding.md)
	ShardMap       string // static shards: "id:ranges:members ..." (cluster.ParseShardMap); empty: one group
	// LeaderBalanceInterval is cluster-leader-balance-interval, seconds:
	// the settle period of the automatic leader balancer; 0: off.
	LeaderBalanceInterval int
}

// ParsePeers parses the peers directive: "id=host:port" items separated by
// commas (spaces allowed), ids unique.
func ParsePeers(v string) ([]cluster.Peer, error) {
	var out []cluster.Peer
	seen := map[string]bool{}
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want id=host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %w", item, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q appears twice", id)
		}
		seen[id] = true
		out = append(out, cluster.Peer{ID: id, Addr: addr})
	}
	return out, nil
}

func addrDirective(name string, field func(*Config) *string) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			if v != "" {
				if _, _, err := net.SplitHostPort(v); err != nil {
					return fmt.Errorf("must be host:port: %w", err)
				}
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return *field(c) }}
}

// directive binds a config name to a field.
type directive struct {
	name    string
	set     func(c *Config, v string) error
	get     func(c *Config) string
	def     string // the built-in default, as a config file writes it
	doc     string // what it does, for --help and docs/configuration.md
	section string
	// memory marks a size in bytes, written back with Redis's units.
	memory bool
	// perLine > 0: a config file gives the value in several lines of this
	// many words each (client-output-buffer-limit's classes).
	perLine int
	// noRewrite: CONFIG REWRITE leaves the directive's lines as they are
	// and adds none (a one-shot action such as import).
	noRewrite bool
}

// is sets the default and the meaning.
func (d directive) is(def, doc string) directive {
	d.def, d.doc = def, doc
	return d
}

func intDirective(name string, field func(*Config) *int, min int) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				return fmt.Errorf("must be an integer ≥ %d", min)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*field(c)) }}
}

// countDirective is a positive count (entries, not bytes).
func countDirective(name string, field func(*Config) *uint64) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return errors.New("must be a positive integer")
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatUint(*field(c), 10) }}
}

func stringDirective(name string, field func(*Config) *string) directive {
	return directive{name: name,
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c *Config) string { return *field(c) }}
}

// checkedDirective is a string that check must accept.
func checkedDirective(name string, field func(*Config) *string, check func(string) error) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			if err := check(v); err != nil {
				return err
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return *field(c) }}
}

func oneOf(name string, field func(*Config) *string, allowed ...string) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			v = strings.ToLower(v)
			for _, a := range allowed {
				if v == a {
					*field(c) = v
					return nil
				}
			}
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		},
		get: func(c *Config) string { return *field(c) }}
}

// section groups directives in --help, docs/configuration.md and the
// example config file.
type section struct {
	title, intro string
	ds           []directive
}

// directiveTable is every setting with its default and meaning, in the order
// of the documentation. It drives both parsers, the built-in defaults,
// CONFIG GET of the settings the server does not own, CONFIG REWRITE,
// --help, docs/configuration.md and default.conf: a directive exists once.
var directiveTable = sync.OnceValue(func() []directive {
	var out []directive
	for _, s := range sections() {
		for _, d := range s.ds {
			d.section = s.title
			out = append(out, d)
		}
	}
	return out
})

func directives() []directive { return directiveTable() }

func sections() []section {
	return []section{
		{"Network", "Where clients connect, and the limits Redis applies to their connections. " +
			"All but `bind`, `port` and `advertise-addr` can also be changed with CONFIG SET.", []directive{
			stringDirective("bind", func(c *Config) *string { return &c.Bind }).is("127.0.0.1",
				"The address the client (RESP) port listens on: one host or IP (`0.0.0.0` or `::` for every interface)."),
			intDirective("port", func(c *Config) *int { return &c.Port }, 0).is("6379",
				"The client (RESP) port; `0` serves TLS only (`tls-port`)."),
			addrDirective("advertise-addr", func(c *Config) *string { return &c.AdvertiseAddr }).is("",
				"The client address other nodes forward to and that ROLE, INFO and SENTINEL report (containers, NAT). "+
					"Empty: `bind:port`, with `0.0.0.0` or `::` replaced by the Raft advertise host."),
			oneOf("protected-mode", func(c *Config) *string { return &c.ProtectedMode }, "yes", "no").is("yes",
				"With no `requirepass`, clients from non-loopback addresses get Redis's `-DENIED` error, and a Raft port "+
					"on a non-loopback address without a `cluster-secret` is refused at start."),
			intDirective("maxclients", func(c *Config) *int { return &c.MaxClients }, 1).is("10000",
				"The most client connections served at once; the next one gets `-ERR max number of clients reached`."),
			intDirective("timeout", func(c *Config) *int { return &c.Timeout }, 0).is("0",
				"Close a client idle for this many seconds; `0`: never."),
			intDirective("tcp-keepalive", func(c *Config) *int { return &c.TCPKeepAlive }, 0).is("300",
				"TCP keepalive probes after this many idle seconds; `0`: off."),
		}},
		{"TLS for clients", "Redis's `tls-*` directives. `CONFIG SET` of a certificate, key or CA file re-reads the files " +
			"(the same paths re-read rotated files): new connections get them, established ones keep theirs, and a " +
			"file that does not load is refused while the old one stays.", []directive{
			intDirective("tls-port", func(c *Config) *int { return &c.TLSPort }, 0).is("0",
				"Serve TLS to clients on this port too; `0`: off."),
			stringDirective("tls-cert-file", func(c *Config) *string { return &c.TLSCertFile }).is("",
				"The client port's certificate (PEM)."),
			stringDirective("tls-key-file", func(c *Config) *string { return &c.TLSKeyFile }).is("",
				"The client port's private key (PEM)."),
			stringDirective("tls-ca-cert-file", func(c *Config) *string { return &c.TLSCACertFile }).is("",
				"The CA that client certificates must chain to."),
			checkedDirective("tls-auth-clients", func(c *Config) *string { return &c.TLSAuthClients },
				func(v string) error { _, err := tlsconf.ParseClientAuth(v); return err }).is("yes",
				"`yes`: clients must present a certificate signed by the CA; `optional`: checked when presented; `no`."),
			checkedDirective("tls-protocols", func(c *Config) *string { return &c.TLSProtocols },
				func(v string) error { _, _, err := tlsconf.ParseProtocols(v); return err }).is("",
				"`TLSv1.2`, `TLSv1.3` or both, space-separated; empty: both."),
			checkedDirective("tls-ciphers", func(c *Config) *string { return &c.TLSCiphers },
				func(v string) error { _, err := tlsconf.ParseCipherSuites(v); return err }).is("",
				"TLS 1.2 suites, `:`-separated OpenSSL or IANA names; empty: Go's defaults."),
			checkedDirective("tls-ciphersuites", func(c *Config) *string { return &c.TLSCipherSuites }, tlsconf.ParseTLS13Suites).is("",
				"TLS 1.3 suites: checked, but not restrictable (Go always offers all three)."),
			oneOf("tls-cluster", func(c *Config) *string { return &c.TLSCluster }, "yes", "no").is("no",
				"`yes`: mutual TLS between nodes with the files above, on the Raft port and for their calls to each other's "+
					"TLS client port (which the node then publishes); needs `tls-port`. See docs/security.md."),
			stringDirective("tls-cluster-peer-names", func(c *Config) *string { return &c.TLSClusterPeerNames }).is("",
				"Comma-separated names a peer's certificate must carry (common or DNS name); empty: any certificate the CA signed."),
		}},
		{"Security", "See docs/security.md.", []directive{
			stringDirective("requirepass", func(c *Config) *string { return &c.RequirePass }).is("",
				"Clients must AUTH with this password; empty: no password. CONFIG SET changes it at once."),
			stringDirective("aclfile", func(c *Config) *string { return &c.ACLFile }).is("",
				"The file ACL SAVE writes the users to and ACL LOAD reads them from (the node that runs the command); "+
					"not read at start: users are replicated through the log and snapshots."),
			stringDirective("cluster-secret", func(c *Config) *string { return &c.ClusterSecret }).is("",
				"What nodes present to each other (`RAFTSET.AUTH`, and the Raft port's handshake) before they may send "+
					"internal commands; the same on every node. Empty: derived from `requirepass`; with neither set, internal "+
					"commands are only hidden from ordinary clients."),
		}},
		{"Observability", "Metrics and the slow log; see docs/metrics.md.", []directive{
			addrDirective("metrics-addr", func(c *Config) *string { return &c.MetricsAddr }).is("",
				"Serve Prometheus metrics (`/metrics`), `/livez` and `/readyz` on this HTTP address, e.g. `127.0.0.1:9121`. Empty: off."),
			stringDirective("metrics-auth", func(c *Config) *string { return &c.MetricsAuth }).is("",
				"Protects `/metrics` (not the probes): `user:password` for basic authentication, anything else a bearer token. Empty: none."),
			oneOf("metrics-tls", func(c *Config) *string { return &c.MetricsTLS }, "yes", "no").is("yes",
				"`yes`: when `tls-port` is set, `metrics-addr` serves HTTPS only, with the client port's certificate and "+
					"`tls-protocols`/`tls-ciphers`, and with `tls-auth-clients yes` `/metrics` needs a client certificate the CA "+
					"signed (the probes do not); `no`: plain HTTP whatever the TLS settings. See docs/metrics.md."),
			{name: "shutdown-drain",
				set: func(c *Config, v string) error {
					d, err := time.ParseDuration(v)
					if err != nil || d < 0 {
						return errors.New("must be a duration such as 0s, 5s or 1m")
					}
					c.ShutdownDrain = d
					return nil
				},
				get: func(c *Config) string { return c.ShutdownDrain.String() }, def: "0s",
				doc: "On SIGTERM or `SHUTDOWN`, `/readyz` answers 503 `shutting down` for this long while the node keeps " +
					"serving, so that load balancers polling it stop sending clients before the port closes; a second " +
					"SIGTERM or `SHUTDOWN` ends the wait. `0s`: stop at once."},
			intDirective("slowlog-log-slower-than", func(c *Config) *int { return &c.SlowlogLogSlowerThan }, -1).is("10000",
				"Commands taking at least this many microseconds go to the slow log; `-1`: off, `0`: every command. "+
					"A write's time is until its entry was committed and applied."),
			intDirective("slowlog-max-len", func(c *Config) *int { return &c.SlowlogMaxLen }, 0).is("128",
				"The most slow-log entries kept."),
			intDirective("latency-monitor-threshold", func(c *Config) *int { return &c.LatencyMonitorThreshold }, 0).is("0",
				"LATENCY LATEST/HISTORY record commands taking at least this many milliseconds; `0`: off."),
		}},
		{"Cluster", "How this node finds and joins the others.", []directive{
			stringDirective("node-id", func(c *Config) *string { return &c.NodeID }).is("",
				"This node's stable identity in the cluster. Empty: generated on first start and kept in `<dir>/node-id`."),
			stringDirective("raft-addr", func(c *Config) *string { return &c.RaftAddr }).is("127.0.0.1:16379",
				"The address the Raft port listens on."),
			addrDirective("raft-advertise-addr", func(c *Config) *string { return &c.RaftAdvertiseAddr }).is("",
				"The Raft address peers dial; empty: `raft-addr`."),
			{name: "peers",
				set: func(c *Config, v string) error {
					if _, err := ParsePeers(v); err != nil {
						return err
					}
					c.Peers = v
					return nil
				},
				get: func(c *Config) string { return c.Peers }, def: "",
				doc: "A static cluster: the same `id1=host1:raftport,id2=host2:raftport,...` on every node (this node's id " +
					"included). A node with an empty data dir bootstraps from it; a node with state ignores it. Empty: a " +
					"single-node cluster of this node."},
			addrDirective("join", func(c *Config) *string { return &c.Join }).is("",
				"Join a running cluster through the client address of any member: the node is added as a non-voter and "+
					"promoted once caught up. A node that already holds Raft state ignores it unless it was removed."),
			countDirective("promote-lag", func(c *Config) *uint64 { return &c.PromoteLag }).is("1000",
				"A joining node becomes a voter once it is at most this many log entries behind the leader."),
			stringDirective("sentinel-master-name", func(c *Config) *string { return &c.MasterName }).is("",
				"Sentinel-aware clients hear of a leader change from `+switch-master <name> ...`, published under every "+
					"master name they asked this node about and this one (empty: `mymaster` when none was asked)."),
			oneOf("cluster-enabled", func(c *Config) *string { return &c.ClusterEnabled }, "yes", "no").is("no",
				"`yes`: speak the Redis Cluster protocol to clients, as Redis's `cluster-enabled` (CLUSTER SLOTS, SHARDS, "+
					"NODES ...; without `shard-map` the cluster is one shard owning every slot, its Raft leader the master): keys of one command "+
					"must share a hash slot (`-CROSSSLOT`) and a follower sends keyed commands to the leader with `-MOVED` "+
					"(reads on a READONLY connection stay). `no`: a standalone server to clients. See docs/sharding.md."),
			{name: "shard-map",
				set: func(c *Config, v string) error {
					if v != "" {
						if _, err := cluster.ParseShardMap(v); err != nil {
							return err
						}
					}
					c.ShardMap = v
					return nil
				},
				get: func(c *Config) string { return c.ShardMap }, def: "",
				doc: "Several shards (Raft groups) in one cluster, on the same Raft and client ports: the same " +
					"`id:first-last[+first-last...]:node,node,... ...` on every node (e.g. `0:0-8191:n1,n2,n3 1:8192-16383:n1,n2,n3`; " +
					"every slot in one shard, members named as in `peers`, which gives their Raft addresses; a member may carry its " +
					"client address, `n4@10.0.0.4:6379`, which nodes that share no shard with it need to redirect there). This node runs a " +
					"replica of each shard it is a member of; shard 0's data stays in `dir`, shard N's is in `dir/shards/N`. " +
					"It is only the first map: the metadata group (the first shard's members until `raftset cluster add-meta` or " +
					"`remove-meta` changes them, in `dir/meta`) replicates it and every " +
					"later change (`raftset cluster move-slots`, `rebalance`, `add-shard`, `add-node`), and a different value on a restart is " +
					"ignored with a warning (`RAFT.SHARD MAP` shows the map in force). A node this value names in no shard (one " +
					"`raftset cluster add-node` recorded, started with the cluster's `peers` and `shard-map`) starts holding no " +
					"replica and learns the map from the first shard's members at the client addresses this value gives them. " +
					"Needs `cluster-enabled yes` and `peers`; `raftset cluster create` prints both for a new cluster. " +
					"Empty: one group owning every slot. See docs/sharding.md."},
			intDirective("cluster-leader-balance-interval", func(c *Config) *int { return &c.LeaderBalanceInterval }, 0).is("10",
				"With `shard-map`: once no shard's leader has changed (and no slot move has been under way) for this many "+
					"seconds, the metadata leader's process moves one shard's leadership towards an even spread "+
					"(as `RAFT.SHARD BALANCE-LEADERS` does, one transfer per period), so that a node back from a crash leads "+
					"its share again. A leadership moved by hand is left alone for at least this long; a failed transfer "+
					"backs off. `0`: off. CONFIG SET changes it. See docs/sharding.md (Placement)."),
		}},
		{"Raft timers", "How fast a failed leader is replaced, against how readily a slow network or disk causes an " +
			"election. The defaults suit a LAN with local disks; see docs/operations.md (Tune). Raft's bounds apply: " +
			"every timer at least 5ms (the commit timeout 1ms), the lease at most the heartbeat timeout, the election " +
			"timeout at least the heartbeat timeout.", []directive{
			durationDirective("raft-heartbeat-timeout", func(c *Config) *time.Duration { return &c.HeartbeatTimeout }).is("500ms",
				"A follower that hears nothing from the leader for a random 1-2x this long starts an election."),
			durationDirective("raft-election-timeout", func(c *Config) *time.Duration { return &c.ElectionTimeout }).is("500ms",
				"A candidate that wins no election in a random 1-2x this long starts another one."),
			durationDirective("raft-leader-lease-timeout", func(c *Config) *time.Duration { return &c.LeaderLeaseTimeout }).is("250ms",
				"A leader that cannot reach a quorum for this long steps down."),
			durationDirective("raft-commit-timeout", func(c *Config) *time.Duration { return &c.CommitTimeout }).is("50ms",
				"With no new entries, the leader tells followers the commit index at least this often."),
			{name: "raft-max-append-entries",
				set: func(c *Config, v string) error {
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 || n > 1024 {
						return errors.New("must be an integer from 1 to 1024")
					}
					c.MaxAppendEntries = n
					return nil
				},
				get: func(c *Config) string { return strconv.Itoa(c.MaxAppendEntries) }, def: "64",
				doc: "The most log entries sent in one AppendEntries request (1 to 1024)."},
		}},
		{"Storage and snapshots", "CONFIG SET changes `snapshot-threshold`, `snapshot-interval`, `snapshot-log-size` and " +
			"`snapshot-log-percentage` on this node at once.", []directive{
			stringDirective("dir", func(c *Config) *string { return &c.Dir }).is("./raftset-data",
				"Where the Raft log (`raft.db` or `wal/`), the stable store (`raft.db`) and the snapshots live."),
			stringDirective("save", func(c *Config) *string { return &c.Save }).is("",
				"Accepted (from a redis.conf, or CONFIG SET) with no effect: raftset persists every write in its Raft log, "+
					"synced on a majority before it is acknowledged, and snapshots by `snapshot-threshold`."),
			oneOf("appendonly", func(c *Config) *string { return &c.AppendOnly }, "yes", "no").is("no",
				"Accepted with no effect, as `save`: the Raft log is raftset's append-only file, always on."),
			oneOf("raft-log-store", func(c *Config) *string { return &c.RaftLogStore }, cluster.LogStoreBolt, cluster.LogStoreWAL).is(
				cluster.DefaultLogStore,
				"Where the Raft log is kept: `bolt` (in `raft.db`, two fdatasyncs per append) or `wal` (segment files in "+
					"`wal/`, one fsync per append). A node whose log is in the other store moves it at start; the stable "+
					"store stays in `raft.db` either way. See docs/benchmarks.md."),
			countDirective("snapshot-threshold", func(c *Config) *uint64 { return &c.SnapshotThreshold }).is("8192",
				"Take a Raft snapshot (an RDB file) after this many new log entries, checked every `snapshot-interval`."),
			{name: "snapshot-interval",
				set: func(c *Config, v string) error {
					d, err := parseDuration(v)
					if err != nil || d <= 0 {
						return errors.New("must be a positive duration such as 120s or 2m (bare numbers are seconds)")
					}
					c.SnapshotInterval = d
					return nil
				},
				get: func(c *Config) string { return c.SnapshotInterval.String() }, def: "120s",
				doc: "How often the snapshot thresholds are checked (bare numbers are seconds)."},
			memoryDirective("snapshot-log-size", func(c *Config) *int64 { return &c.SnapshotLogBytes }).is("32mb",
				"Also snapshot once this many bytes of log were written since the last one (group commit packs from one "+
					"to thousands of commands in an entry, so counting entries alone lets `raft.db` grow to hundreds of MB). `0`: off."),
			intDirective("snapshot-log-percentage", func(c *Config) *int { return &c.SnapshotLogPercent }, 0).is("100",
				"Once the data is large, wait until the log grew by this percentage of the latest snapshot's size "+
					"before snapshotting for the log's size (as Redis's `auto-aof-rewrite-percentage`): a snapshot "+
					"writes all the data, so with `snapshot-log-size` alone a node of a few GB would write it again "+
					"every few seconds of writes. `0`: `snapshot-log-size` alone."),
			countDirective("trailing-logs", func(c *Config) *uint64 { return &c.TrailingLogs }).is("10240",
				"Log entries kept behind a snapshot, so a slightly lagging follower catches up from the log instead of "+
					"receiving a whole snapshot."),
			memoryDirective("trailing-log-size", func(c *Config) *int64 { return &c.TrailingLogBytes }).is("8mb",
				"Caps the entries kept behind a snapshot in bytes too (the smaller wins). `0`: entries only."),
			{name: "import", set: func(c *Config, v string) error { c.Import = v; return nil },
				get: func(c *Config) string { return c.Import }, def: "", noRewrite: true,
				doc: "Start a new node (empty `dir`) from a Redis `dump.rdb`; refused when `dir` holds Raft state. " +
					"Never written back by CONFIG REWRITE."},
		}},
		{"Client limits", "As in redis.conf; CONFIG SET changes them too.", []directive{
			memoryDirective("proto-max-bulk-len", func(c *Config) *int64 { return &c.ProtoMaxBulkLen }).is("512mb",
				"The largest bulk string (argument) a client may send."),
			memoryDirective("client-query-buffer-limit", func(c *Config) *int64 { return &c.ClientQueryBufferLimit }).is("1gb",
				"A client whose unprocessed input grows past this is disconnected."),
			{name: "client-output-buffer-limit",
				// Each line (or --flag) sets the classes it names; the others
				// keep their value, as in redis.conf.
				set: func(c *Config, v string) error {
					base := resp.DefaultOutputLimits()
					if c.ClientOutputBufferLimit != "" {
						var err error
						if base, err = resp.ParseOutputLimits(base, c.ClientOutputBufferLimit); err != nil {
							return err
						}
					}
					l, err := resp.ParseOutputLimits(base, v)
					if err != nil {
						return err
					}
					c.ClientOutputBufferLimit = l.String()
					return nil
				},
				get: func(c *Config) string { return c.ClientOutputBufferLimit }, perLine: 4,
				def: "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60",
				doc: "`class hard soft soft-seconds`, one class a line: a client whose pending output reaches `hard`, or " +
					"stays above `soft` for `soft-seconds`, is disconnected (`0`: no limit). `normal` is every client but " +
					"subscribers; `replica` is accepted and ignored."},
		}},
		{"Set encodings", "As in Redis. Replicated: CONFIG SET changes them on every node through the log.", []directive{
			intDirective("set-max-intset-entries", func(c *Config) *int { return &c.MaxIntsetEntries }, 0).is("512",
				"A set of integers stays an intset up to this many members."),
			intDirective("set-max-listpack-entries", func(c *Config) *int { return &c.MaxListpackEntries }, 0).is("128",
				"A set stays a listpack up to this many members..."),
			intDirective("set-max-listpack-value", func(c *Config) *int { return &c.MaxListpackValue }, 0).is("64",
				"...and while no member is longer than this many bytes."),
		}},
		{"Memory and eviction", "As in Redis, for a cache (docs/cache.md). Replicated like the set encodings: every node " +
			"must agree on the bound, so CONFIG SET changes them on every node through the log, and a node's directives " +
			"are only its state until it replays the log or a snapshot. The leader measures the dataset as the state " +
			"machine accounts it (the same on every replica), evicts through the log, and derives the Go runtime's soft " +
			"memory limit from `maxmemory` unless `GOMEMLIMIT` is set. `gc-percent` alone is this node's own.", []directive{
			memoryDirective("maxmemory", func(c *Config) *int64 { return &c.MaxMemory }).is("0",
				"Bound on the dataset (`used_memory_dataset`), such as `64mb`; `0`: none."),
			oneOf("maxmemory-policy", func(c *Config) *string { return &c.MaxMemoryPolicy },
				"noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
				"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl").is("noeviction",
				"What goes when the bound is reached: `noeviction` refuses writes that may grow memory (`-OOM`); "+
					"`allkeys-*` evict any key, `volatile-*` only keys with a TTL, by least recent use (`lru`), least "+
					"frequent use (`lfu`), at random, or nearest deadline (`volatile-ttl`)."),
			{name: "maxmemory-samples",
				set: func(c *Config, v string) error {
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 {
						return errors.New("must be a positive integer")
					}
					c.MaxMemorySamples = n
					return nil
				},
				get: func(c *Config) string { return strconv.Itoa(c.MaxMemorySamples) }, def: "5",
				doc: "Keys sampled for each key evicted by the LRU, LFU and TTL policies (more: closer to exact, slower)."},
			{name: "maxmemory-eviction-tenacity",
				set: func(c *Config, v string) error {
					n, err := strconv.Atoi(v)
					if err != nil || n < 0 || n > 100 {
						return errors.New("must be an integer from 0 to 100")
					}
					c.MaxMemoryTenacity = n
					return nil
				},
				get: func(c *Config) string { return strconv.Itoa(c.MaxMemoryTenacity) }, def: "10",
				doc: "How long one eviction pass of the leader may run (10: 25 ms, scaled linearly; 100: until under the bound)."},
			intDirective("gc-percent", func(c *Config) *int { return &c.GCPercent }, 1).is("50",
				"The Go collector's target, as `GOGC` (which wins when set): the heap may grow this many percent past "+
					"what survived the last collection before the next one starts, and with `gc-follow-live yes` at least "+
					"64 MiB (the target in force, INFO memory's `go_gc_percent`, is raised for a live heap under 128 MiB at 50). "+
					"Lower: a lower memory peak while "+
					"writes pour in, for more CPU per write (docs/benchmarks.md, issue 14). This node only; CONFIG "+
					"SET changes it."),
			oneOf("gc-follow-live", func(c *Config) *string { return &c.GCFollowLive }, "yes", "no").is("yes",
				"`yes`: keep the Go runtime's soft memory limit at `gc-percent` (or 64 MiB, when more) over the smallest live heap of the last "+
					"four collections, plus what the runtime uses beside the heap's objects (under the limit from "+
					"`maxmemory`), so that a collection that finds a snapshot's copies live does not raise the next "+
					"target, and free pages go back to the OS before the heap grows past it; a lower memory peak under a "+
					"write flood (docs/benchmarks.md, issue 14). `no`: the target alone. Off while `GOMEMLIMIT` is set. "+
					"This node only; CONFIG SET changes it."),
		}},
		{"Logging and debugging", "", []directive{
			oneOf("loglevel", func(c *Config) *string { return &c.LogLevel },
				"trace", "debug", "info", "warn", "error", "verbose", "notice", "warning", "nothing").is("info",
				"`trace`, `debug`, `info`, `warn` or `error` (Redis's `verbose`, `notice`, `warning` and `nothing` "+
					"are accepted too). CONFIG SET changes it."),
			oneOf("log-format", func(c *Config) *string { return &c.LogFormat }, "text", "json").is("text",
				"`text` or `json` (one object a line)."),
			stringDirective("pprof-addr", func(c *Config) *string { return &c.PprofAddr }).is("",
				"Serve Go's profiler (net/http/pprof) on this address, such as `127.0.0.1:6060`; empty: off."),
		}},
		{"Test-only", "For the Jepsen suite: each one makes a node wrong on purpose, so a node refuses them unless " +
			"`enable-debug-flags` is yes as well.", debugDirectives()},
	}
}

// durationDirective is a positive duration such as 500ms.
func durationDirective(name string, field func(*Config) *time.Duration) directive {
	return directive{name: name,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return errors.New("must be a positive duration such as 500ms or 1s")
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return field(c).String() }}
}

// checkTimers applies Raft's bounds across the timer directives (the
// cluster package checks them again; here the messages name directives).
func (c *Config) checkTimers() error {
	for _, t := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{{"raft-heartbeat-timeout", c.HeartbeatTimeout, 5 * time.Millisecond},
		{"raft-election-timeout", c.ElectionTimeout, 5 * time.Millisecond},
		{"raft-leader-lease-timeout", c.LeaderLeaseTimeout, 5 * time.Millisecond},
		{"raft-commit-timeout", c.CommitTimeout, time.Millisecond}} {
		if t.v < t.min {
			return fmt.Errorf("%s %s: must be at least %s", t.name, t.v, t.min)
		}
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("raft-leader-lease-timeout %s: must not exceed raft-heartbeat-timeout %s",
			c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return fmt.Errorf("raft-election-timeout %s: must be at least raft-heartbeat-timeout %s",
			c.ElectionTimeout, c.HeartbeatTimeout)
	}
	return nil
}

// memoryDirective is a size in bytes with Redis's units (64mb); 0 is off.
func memoryDirective(name string, field func(*Config) *int64) directive {
	return directive{name: name, memory: true,
		set: func(c *Config, v string) error {
			n, err := resp.ParseMemory(v)
			if err != nil {
				return errors.New("must be a size such as 32mb, 512kb or 0 (off)")
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) }}
}

func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

func findDirective(name string) (directive, bool) {
	name = strings.ToLower(name)
	for _, d := range directives() {
		if d.name == name {
			return d, true
		}
	}
	return directive{}, false
}

// LoadConfig builds the configuration the way redis-server does: the
// built-in defaults, then an optional config file named by the first
// argument that does not start with "--", then --name value pairs in order.
func LoadConfig(args []string) (*Config, error) {
	c := &Config{}
	for _, d := range directives() {
		if err := d.set(c, d.def); err != nil {
			return nil, fmt.Errorf("built-in default %s %q: %w", d.name, d.def, err)
		}
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		b, err := os.ReadFile(args[0])
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := c.parseFile(string(b), args[0]); err != nil {
			return nil, err
		}
		if c.File, err = filepath.Abs(args[0]); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			return nil, fmt.Errorf("argument %q: expected --name value", args[i])
		}
		if n, v, hasEq := strings.Cut(name, "="); hasEq {
			if err := c.Set(n, v); err != nil {
				return nil, err
			}
			continue
		}
		if i+1 >= len(args) {
			return nil, fmt.Errorf("--%s needs a value", name)
		}
		if err := c.Set(name, args[i+1]); err != nil {
			return nil, err
		}
		i++
	}
	if err := c.Debug.check(); err != nil {
		return nil, err
	}
	if err := c.checkTimers(); err != nil {
		return nil, err
	}
	if c.ShardMap != "" && (c.ClusterEnabled != "yes" || c.Join != "") {
		return nil, errors.New("shard-map needs cluster-enabled yes, and a static cluster (peers, not join)")
	}
	return c, nil
}

// Set applies one directive.
func (c *Config) Set(name, value string) error {
	d, ok := findDirective(name)
	if !ok {
		return fmt.Errorf("unknown directive %q", name)
	}
	if err := d.set(c, value); err != nil {
		return fmt.Errorf("%s %q: %w", d.name, value, err)
	}
	return nil
}

// Get returns a directive's current value.
func (c *Config) Get(name string) (string, bool) {
	d, ok := findDirective(name)
	if !ok {
		return "", false
	}
	return d.get(c), true
}

func (c *Config) parseFile(text, source string) error {
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields, err := splitArgs(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", source, n+1, err)
		}
		if d, ok := findDirective(fields[0]); ok && len(fields) > 2 && d.perLine > 0 {
			fields = []string{fields[0], strings.Join(fields[1:], " ")}
		}
		if len(fields) != 2 {
			return fmt.Errorf("%s:%d: expected \"name value\", got %d words", source, n+1, len(fields))
		}
		if err := c.Set(fields[0], fields[1]); err != nil {
			return fmt.Errorf("%s:%d: %w", source, n+1, err)
		}
	}
	return nil
}

// splitArgs splits a config line into words, honouring double and single
// quotes as redis.conf does ("" is an empty value).
func splitArgs(line string) ([]string, error) {
	var out []string
	for i := 0; i < len(line); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			break
		}
		if q := line[i]; q == '"' || q == '\'' {
			j := strings.IndexByte(line[i+1:], q)
			if j < 0 {
				return nil, errors.New("unbalanced quotes")
			}
			out = append(out, line[i+1:i+1+j])
			i += j + 2
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		out = append(out, line[i:j])
		i = j
	}
	return out, nil
}
