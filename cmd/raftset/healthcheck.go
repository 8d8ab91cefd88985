package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"raftset/internal/respwire"
	"raftset/internal/tlsconf"
)

// raftset healthcheck: a container health probe that needs nothing but the
// binary (the image is FROM scratch: no shell, no redis-cli).
//
//	raftset healthcheck [--addr host:port] [--timeout 2s] [--writable]
//
// It sends PING over RESP and exits 0 when the answer is PONG, 1 otherwise
// (Docker reserves exit code 2, so bad flags exit 1 too). With --writable the
// node must also know a leader (INFO raft: raft_state leader, or a non-empty
// raft_leader_id; ROLE for servers without a Raft section), so writes sent to
// it can succeed.
const healthcheckUsage = `usage: raftset healthcheck [--addr host:port] [--timeout 2s] [--writable] [--password P]
                           [--tls [--cacert ca.crt] [--cert c.crt --key c.key] [--insecure]]

Exits 0 when the node at --addr answers PING (and, with --writable, knows a
Raft leader), 1 otherwise. With --tls it connects as redis-cli --tls does:
the node's certificate must chain to --cacert (the system's roots when
empty), its name is not checked; --cert and --key are presented when the node
asks for a client certificate (tls-auth-clients).

Environment: RAFTSET_HEALTH_ADDR (default --addr, else 127.0.0.1:6379),
RAFTSET_HEALTH_PASSWORD (default --password, for a node with requirepass),
RAFTSET_HEALTH_TLS (yes: default --tls), RAFTSET_HEALTH_CACERT,
RAFTSET_HEALTH_CERT, RAFTSET_HEALTH_KEY (defaults of --cacert, --cert, --key).
`

const defaultHealthAddr = "127.0.0.1:6379"

func runHealthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftset healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthcheckUsage) }
	addr := fs.String("addr", envOr("RAFTSET_HEALTH_ADDR", defaultHealthAddr), "RESP address of the node")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	writable := fs.Bool("writable", false, "also require that the node knows a Raft leader")
	password := fs.String("password", os.Getenv("RAFTSET_HEALTH_PASSWORD"), "AUTH with this password first")
	useTLS := fs.Bool("tls", envYes("RAFTSET_HEALTH_TLS"), "connect with TLS (the node's tls-port)")
	cacert := fs.String("cacert", os.Getenv("RAFTSET_HEALTH_CACERT"), "CA certificate the node's certificate must chain to")
	cert := fs.String("cert", os.Getenv("RAFTSET_HEALTH_CERT"), "client certificate, for tls-auth-clients")
	key := fs.String("key", os.Getenv("RAFTSET_HEALTH_KEY"), "client certificate's key")
	insecure := fs.Bool("insecure", false, "do not check the node's certificate")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "raftset healthcheck: unexpected argument %q\n", fs.Arg(0))
		return 1
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "raftset healthcheck: --timeout must be positive")
		return 1
	}
	var tlsCfg *tls.Config
	if *useTLS {
		var err error
		tlsCfg, err = tlsconf.ClientConfig(tlsconf.Files{Cert: *cert, Key: *key, CA: *cacert}, *insecure)
		if err != nil {
			fmt.Fprintf(stderr, "raftset healthcheck: %v\n", err)
			return 1
		}
	}
	msg, err := healthcheck(*addr, *timeout, *writable, *password, tlsCfg)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: %s: %v\n", *addr, err)
		return 1
	}
	fmt.Fprintf(stdout, "healthy: %s: %s\n", *addr, msg)
	return 0
}

func envYes(name string) bool {
	v := strings.ToLower(os.Getenv(name))
	return v == "yes" || v == "1" || v == "true"
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// healthLimits bound what a probe reads: INFO is a few KB and ROLE a short
// array, so anything larger is refused rather than buffered.
var healthLimits = respwire.Limits{MaxBulk: 1 << 20, MaxElems: 1024, MaxDepth: 8}

// healthcheck probes the node at addr within timeout, over TLS when tlsCfg
// is not nil. It returns a short description of a healthy node, or why the
// node is not healthy.
func healthcheck(addr string, timeout time.Duration, writable bool, password string, tlsCfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := respwire.DialContext(ctx, addr, respwire.DialOptions{Timeout: timeout, Limits: &healthLimits, TLS: tlsCfg})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	c := &healthConn{ctx: ctx, c: cl}

	if password != "" {
		reply, err := c.do("AUTH", password)
		if err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
		if s, ok := text(reply); !ok || s != "OK" {
			return "", fmt.Errorf("AUTH: unexpected reply %q", reply)
		}
	}
	reply, err := c.do("PING")
	if err != nil {
		return "", fmt.Errorf("PING: %w", err)
	}
	if s, ok := text(reply); !ok || s != "PONG" {
		return "", fmt.Errorf("PING: unexpected reply %q", reply)
	}
	if !writable {
		return "PONG", nil
	}
	return c.leaderKnown()
}

// leaderKnown asks INFO raft whether the node is the leader or knows one,
// falling back to ROLE when the reply has no Raft fields.
func (c *healthConn) leaderKnown() (string, error) {
	reply, err := c.do("INFO", "raft")
	if err != nil {
		return "", fmt.Errorf("INFO raft: %w", err)
	}
	info, ok := text(reply)
	if !ok {
		return "", fmt.Errorf("INFO raft: unexpected reply %v", reply)
	}
	fields := parseInfo(info)
	if state, ok := fields["raft_state"]; ok {
		if state == "leader" {
			return "PONG, raft leader", nil
		}
		if id := fields["raft_leader_id"]; id != "" {
			return "PONG, raft " + state + ", leader " + id, nil
		}
		if a := fields["raft_leader_addr"]; a != "" {
			return "PONG, raft " + state + ", leader at " + a, nil
		}
		return "", fmt.Errorf("raft %s, no known leader", state)
	}

	role, err := c.do("ROLE")
	if err != nil {
		return "", fmt.Errorf("ROLE: %w", err)
	}
	if role.Kind != '*' || len(role.Elems) == 0 {
		return "", fmt.Errorf("ROLE: unexpected reply %v", role)
	}
	arr := role.Elems
	switch name, _ := text(arr[0]); name {
	case "master":
		return "PONG, role master", nil
	case "slave":
		if len(arr) >= 4 {
			if link, _ := text(arr[3]); link == "connected" {
				return "PONG, role slave, connected", nil
			}
		}
		return "", errors.New("role slave, not connected to a master")
	}
	return "", fmt.Errorf("ROLE: unexpected role %v", arr[0])
}

// parseInfo reads INFO's "name:value" lines.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// healthConn runs a probe's commands within its one deadline.
type healthConn struct {
	ctx context.Context
	c   *respwire.Client
}

// do sends one command and returns its parsed reply; an error reply is
// returned as an error (its text, "ERR ...").
func (c *healthConn) do(args ...string) (respwire.Reply, error) {
	return c.c.CallParsed(c.ctx, args...)
}

// text is the text of a simple or bulk string reply.
func text(r respwire.Reply) (string, bool) {
	if (r.Kind == '+' || r.Kind == '$') && !r.Null {
		return r.Str, true
	}
	return "", false
}
