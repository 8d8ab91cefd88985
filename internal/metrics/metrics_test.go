package metrics

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"raftset/internal/stats"
)

type fakeFE struct{}

func (fakeFE) CommandStats(fn func(stats.Command)) {
	var h stats.Hist
	h.AddN(20*time.Microsecond, 3)
	h.Add(2 * time.Second)
	s := h.Snapshot()
	fn(stats.Command{Name: "sadd", Group: "set", Calls: 4, Failed: 1, Hist: &s})
}
func (fakeFE) ErrorStats(fn func(string, uint64)) { fn("WRONGTYPE", 1) }
func (fakeFE) ClientStats() stats.Clients         { return stats.Clients{Connected: 2} }

type fakeNode struct {
	ready  bool
	shards []stats.Node // nil: one leader of shard 0
	meta   *stats.Meta  // nil: a process without shard-map
}

func (f *fakeNode) MetaStats() (stats.Meta, bool) {
	if f.meta == nil {
		return stats.Meta{}, false
	}
	return *f.meta, true
}

func (f *fakeNode) ShardStats() []stats.Node {
	if f.shards != nil {
		return f.shards
	}
	var b stats.Hist
	b.Add(1)
	b.Add(5)
	s := b.Snapshot()
	return []stats.Node{{State: "leader", Term: 3, BatchOps: &s,
		Followers: []stats.Follower{{ID: "n2", LagEntries: 7, Lag: time.Second, SinceContact: time.Millisecond}, {ID: "n3", SinceContact: -1}}}}
}
func (f *fakeNode) ProcessStats() stats.Process {
	return stats.Process{HeapBytes: 1 << 20, RSSBytes: 2 << 20}
}
func (f *fakeNode) Ready() (bool, string) {
	if f.ready {
		return true, "ok"
	}
	return false, "no leader"
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestProbesAndAuth(t *testing.T) {
	m := New()
	h := m.Handler("u:p")
	if code, body := get(t, h, "/livez"); code != 200 || body != "ok\n" {
		t.Errorf("/livez = %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || body != "starting\n" {
		t.Errorf("/readyz before Register = %d %q", code, body)
	}
	node := &fakeNode{}
	if err := m.Register(fakeFE{}, node); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || body != "no leader\n" {
		t.Errorf("/readyz not ready = %d %q", code, body)
	}
	node.ready = true
	if code, _ := get(t, h, "/readyz"); code != 200 {
		t.Errorf("/readyz ready = %d", code)
	}
	m.ShuttingDown()
	if code, body := get(t, h, "/readyz"); code != 503 || body != "shutting down\n" {
		t.Errorf("/readyz shutting down = %d %q", code, body)
	}
	if code, _ := get(t, h, "/metrics"); code != 401 {
		t.Errorf("/metrics without credentials = %d", code)
	}
	if code, _ := get(t, h, "/metrics", "Authorization", "Basic dTp4"); code != 401 { // u:x
		t.Errorf("/metrics with a wrong password = %d", code)
	}
	code, body := get(t, h, "/metrics", "Authorization", "Basic dTpw") // u:p
	if code != 200 {
		t.Fatalf("/metrics with basic auth = %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	d := fams["raftset_command_duration_seconds"]
	if d == nil || len(d.Metric) != 1 || d.Metric[0].Histogram.GetSampleCount() != 4 {
		t.Fatalf("raftset_command_duration_seconds = %v", d)
	}
	for _, b := range d.Metric[0].Histogram.Bucket {
		want := uint64(0)
		switch ub := b.GetUpperBound(); {
		case ub >= 2.0000001:
			want = 4
		case ub >= 20e-6:
			want = 3
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	lag := fams["raftset_raft_follower_lag_entries"]
	if lag == nil || len(lag.Metric) != 1 || lag.Metric[0].Gauge.GetValue() != 7 {
		t.Errorf("lag series = %v (a follower not heard from has none)", lag)
	}
	g := fams["raftset_group_commit_ops"]
	if g == nil || g.Metric[0].Histogram.GetSampleSum() != 6 || g.Metric[0].Histogram.Bucket[0].GetCumulativeCount() != 1 {
		t.Errorf("raftset_group_commit_ops = %v", g)
	}

	bearer := New().Handler("tok")
	if code, _ := get(t, bearer, "/metrics", "Authorization", "Bearer tok"); code != 200 {
		t.Errorf("bearer = %d", code)
	}
	if code, _ := get(t, bearer, "/metrics", "Authorization", "Bearer to"); code != 401 {
		t.Errorf("wrong bearer = %d", code)
	}
}

func TestRaftSinkNames(t *testing.T) {
	m := New()
	s, err := m.InstallRaftSink()
	if err != nil {
		t.Fatal(err)
	}
	gometrics.MeasureSince([]string{"raft", "commitTime"}, time.Now().Add(-3*time.Millisecond))
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 2, []gometrics.Label{{Name: "peer_id", Value: "n2"}})
	s.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "n2"}, 2) // the unlabelled copy: dropped
	s.AddSample([]string{"raft", "boltdb", "logsPerBatch"}, 5)
	s.IncrCounter([]string{"raft", "state", "leader"}, 1)
	s.SetGauge([]string{"raft", "peers"}, 3)
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fams {
		got[f.GetName()] = true
		if f.GetName() == "raft_commit_time_seconds" {
			if sum := f.Metric[0].Histogram.GetSampleSum(); sum < 0.003 || sum > 1 {
				t.Errorf("raft_commit_time_seconds sum = %v, want about 0.003", sum)
			}
		}
	}
	for _, want := range []string{"raft_commit_time_seconds", "raft_replication_append_entries_rpc_seconds",
		"raft_boltdb_logs_per_batch", "raft_state_leader_total", "raft_peers"} {
		if !got[want] {
			t.Errorf("%s missing: %v", want, got)
		}
	}
	for name := range got {
		if strings.Contains(name, "n2") {
			t.Errorf("a series named after a peer: %s", name)
		}
	}
}

func BenchmarkRaftSink(b *testing.B) {
	m := New()
	s := &RaftSink{reg: m.Registry, hists: map[string]*prometheus.HistogramVec{},
		gauge: map[string]*prometheus.GaugeVec{}, count: map[string]*prometheus.CounterVec{}}
	labels := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.AddSample([]string{"raft", "commitTime"}, 1.5)
			s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 1.5, labels)
			s.IncrCounter([]string{"raft", "apply"}, 1)
			s.SetGauge([]string{"raft", "commitNumLogs"}, 3)
		}
	})
}

