package metrics

import (
	"strings"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// RaftSink routes the go-metrics that hashicorp/raft and raft-boltdb emit
// (through go-metrics/compat, whichever implementation it is built with)
// into the registry: a key such as raft.replication.appendEntries.rpc
// becomes raft_replication_append_entries_rpc_seconds. Timings become
// histograms in seconds, other samples histograms of their values, gauges
// gauges, counters counters with _total. Collectors are made on first use,
// so a series appears once Raft first emits it.
type RaftSink struct {
	reg prometheus.Registerer

	mu    sync.Mutex
	hists map[string]*prometheus.HistogramVec
	gauge map[string]*prometheus.GaugeVec
	count map[string]*prometheus.CounterVec
}

// notTimings are the samples that are not durations in milliseconds.
var notTimings = map[string]bool{
	"raft.fsm.applyBatchNum":    true,
	"raft.boltdb.logSize":       true,
	"raft.boltdb.logsPerBatch":  true,
	"raft.boltdb.logBatchSize":  true,
	"raft.boltdb.writeCapacity": true,
}

var (
	timeBuckets  = prometheus.ExponentialBuckets(0.00005, 2, 20) // 50 µs .. 26 s
	valueBuckets = prometheus.ExponentialBuckets(1, 4, 12)       // 1 .. 4 M
)

// InstallRaftSink makes a RaftSink on m's registry the process's go-metrics
// sink: from then on Raft's metrics are scraped with raftset's.
func (m *Metrics) InstallRaftSink() (*RaftSink, error) {
	s := &RaftSink{reg: m.Registry, hists: map[string]*prometheus.HistogramVec{},
		gauge: map[string]*prometheus.GaugeVec{}, count: map[string]*prometheus.CounterVec{}}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false // the Go collector has them
	cfg.EnableServiceLabel = false
	if _, err := gometrics.NewGlobal(cfg, s); err != nil {
		return nil, err
	}
	return s, nil
}

// promName turns a go-metrics key into a Prometheus name: camelCase parts
// become snake_case, anything else not allowed becomes '_'.
func promName(key []string) string {
	var b strings.Builder
	for i, part := range key {
		if i > 0 {
			b.WriteByte('_')
		}
		for j, r := range part {
			switch {
			case r >= 'A' && r <= 'Z':
				if j > 0 {
					b.WriteByte('_')
				}
				b.WriteRune(r + 'a' - 'A')
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
	}
	return b.String()
}

// skip drops the copies Raft emits with a peer's id in the key, beside the
// labelled ones: one series per peer per name would never expire.
func skip(key []string, labels []gometrics.Label) bool {
	return len(labels) == 0 && len(key) > 2 && key[0] == "raft" && key[1] == "replication"
}

func labelNames(labels []gometrics.Label) ([]string, []string) {
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i] = promName([]string{l.Name})
		values[i] = l.Value
	}
	return names, values
}

func vecKey(name string, labels []string) string { return name + "{" + strings.Join(labels, ",") + "}" }

// register registers c, or returns the collector already registered under
// its name (another label set of the same name is refused: nil).
func (s *RaftSink) register(c prometheus.Collector) prometheus.Collector {
	if err := s.reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			return are.ExistingCollector
		}
		return nil
	}
	return c
}

// SetGauge implements go-metrics' MetricSink.
func (s *RaftSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements go-metrics' MetricSink.
func (s *RaftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if skip(key, labels) {
		return
	}
	name := promName(key)
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	s.mu.Lock()
	g, ok := s.gauge[k]
	if !ok {
		g, _ = s.register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name,
			Help: "hashicorp/raft's " + strings.Join(key, ".")}, ln)).(*prometheus.GaugeVec)
		s.gauge[k] = g
	}
	s.mu.Unlock()
	if g != nil {
		g.WithLabelValues(lv...).Set(float64(val))
	}
}

// EmitKey implements go-metrics' MetricSink (Raft does not use it).
func (s *RaftSink) EmitKey([]string, float32) {}

// IncrCounter implements go-metrics' MetricSink.
func (s *RaftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements go-metrics' MetricSink.
func (s *RaftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if skip(key, labels) || val < 0 {
		return
	}
	name := promName(key) + "_total"
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	s.mu.Lock()
	c, ok := s.count[k]
	if !ok {
		c, _ = s.register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name,
			Help: "hashicorp/raft's " + strings.Join(key, ".")}, ln)).(*prometheus.CounterVec)
		s.count[k] = c
	}
	s.mu.Unlock()
	if c != nil {
		c.WithLabelValues(lv...).Add(float64(val))
	}
}

// AddSample implements go-metrics' MetricSink.
func (s *RaftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements go-metrics' MetricSink. go-metrics hands
// timings over in milliseconds.
func (s *RaftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if skip(key, labels) {
		return
	}
	dotted := strings.Join(key, ".")
	timing := !notTimings[dotted]
	name := promName(key)
	v := float64(val)
	buckets := valueBuckets
	if timing {
		name += "_seconds"
		v /= 1000
		buckets = timeBuckets
	}
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	s.mu.Lock()
	h, ok := s.hists[k]
	if !ok {
		h, _ = s.register(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name,
			Help: "hashicorp/raft's " + dotted, Buckets: buckets}, ln)).(*prometheus.HistogramVec)
		s.hists[k] = h
	}
	s.mu.Unlock()
	if h != nil {
		h.WithLabelValues(lv...).Observe(v)
	}
}
