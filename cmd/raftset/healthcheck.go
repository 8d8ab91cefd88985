package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

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

// healthcheck probes the node at addr within timeout, over TLS when tlsCfg
// is not nil. It returns a short description of a healthy node, or why the
// node is not healthy.
func healthcheck(addr string, timeout time.Duration, writable bool, password string, tlsCfg *tls.Config) (string, error) {
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	if tlsCfg != nil {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.Handshake(); err != nil {
			return "", fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	c := &healthConn{w: conn, r: bufio.NewReader(conn)}

	if password != "" {
		reply, err := c.do("AUTH", password)
		if err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
		if reply != "OK" {
			return "", fmt.Errorf("AUTH: unexpected reply %q", reply)
		}
	}
	reply, err := c.do("PING")
	if err != nil {
		return "", fmt.Errorf("PING: %w", err)
	}
	if reply != "PONG" {
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
	info, ok := reply.(string)
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
	arr, ok := role.([]any)
	if !ok || len(arr) == 0 {
		return "", fmt.Errorf("ROLE: unexpected reply %v", role)
	}
	switch arr[0] {
	case "master":
		return "PONG, role master", nil
	case "slave":
		if len(arr) >= 4 && arr[3] == "connected" {
			return "PONG, role slave, connected", nil
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

// healthConn is just enough of a RESP client for a probe.
type healthConn struct {
	w io.Writer
	r *bufio.Reader
}

// errReply is a RESP error reply (-ERR ...).
type errReply string

func (e errReply) Error() string { return string(e) }

// do sends one command and reads its reply: string for simple and bulk
// strings, int64, nil, []any for arrays; an error reply is returned as error.
func (c *healthConn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.w, b.String()); err != nil {
		return nil, err
	}
	v, err := c.read(0)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(errReply); ok {
		return nil, e
	}
	return v, nil
}

const maxHealthBulk = 1 << 20 // INFO is a few KB; refuse anything absurd

func (c *healthConn) read(depth int) (any, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deeply")
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return errReply(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxHealthBulk {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, errors.New("bulk string not terminated by CRLF")
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 1024 {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = c.read(depth + 1); err != nil {
				return nil, err
			}
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected reply type %q", kind)
}
