package main

import (
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"raftset/cluster"
	"raftset/internal/tlsconf"
	"raftset/resp"
)

//go:embed default.conf
var defaultConf string

// Config is every setting of a raftset node. Each field is a directive that
// works the same in a config file ("name value") and on the command line
// ("--name value").
type Config struct {
	Bind               string
	Port               int
	NodeID             string
	RaftAddr           string
	Dir                string
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	SnapshotLogBytes   int64 // 0: off
	TrailingLogBytes   int64 // 0: off
	RequirePass        string
	MaxIntsetEntries   int
	MaxListpackEntries int
	MaxListpackValue   int
	LogLevel           string
	LogFormat          string
	Import             string // --import FILE: start a new node from a Redis dump.rdb
	PprofAddr          string // serve net/http/pprof here; empty: off
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
	Peers             string     // "id1=host1:raftport,id2=...": static bootstrap, the same on every node
	AdvertiseAddr     string     // client address other nodes and clients use; default bind:port
	RaftAdvertiseAddr string     // Raft address peers dial; default raft-addr
	Join              string     // client address of a member to join through (new nodes)
	ClusterSecret     string     // what nodes prove (Raft port, RAFTSET.AUTH) to each other
	PromoteLag        uint64     // entries a joining non-voter may lag when promoted to voter
	MasterName        string     // a name +switch-master is always published under
	Debug             DebugFlags // test-only switches (debugflags.go)

	// Client limits (Redis's directives).
	ProtectedMode           string // yes|no
	MaxClients              int
	Timeout                 int // seconds idle before a client is closed; 0: never
	TCPKeepAlive            int // seconds; 0: off
	ProtoMaxBulkLen         int64
	ClientQueryBufferLimit  int64
	ClientOutputBufferLimit string // Redis's syntax, every class
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
	return directive{name,
		func(c *Config, v string) error {
			if v != "" {
				if _, _, err := net.SplitHostPort(v); err != nil {
					return fmt.Errorf("must be host:port: %w", err)
				}
			}
			*field(c) = v
			return nil
		},
		func(c *Config) string { return *field(c) }}
}

// directive binds a config name to a field.
type directive struct {
	name string
	set  func(c *Config, v string) error
	get  func(c *Config) string
}

func intDirective(name string, field func(*Config) *int, min int) directive {
	return directive{name,
		func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < min {
				return fmt.Errorf("must be an integer ≥ %d", min)
			}
			*field(c) = n
			return nil
		},
		func(c *Config) string { return strconv.Itoa(*field(c)) }}
}

// countDirective is a positive count (entries, not bytes).
func countDirective(name string, field func(*Config) *uint64) directive {
	return directive{name,
		func(c *Config, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return errors.New("must be a positive integer")
			}
			*field(c) = n
			return nil
		},
		func(c *Config) string { return strconv.FormatUint(*field(c), 10) }}
}

func stringDirective(name string, field func(*Config) *string) directive {
	return directive{name,
		func(c *Config, v string) error { *field(c) = v; return nil },
		func(c *Config) string { return *field(c) }}
}

// checkedDirective is a string that check must accept.
func checkedDirective(name string, field func(*Config) *string, check func(string) error) directive {
	return directive{name,
		func(c *Config, v string) error {
			if err := check(v); err != nil {
				return err
			}
			*field(c) = v
			return nil
		},
		func(c *Config) string { return *field(c) }}
}

func oneOf(name string, field func(*Config) *string, allowed ...string) directive {
	return directive{name,
		func(c *Config, v string) error {
			v = strings.ToLower(v)
			for _, a := range allowed {
				if v == a {
					*field(c) = v
					return nil
				}
			}
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		},
		func(c *Config) string { return *field(c) }}
}

