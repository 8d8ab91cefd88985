// Package metrics owns raftset's Prometheus registry and its HTTP endpoint
// (/metrics, /livez, /readyz). It reads the front end and the node through
// the interfaces below at scrape time, so counting costs them nothing more
// than what INFO already needs; hashicorp/raft's own go-metrics are routed
// into the same registry by RaftSink.
package metrics

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"raftset/internal/stats"
)

// Frontend is what the metrics read of the RESP front end (resp.Server).
type Frontend interface {
	CommandStats(fn func(stats.Command))
	ErrorStats(fn func(code string, count uint64))
	ClientStats() stats.Clients
}

// Node is what the metrics read of the replicated side: a cluster.Node,
// or a sharded process's cluster.Host.
type Node interface {
	// ShardStats are the replicas the process holds at this scrape, one
	// per Raft group: each is exported with its shard label.
	ShardStats() []stats.Node
	// ProcessStats are the figures of the process as a whole.
	ProcessStats() stats.Process
	// MetaStats is the metadata group as this process sees it; ok is
	// false on a process without shard-map, which has no such group and
	// exports none of its series.
	MetaStats() (m stats.Meta, ok bool)
	Ready() (bool, string)
}

// Metrics is a registry with raftset's collectors.
type Metrics struct {
	Registry *prometheus.Registry
	shutting atomic.Bool
	node     atomic.Pointer[Node]
}

// New returns a registry with the Go runtime and process collectors; Register
// adds raftset's own once the node is built, so the endpoint (and Raft's
// metrics, InstallRaftSink) can start before it.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Metrics{Registry: reg}
}

// Register adds the front end's and the node's series; /readyz asks node
// from then on (before, it answers "starting").
func (m *Metrics) Register(fe Frontend, node Node) error {
	if err := m.Registry.Register(&frontendCollector{fe: fe}); err != nil {
		return err
	}
	if err := m.Registry.Register(&nodeCollector{node: node, ready: m.ready}); err != nil {
		return err
	}
	m.node.Store(&node)
	return nil
}

// ready is what /readyz answers, and raftset_ready says.
func (m *Metrics) ready() (bool, string) {
	switch node := m.node.Load(); {
	case m.shutting.Load():
		return false, "shutting down"
	case node != nil:
		return (*node).Ready()
	}
	return false, "starting"
}

// ShuttingDown makes /readyz fail from now on (the process got SIGTERM).
func (m *Metrics) ShuttingDown() { m.shutting.Store(true) }

// Handler serves /metrics (behind auth when set), /livez and /readyz.
// auth is "user:password" for basic authentication or a bearer token; the
// probes need none, as they reveal nothing but up and ready.
func (m *Metrics) Handler(auth string) http.Handler { return m.HandlerFor(Access{Auth: auth}) }

// Access is who may read /metrics.
type Access struct {
	// Auth is "user:password" for basic authentication or a bearer token;
	// empty: no HTTP authentication.
	Auth string
	// ClientCert, when set and true at the time of a request, admits only a
	// request whose connection presented a client certificate the TLS
	// listener verified. It is asked per request because the listener
	// cannot ask for the certificate itself: it also serves the probes,
	// and a kubelet presents none.
	ClientCert func() bool
}

// HandlerFor is Handler with the access rules of a.
func (m *Metrics) HandlerFor(a Access) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	mux.Handle("/metrics", requireCert(a.ClientCert, authorize(a.Auth, metrics)))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := m.ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(why + "\n"))
	})
	return mux
}

// requireCert refuses a request without a verified client certificate
// while required says so. 403, not 401: no HTTP credential would help.
func requireCert(required func() bool, next http.Handler) http.Handler {
	if required == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if required() && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			http.Error(w, "a client certificate signed by the CA is required (tls-auth-clients yes)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize checks basic authentication ("user:password") or a bearer
// token, comparing in constant time.
func authorize(auth string, next http.Handler) http.Handler {
	if auth == "" {
		return next
	}
	want := sha256.Sum256([]byte(auth))
	basic := strings.Contains(auth, ":")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got string
		if basic {
			u, p, ok := r.BasicAuth()
			if ok {
				got = u + ":" + p
			}
		} else if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = tok
		}
		sum := sha256.Sum256([]byte(got))
		if got == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			if basic {
				w.Header().Set("WWW-Authenticate", `Basic realm="raftset metrics"`)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="raftset metrics"`)
			}
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