// TestClientCertAccess: while ClientCert says so, /metrics needs a verified
// client certificate and the auth on top; the probes need neither.
func TestClientCertAccess(t *testing.T) {
	required := true
	h := New().HandlerFor(Access{Auth: "tok", ClientCert: func() bool { return required }})
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
	for _, tc := range []struct {
		name     string
		path     string
		state    *tls.ConnectionState
		token    string
		required bool
		want     int
	}{
		{"plain HTTP, token", "/metrics", nil, "tok", true, 403},
		{"TLS without a certificate, token", "/metrics", &tls.ConnectionState{}, "tok", true, 403},
		{"verified certificate, token", "/metrics", verified, "tok", true, 200},
		{"verified certificate, no token", "/metrics", verified, "", true, 401},
		{"no certificate, not required, token", "/metrics", &tls.ConnectionState{}, "tok", false, 200},
		{"no certificate, not required, no token", "/metrics", &tls.ConnectionState{}, "", false, 401},
		{"probe without a certificate", "/livez", &tls.ConnectionState{}, "", true, 200},
		{"probe without a certificate", "/readyz", &tls.ConnectionState{}, "", true, 503},
	} {
		required = tc.required
		r := httptest.NewRequest("GET", tc.path, nil)
		r.TLS = tc.state
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s %s: %d, want %d (%s)", tc.path, tc.name, w.Code, tc.want, w.Body.String())
		}
	}
}
