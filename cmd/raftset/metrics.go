package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/metrics"
	"raftset/internal/tlsconf"
)

// metricsServer is the HTTP listener of metrics-addr: /metrics, /livez,
// /readyz.
type metricsServer struct {
	m   *metrics.Metrics
	srv *http.Server
}

// startMetrics listens on metrics-addr and routes Raft's go-metrics into the
// registry. It runs before the Raft node starts, so /livez answers and the
// start-up's restore timings are kept; nil when metrics-addr is empty.
func startMetrics(cfg *Config, ct *clientTLS, log hclog.Logger) (*metricsServer, error) {
	if cfg.MetricsAddr == "" {
		return nil, nil
	}
	m := metrics.New()
	if _, err := m.InstallRaftSink(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	access := metrics.Access{Auth: cfg.MetricsAuth}
	tlsCfg := ct.metricsTLS(cfg)
	if tlsCfg != nil {
		access.ClientCert = func() bool {
			auth, _ := ct.current()
			return auth == tlsconf.ClientAuthYes
		}
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics-addr: %w", err)
	}
	ms := &metricsServer{m: m, srv: &http.Server{Handler: m.HandlerFor(access), ReadHeaderTimeout: 10 * time.Second,
		// Failed handshakes (a scanner, a plain-HTTP probe) are anyone's
		// to cause: debug, as on the TLS client port.
		ErrorLog: log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})}}
	served := ln
	if tlsCfg != nil {
		served = tls.NewListener(ln, tlsCfg)
	}
	go func() {
		if err := ms.srv.Serve(served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "auth", cfg.MetricsAuth != "", "tls", tlsCfg != nil)
	return ms, nil
}

// metricsTLS is the metrics listener's TLS, nil for plain HTTP: with
// metrics-tls yes and a tls-port, the client port's certificate store and
// settings, so that CONFIG SET tls-cert-file (and a rotation in place), tls-
// protocols and tls-ciphers reach it at the next handshake. A client
// certificate is asked for but not required at the handshake whatever
// tls-auth-clients says: the probes share the listener, and HandlerFor
// requires one for /metrics alone. A certificate that is presented must
// still verify, or the handshake fails.
func (ct *clientTLS) metricsTLS(cfg *Config) *tls.Config {
	if cfg.MetricsTLS != "yes" || ct.store == nil {
		return nil
	}
	return ct.store.ClientServerFunc(func() (tlsconf.ClientAuth, tlsconf.Options) {
		auth, opts := ct.current()
		if auth == tlsconf.ClientAuthYes {
			auth = tlsconf.ClientAuthOptional
		}
		return auth, opts
	})
}

// register adds the node's series once it is built.
func (ms *metricsServer) register(fe metrics.Frontend, node metrics.Node) error {
	if ms == nil {
		return nil
	}
	return ms.m.Register(fe, node)
}

// shuttingDown makes /readyz fail while the node stops.
func (ms *metricsServer) shuttingDown() {
	if ms != nil {
		ms.m.ShuttingDown()
	}
}

func (ms *metricsServer) close() {
	if ms != nil {
		_ = ms.srv.Close()
	}
}
