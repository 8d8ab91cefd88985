package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/metrics"
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
func startMetrics(cfg *Config, log hclog.Logger) (*metricsServer, error) {
	if cfg.MetricsAddr == "" {
		return nil, nil
	}
	m := metrics.New()
	if _, err := m.InstallRaftSink(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics-addr: %w", err)
	}
	ms := &metricsServer{m: m, srv: &http.Server{Handler: m.Handler(cfg.MetricsAuth), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "auth", cfg.MetricsAuth != "")
	return ms, nil
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
