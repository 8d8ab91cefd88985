package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"raftset/internal/certgen"
	"raftset/internal/testutil"
	"raftset/internal/tlsconf"
)

// testPKI is a CA with a node certificate for 127.0.0.1 and a client
// certificate, written to dir as PREFIX-ca.crt, PREFIX-node.crt/.key and
// PREFIX-client.crt/.key.
type testPKI struct {
	dir, prefix string
	ca          certgen.Pair
}

func newTestPKI(t *testing.T, dir, prefix string) *testPKI {
	t.Helper()
	ca, err := certgen.NewCA(prefix+"-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir, prefix: prefix, ca: ca}
	writeFile(t, p.path("ca.crt"), ca.CertPEM)
	p.issue(t, "node", "node", false)
	p.issue(t, "client", "client", true)
	return p
}

func (p *testPKI) path(name string) string { return filepath.Join(p.dir, p.prefix+"-"+name) }

// issue writes a certificate named cn to file.crt and file.key.
func (p *testPKI) issue(t *testing.T, file, cn string, client bool) {
	t.Helper()
	pair, err := certgen.NewNode(p.ca, certgen.NodeSpec{Name: cn, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, ClientOnly: client})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p.path(file+".crt"), pair.CertPEM)
	writeFile(t, p.path(file+".key"), pair.KeyPEM)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serverArgs are the tls-* directives of a node using p's node certificate.
func (p *testPKI) serverArgs(tlsPort int) []string {
	return []string{"--tls-port", fmt.Sprint(tlsPort), "--tls-cert-file", p.path("node.crt"),
		"--tls-key-file", p.path("node.key"), "--tls-ca-cert-file", p.path("ca.crt")}
}

// clientTLS is what a client trusting p's CA uses, presenting the
// certificate file (none when file is "").
func (p *testPKI) clientTLS(t *testing.T, file string) *tls.Config {
	t.Helper()
	files := tlsconf.Files{CA: p.path("ca.crt")}
	if file != "" {
		files.Cert, files.Key = p.path(file+".crt"), p.path(file+".key")
	}
	c, err := tlsconf.ClientConfig(files, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startTLSNode runs a node with a TLS port (and a plain one unless tlsOnly)
// and waits until it accepts writes over TLS. It returns the TLS address.
func startTLSNode(t *testing.T, p *testPKI, tlsOnly bool, extra ...string) (string, *node) {
	t.Helper()
	tlsPort := testutil.FreePort(t)
	port := 0
	if !tlsOnly {
		port = testutil.FreePort(t)
	}
	args := append([]string{"--port", fmt.Sprint(port),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		"--dir", filepath.Join(t.TempDir(), "data"), "--loglevel", "warn"}, p.serverArgs(tlsPort)...)
	n := runNode(t, append(args, extra...)...)
	addr := fmt.Sprintf("127.0.0.1:%d", tlsPort)
	c := goRedis(t, addr, p.clientTLS(t, "client"))
	testutil.WaitFor(t, 20*time.Second, "the node to accept writes over TLS", func() bool {
		return c.Set(context.Background(), "__raftset_ready", "1", 0).Err() == nil
	})
	c.Del(context.Background(), "__raftset_ready")
	return addr, n
}

func goRedis(t *testing.T, addr string, cfg *tls.Config) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: cfg, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 5 * time.Second, PoolSize: 1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// serverCN is the common name of the certificate the node at addr presents.
func serverCN(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestClientTLSGoRedis(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	stranger := newTestPKI(t, dir, "b")
	addr, n := startTLSNode(t, p, false)
	ctx := context.Background()

	c := goRedis(t, addr, p.clientTLS(t, "client"))
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if got, err := c.SAdd(ctx, "s", "a", "b", "c").Result(); err != nil || got != 3 {
		t.Fatalf("SADD = %d, %v", got, err)
	}
	if got, err := c.SMembers(ctx, "s").Result(); err != nil || len(got) != 3 {
		t.Fatalf("SMEMBERS = %q, %v", got, err)
	}
	// The plain port serves the same data.
	plain := dial(t, n.server.Addr().String())
	if got := do(t, plain, "SCARD", "s"); got != ":3\r\n" {
		t.Errorf("SCARD on the plain port = %q", got)
	}

	// tls-auth-clients yes (the default): no certificate, or one from
	// another CA, is refused.
	anon := p.clientTLS(t, "")
	strangerCert := stranger.clientTLS(t, "client")
	strangerCert.VerifyConnection = anon.VerifyConnection // trusts our CA for the server
	for name, cfg := range map[string]*tls.Config{"no certificate": anon, "another CA's certificate": strangerCert} {
		if err := goRedis(t, addr, cfg).Ping(ctx).Err(); err == nil {
			t.Errorf("tls-auth-clients yes: a client with %s was served", name)
		}
	}
	// optional admits a client without a certificate, still not a wrong one.
	if err := c.ConfigSet(ctx, "tls-auth-clients", "optional").Err(); err != nil {
		t.Fatal(err)
	}
	if err := goRedis(t, addr, anon).Ping(ctx).Err(); err != nil {
		t.Errorf("tls-auth-clients optional: a client without a certificate: %v", err)
	}
	if err := goRedis(t, addr, strangerCert).Ping(ctx).Err(); err == nil {
		t.Error("tls-auth-clients optional: another CA's certificate was served")
	}
	if got, _ := c.ConfigGet(ctx, "tls-auth-clients").Result(); got["tls-auth-clients"] != "optional" {
		t.Errorf("CONFIG GET tls-auth-clients = %v", got)
	}
	if err := c.ConfigSet(ctx, "tls-auth-clients", "maybe").Err(); err == nil ||
		err.Error() != "ERR CONFIG SET failed (possibly related to argument 'tls-auth-clients') - argument(s) must be one of the following: no, yes, optional" {
		t.Errorf("CONFIG SET tls-auth-clients maybe: %v", err)
	}
	// tls-protocols applies to the next handshake.
	if err := c.ConfigSet(ctx, "tls-protocols", "TLSv1.3").Err(); err != nil {
		t.Fatal(err)
	}
	old := p.clientTLS(t, "client")
	old.MaxVersion = tls.VersionTLS12
	if err := goRedis(t, addr, old).Ping(ctx).Err(); err == nil {
		t.Error("tls-protocols TLSv1.3: a TLS 1.2 client was served")
	}
}

// TestClientTLSCertificateReload: CONFIG SET tls-cert-file re-reads the
// certificate for the next handshake; a broken file is refused with Redis's
// error and the certificate in force stays.
func TestClientTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	addr, _ := startTLSNode(t, p, true)
	ctx := context.Background()
	cli := p.clientTLS(t, "client")
	c := goRedis(t, addr, cli)
	if cn := serverCN(t, addr, cli); cn != "node" {
		t.Fatalf("serving %q", cn)
	}

	// Rotation in place: same file names, new contents.
	p.issue(t, "node", "node-rotated", false)
	if err := c.ConfigSet(ctx, "tls-cert-file", p.path("node.crt")).Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file (same path): %v", err)
	}
	if cn := serverCN(t, addr, cli); cn != "node-rotated" {
		t.Fatalf("after reload: serving %q", cn)
	}
	// New files, set together in one CONFIG SET.
	p.issue(t, "node2", "node-2", false)
	if err := c.Do(ctx, "CONFIG", "SET", "tls-cert-file", p.path("node2.crt"), "tls-key-file", p.path("node2.key")).Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file tls-key-file: %v", err)
	}
	if cn := serverCN(t, addr, cli); cn != "node-2" {
		t.Fatalf("after switching files: serving %q", cn)
	}
	if got := c.ConfigGet(ctx, "tls-*-file").Val(); got["tls-cert-file"] != p.path("node2.crt") || got["tls-key-file"] != p.path("node2.key") {
		t.Errorf("CONFIG GET tls-*-file = %v", got)
	}
	// The established connection keeps working across reloads.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING on the connection made before the reload: %v", err)
	}

	// A broken file is refused; the old certificate and file names stay.
	broken := filepath.Join(dir, "broken.crt")
	writeFile(t, broken, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"))
	want := "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
	for _, args := range [][]any{{"tls-cert-file", broken}, {"tls-cert-file", filepath.Join(dir, "missing.crt")},
		{"tls-cert-file", p.path("node.crt")}} { // a key that does not match
		if err := c.ConfigSet(ctx, args[0].(string), args[1].(string)).Err(); err == nil || err.Error() != want {
			t.Errorf("CONFIG SET %v: %v, want %q", args, err, want)
		}
	}
	if got := c.ConfigGet(ctx, "tls-cert-file").Val()["tls-cert-file"]; got != p.path("node2.crt") {
		t.Errorf("after refused sets, tls-cert-file = %q, want the previous file", got)
	}
	if cn := serverCN(t, addr, cli); cn != "node-2" {
		t.Errorf("after refused sets: serving %q, want the previous certificate", cn)
	}
	// The same when the file in force is overwritten with garbage.
	writeFile(t, p.path("node2.crt"), []byte("garbage"))
	if err := c.ConfigSet(ctx, "tls-cert-file", p.path("node2.crt")).Err(); err == nil {
		t.Error("reloading a file overwritten with garbage succeeded")
	}
	if cn := serverCN(t, addr, cli); cn != "node-2" {
		t.Errorf("after a broken rotation: serving %q, want the previous certificate", cn)
	}
}

// TestClientTLSOnly: port 0 with a tls-port serves TLS only, reports ports
// as Redis does, and the healthcheck probes it with --tls.
func TestClientTLSOnly(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	addr, n := startTLSNode(t, p, true)
	_, tlsPort, _ := net.SplitHostPort(addr)
	ctx := context.Background()
	c := goRedis(t, addr, p.clientTLS(t, "client"))
	if got := c.ConfigGet(ctx, "*port").Val(); got["port"] != "0" || got["tls-port"] != tlsPort {
		t.Errorf("CONFIG GET *port = %v", got)
	}
	info := c.Info(ctx, "server").Val()
	if !strings.Contains(info, "\r\ntcp_port:"+tlsPort+"\r\n") {
		t.Errorf("INFO server: want tcp_port:%s (Redis reports tls-port when port is 0):\n%s", tlsPort, info)
	}
	if a := n.server.Addr().String(); a != addr {
		t.Errorf("the node listens at %s, want only %s", a, addr)
	}

	hc := []string{"--addr", addr, "--tls", "--cacert", p.path("ca.crt"), "--cert", p.path("client.crt"), "--key", p.path("client.key")}
	if code, out := runHC(t, append(hc, "--writable")...); code != 0 {
		t.Errorf("healthcheck --tls: exit %d: %s", code, out)
	}
	if code, out := runHC(t, "--addr", addr); code != 1 {
		t.Errorf("healthcheck without --tls against the TLS port: exit %d: %s", code, out)
	}
	if code, out := runHC(t, hc[:5]...); code != 1 {
		t.Errorf("healthcheck --tls without a client certificate: exit %d: %s", code, out)
	}
	t.Setenv("RAFTSET_HEALTH_TLS", "yes")
	t.Setenv("RAFTSET_HEALTH_CACERT", p.path("ca.crt"))
	t.Setenv("RAFTSET_HEALTH_CERT", p.path("client.crt"))
	t.Setenv("RAFTSET_HEALTH_KEY", p.path("client.key"))
	if code, out := runHC(t, "--addr", addr); code != 0 {
		t.Errorf("healthcheck with TLS from the environment: exit %d: %s", code, out)
	}
}

func TestClientTLSStartErrors(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "0"}, "not listen anywhere"},
		{[]string{"--port", "0", "--tls-port", "1", "--tls-cert-file", p.path("node.crt")}, "a key file"},
		{[]string{"--port", "0", "--tls-port", "1", "--tls-cert-file", p.path("node.crt"), "--tls-key-file", p.path("node.key")},
			"tls-ca-cert-file is needed"},
	} {
		cfg, err := LoadConfig(append([]string{"--dir", filepath.Join(dir, "data"),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		n, err := start(cfg, io.Discard)
		if err == nil {
			_ = n.close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: start error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"--tls-ciphers", "RC4-MD5"}, {"--tls-auth-clients", "maybe"},
		{"--tls-protocols", "TLSv1"}, {"--tls-ciphersuites", "ECDHE-RSA-AES128-GCM-SHA256"}} {
		if _, err := LoadConfig(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestClientTLSRedisCLI drives the TLS port with Debian's redis-cli.
func TestClientTLSRedisCLI(t *testing.T) {
	cli := testutil.RequireTool(t, "redis-cli", "redis-tools")
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	stranger := newTestPKI(t, dir, "b")
	addr, _ := startTLSNode(t, p, true)
	host, port, _ := net.SplitHostPort(addr)
	run := func(extra []string, args ...string) (string, error) {
		cmd := exec.Command(cli, append(append([]string{"-h", host, "-p", port, "--tls", "--cacert", p.path("ca.crt")}, extra...), args...)...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	mine := []string{"--cert", p.path("client.crt"), "--key", p.path("client.key")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SADD", "k", "x", "y"}, "2"},
		{[]string{"SMEMBERS", "k"}, "x\ny"},
	} {
		got, err := run(mine, tc.args...)
		if err != nil || got != tc.want {
			t.Errorf("redis-cli --tls %q = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	for name, extra := range map[string][]string{
		"no certificate":           nil,
		"another CA's certificate": {"--cert", stranger.path("client.crt"), "--key", stranger.path("client.key")},
	} {
		if got, _ := run(extra, "PING"); got == "PONG" {
			t.Errorf("redis-cli with %s was served", name)
		}
	}
}
