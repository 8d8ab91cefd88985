package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"raftset/internal/testutil"
)

// httpsGet fetches url over a fresh connection (so every request makes its
// own handshake, with the certificate in force at that moment) with cfg,
// presenting token as a bearer when not empty. It returns the status, the
// body, and the error of a request that got no answer.
func httpsGet(t *testing.T, url string, cfg *tls.Config, token string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(b), nil
}

// TestMetricsTLS: with a tls-port, metrics-addr serves HTTPS with the client
// port's certificate (and its rotation), refuses plain HTTP, keeps
// metrics-auth on /metrics, asks /metrics (not the probes) for a client
// certificate while tls-auth-clients is yes, and metrics-tls no keeps it on
// plain HTTP.
func TestMetricsTLS(t *testing.T) {
	dir := t.TempDir()
	p := newTestPKI(t, dir, "a")
	stranger := newTestPKI(t, dir, "b")
	maddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	addr, _ := startTLSNode(t, p, false, "--metrics-addr", maddr, "--metrics-auth", metricsToken)
	base := "https://" + maddr
	withCert := p.clientTLS(t, "client")
	noCert := p.clientTLS(t, "")
	// What a kubelet's HTTPS probe does: no client certificate, no check of
	// the server's.
	kubelet := &tls.Config{InsecureSkipVerify: true}

	code, body, err := httpsGet(t, base+"/metrics", withCert, metricsToken)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics over HTTPS with the CA, a client certificate and the token = %d, %v: %s", code, err, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	// The node took at least the readiness write through the log.
	if v, ok := value(fams, "raftset_commands_total", "cmd", "set"); !ok || v < 1 {
		t.Errorf("raftset_commands_total{cmd=set} = %v, %v; want at least 1", v, ok)
	}
	if v, ok := value(fams, "raftset_raft_is_leader"); !ok || v != 1 {
		t.Errorf("raftset_raft_is_leader = %v, %v; want 1 on a single node", v, ok)
	}

	for _, tc := range []struct {
		name, path string
		cfg        *tls.Config
		token      string
		want       int
		body       string
	}{
		{"no token", "/metrics", withCert, "", http.StatusUnauthorized, "unauthorized\n"},
		{"a wrong token", "/metrics", withCert, "wrong", http.StatusUnauthorized, "unauthorized\n"},
		{"no client certificate (tls-auth-clients yes)", "/metrics", noCert, metricsToken, http.StatusForbidden,
			"a client certificate signed by the CA is required (tls-auth-clients yes)\n"},
		{"a probe without a certificate", "/livez", kubelet, "", http.StatusOK, "ok\n"},
		{"a probe without a certificate", "/readyz", kubelet, "", http.StatusOK, "ok\n"},
	} {
		code, body, err := httpsGet(t, base+tc.path, tc.cfg, tc.token)
		if tc.path == "/readyz" {
			// It may still be catching up to the commit index it saw.
			testutil.WaitFor(t, 20*time.Second, "GET /readyz with "+tc.name, func() bool {
				code, body, err = httpsGet(t, base+tc.path, tc.cfg, tc.token)
				return err == nil && code == tc.want
			})
		}
		if err != nil {
			t.Errorf("GET %s with %s: %v", tc.path, tc.name, err)
		} else if code != tc.want || body != tc.body {
			t.Errorf("GET %s with %s = %d %q, want %d %q", tc.path, tc.name, code, body, tc.want, tc.body)
		}
	}

	// Another CA's certificate is refused at the handshake, as on the
	// client port.
	strangerCert := stranger.clientTLS(t, "client")
	strangerCert.VerifyConnection = noCert.VerifyConnection
	if code, _, err := httpsGet(t, base+"/livez", strangerCert, ""); err == nil {
		t.Errorf("GET /livez with another CA's client certificate = %d, want a failed handshake", code)
	}
	// A client that trusts another CA does not trust this listener.
	if code, _, err := httpsGet(t, base+"/livez", stranger.clientTLS(t, ""), ""); err == nil {
		t.Errorf("GET /livez from a client trusting another CA = %d, want a failed handshake", code)
	}

	// Plain HTTP is refused: Go's answer to HTTP on an HTTPS port, nothing
	// served.
	for _, path := range []string{"/metrics", "/livez"} {
		code, body := httpGet(t, "http://"+maddr+path, metricsToken)
		if code != http.StatusBadRequest || !strings.Contains(body, "HTTP request to an HTTPS server") {
			t.Errorf("plain GET %s = %d %q, want 400 refusing plain HTTP", path, code, body)
		}
	}

	c := goRedis(t, addr, withCert)
	ctx := context.Background()
	// tls-auth-clients follows CONFIG SET: no drops the certificate
	// requirement, the token stays.
	if err := c.ConfigSet(ctx, "tls-auth-clients", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body, err := httpsGet(t, base+"/metrics", noCert, metricsToken); err != nil || code != http.StatusOK {
		t.Errorf("tls-auth-clients no: GET /metrics without a client certificate = %d, %v: %.200s", code, err, body)
	}
	if code, _, err := httpsGet(t, base+"/metrics", noCert, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("tls-auth-clients no: GET /metrics without the token = %d, %v; want 401", code, err)
	}

	// The listener serves the client port's certificate, rotated by CONFIG
	// SET tls-cert-file.
	if cn := serverCN(t, maddr, withCert); cn != "node" {
		t.Fatalf("the metrics listener presents %q, want the node certificate", cn)
	}
	p.issue(t, "node", "node-rotated", false)
	if err := c.ConfigSet(ctx, "tls-cert-file", p.path("node.crt")).Err(); err != nil {
		t.Fatalf("CONFIG SET tls-cert-file: %v", err)
	}
	if cn := serverCN(t, maddr, withCert); cn != "node-rotated" {
		t.Errorf("after CONFIG SET tls-cert-file the metrics listener presents %q, want node-rotated", cn)
	}
	if code, _, err := httpsGet(t, base+"/metrics", withCert, metricsToken); err != nil || code != http.StatusOK {
		t.Errorf("GET /metrics after the rotation = %d, %v", code, err)
	}
}

// TestMetricsTLSOff: metrics-tls no keeps plain HTTP next to a tls-port.
func TestMetricsTLSOff(t *testing.T) {
	p := newTestPKI(t, t.TempDir(), "a")
	maddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	startTLSNode(t, p, false, "--metrics-addr", maddr, "--metrics-auth", metricsToken, "--metrics-tls", "no")
	if code, body := httpGet(t, "http://"+maddr+"/metrics", metricsToken); code != http.StatusOK ||
		!strings.Contains(body, "\nraftset_raft_is_leader{shard=\"0\"} 1\n") {
		t.Errorf("metrics-tls no: plain GET /metrics = %d %.200q", code, body)
	}
	if code, _, err := httpsGet(t, "https://"+maddr+"/livez", p.clientTLS(t, "client"), ""); err == nil {
		t.Errorf("metrics-tls no: GET /livez over HTTPS = %d, want a failed handshake", code)
	}
}