// directives lists every setting; it drives both parsers and CONFIG GET.
func directives() []directive {
	return append([]directive{
		stringDirective("bind", func(c *Config) *string { return &c.Bind }),
		intDirective("port", func(c *Config) *int { return &c.Port }, 0),
		stringDirective("node-id", func(c *Config) *string { return &c.NodeID }),
		stringDirective("raft-addr", func(c *Config) *string { return &c.RaftAddr }),
		stringDirective("dir", func(c *Config) *string { return &c.Dir }),
		countDirective("snapshot-threshold", func(c *Config) *uint64 { return &c.SnapshotThreshold }),
		{"snapshot-interval",
			func(c *Config, v string) error {
				d, err := parseDuration(v)
				if err != nil || d <= 0 {
					return errors.New("must be a positive duration such as 120s or 2m (bare numbers are seconds)")
				}
				c.SnapshotInterval = d
				return nil
			},
			func(c *Config) string { return c.SnapshotInterval.String() }},
		countDirective("trailing-logs", func(c *Config) *uint64 { return &c.TrailingLogs }),
		memoryDirective("snapshot-log-size", func(c *Config) *int64 { return &c.SnapshotLogBytes }),
		memoryDirective("trailing-log-size", func(c *Config) *int64 { return &c.TrailingLogBytes }),
		stringDirective("requirepass", func(c *Config) *string { return &c.RequirePass }),
		intDirective("set-max-intset-entries", func(c *Config) *int { return &c.MaxIntsetEntries }, 0),
		intDirective("set-max-listpack-entries", func(c *Config) *int { return &c.MaxListpackEntries }, 0),
		intDirective("set-max-listpack-value", func(c *Config) *int { return &c.MaxListpackValue }, 0),
		oneOf("loglevel", func(c *Config) *string { return &c.LogLevel }, "trace", "debug", "info", "warn", "error"),
		oneOf("log-format", func(c *Config) *string { return &c.LogFormat }, "text", "json"),
		stringDirective("import", func(c *Config) *string { return &c.Import }),
		stringDirective("pprof-addr", func(c *Config) *string { return &c.PprofAddr }),
		intDirective("tls-port", func(c *Config) *int { return &c.TLSPort }, 0),
		stringDirective("tls-cert-file", func(c *Config) *string { return &c.TLSCertFile }),
		stringDirective("tls-key-file", func(c *Config) *string { return &c.TLSKeyFile }),
		stringDirective("tls-ca-cert-file", func(c *Config) *string { return &c.TLSCACertFile }),
		checkedDirective("tls-auth-clients", func(c *Config) *string { return &c.TLSAuthClients },
			func(v string) error { _, err := tlsconf.ParseClientAuth(v); return err }),
		checkedDirective("tls-protocols", func(c *Config) *string { return &c.TLSProtocols },
			func(v string) error { _, _, err := tlsconf.ParseProtocols(v); return err }),
		checkedDirective("tls-ciphers", func(c *Config) *string { return &c.TLSCiphers },
			func(v string) error { _, err := tlsconf.ParseCipherSuites(v); return err }),
		checkedDirective("tls-ciphersuites", func(c *Config) *string { return &c.TLSCipherSuites }, tlsconf.ParseTLS13Suites),
		oneOf("tls-cluster", func(c *Config) *string { return &c.TLSCluster }, "yes", "no"),
		stringDirective("tls-cluster-peer-names", func(c *Config) *string { return &c.TLSClusterPeerNames }),
		{"peers",
			func(c *Config, v string) error {
				if _, err := ParsePeers(v); err != nil {
					return err
				}
				c.Peers = v
				return nil
			},
			func(c *Config) string { return c.Peers }},
		addrDirective("advertise-addr", func(c *Config) *string { return &c.AdvertiseAddr }),
		addrDirective("raft-advertise-addr", func(c *Config) *string { return &c.RaftAdvertiseAddr }),
		addrDirective("join", func(c *Config) *string { return &c.Join }),
		stringDirective("cluster-secret", func(c *Config) *string { return &c.ClusterSecret }),
		stringDirective("sentinel-master-name", func(c *Config) *string { return &c.MasterName }),
		countDirective("promote-lag", func(c *Config) *uint64 { return &c.PromoteLag }),
		oneOf("protected-mode", func(c *Config) *string { return &c.ProtectedMode }, "yes", "no"),
		intDirective("maxclients", func(c *Config) *int { return &c.MaxClients }, 1),
		intDirective("timeout", func(c *Config) *int { return &c.Timeout }, 0),
		intDirective("tcp-keepalive", func(c *Config) *int { return &c.TCPKeepAlive }, 0),
		memoryDirective("proto-max-bulk-len", func(c *Config) *int64 { return &c.ProtoMaxBulkLen }),
		memoryDirective("client-query-buffer-limit", func(c *Config) *int64 { return &c.ClientQueryBufferLimit }),
		{"client-output-buffer-limit",
			// Each line (or --flag) sets the classes it names; the others
			// keep their value, as in redis.conf.
			func(c *Config, v string) error {
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
			func(c *Config) string { return c.ClientOutputBufferLimit }},
	}, debugDirectives()...)
}

// memoryDirective is a size in bytes with Redis's units (64mb); 0 is off.
func memoryDirective(name string, field func(*Config) *int64) directive {
	return directive{name,
		func(c *Config, v string) error {
			n, err := resp.ParseMemory(v)
			if err != nil {
				return errors.New("must be a size such as 32mb, 512kb or 0 (off)")
			}
			*field(c) = n
			return nil
		},
		func(c *Config) string { return strconv.FormatInt(*field(c), 10) }}
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
	if err := c.parseFile(defaultConf, "built-in defaults"); err != nil {
		return nil, err
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		b, err := os.ReadFile(args[0])
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := c.parseFile(string(b), args[0]); err != nil {
			return nil, err
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
		if len(fields) > 2 && multiWord[strings.ToLower(fields[0])] {
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

// multiWord lists the directives whose value is several words on a config
// file line, as in redis.conf ("client-output-buffer-limit pubsub 32mb 8mb 60").
var multiWord = map[string]bool{"client-output-buffer-limit": true}

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
