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

	// children caches the series of each (kind, key, labels) seen, so
	// that Raft's steady stream of samples (a score per log entry) costs a
	// map lookup without allocation and an atomic add, not a name to build.
	cmu      sync.RWMutex
	children map[string]child
}

// child is one series: an observer (with the factor go-metrics' value is
// multiplied by), a gauge or a counter.
type child struct {
	obs   prometheus.Observer
	scale float64
	g     prometheus.Gauge
	c     prometheus.Counter
}

// cacheKey appends kind, the key's parts and the labels to buf.
func cacheKey(buf []byte, kind byte, key []string, labels []gometrics.Label) []byte {
	buf = append(buf, kind)
	for _, k := range key {
		buf = append(buf, k...)
		buf = append(buf, 0)
	}
	for _, l := range labels {
		buf = append(buf, 1)
		buf = append(buf, l.Name...)
		buf = append(buf, 0)
		buf = append(buf, l.Value...)
	}
	return buf
}

// cached returns the series cached for (kind, key, labels).
func (s *RaftSink) cached(kind byte, key []string, labels []gometrics.Label) (child, bool) {
	var arr [256]byte
	k := cacheKey(arr[:0], kind, key, labels)
	s.cmu.RLock()
	c, ok := s.children[string(k)]
	s.cmu.RUnlock()
	return c, ok
}

func (s *RaftSink) cache(kind byte, key []string, labels []gometrics.Label, c child) {
	k := string(cacheKey(nil, kind, key, labels))
	s.cmu.Lock()
	if s.children == nil {
		s.children = make(map[string]child)
	}
	s.children[k] = c
	s.cmu.Unlock()
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

// vecOf returns the vector kept in m under k, registering the one mk makes
// on first use. It is nil (and stays nil in m) when the name is already
// registered with other label names.
func vecOf[V interface {
	*prometheus.GaugeVec | *prometheus.CounterVec | *prometheus.HistogramVec
	prometheus.Collector
}](s *RaftSink, m map[string]V, k string, mk func() V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[k]
	if !ok {
		v, _ = s.register(mk()).(V)
		m[k] = v
	}
	return v
}

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
	if c, ok := s.cached('g', key, labels); ok {
		if c.g != nil {
			c.g.Set(float64(val))
		}
		return
	}
	if skip(key, labels) {
		s.cache('g', key, labels, child{})
		return
	}
	name := promName(key)
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	g := vecOf(s, s.gauge, k, func() *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "hashicorp/raft's " + strings.Join(key, ".")}, ln)
	})
	if g == nil {
		s.cache('g', key, labels, child{})
		return
	}
	gc := g.WithLabelValues(lv...)
	s.cache('g', key, labels, child{g: gc})
	gc.Set(float64(val))
}

// EmitKey implements go-metrics' MetricSink (Raft does not use it).
func (s *RaftSink) EmitKey([]string, float32) {}

// IncrCounter implements go-metrics' MetricSink.
func (s *RaftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements go-metrics' MetricSink.
func (s *RaftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if val < 0 {
		return
	}
	if c, ok := s.cached('c', key, labels); ok {
		if c.c != nil {
			c.c.Add(float64(val))
		}
		return
	}
	if skip(key, labels) {
		s.cache('c', key, labels, child{})
		return
	}
	name := promName(key) + "_total"
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	c := vecOf(s, s.count, k, func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "hashicorp/raft's " + strings.Join(key, ".")}, ln)
	})
	if c == nil {
		s.cache('c', key, labels, child{})
		return
	}
	cc := c.WithLabelValues(lv...)
	s.cache('c', key, labels, child{c: cc})
	cc.Add(float64(val))
}

// AddSample implements go-metrics' MetricSink.
func (s *RaftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements go-metrics' MetricSink. go-metrics hands
// timings over in milliseconds.
func (s *RaftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if c, ok := s.cached('h', key, labels); ok {
		if c.obs != nil {
			c.obs.Observe(float64(val) * c.scale)
		}
		return
	}
	if skip(key, labels) {
		s.cache('h', key, labels, child{})
		return
	}
	dotted := strings.Join(key, ".")
	timing := !notTimings[dotted]
	name := promName(key)
	scale := 1.0
	buckets := valueBuckets
	if timing {
		name += "_seconds"
		scale = 1.0 / 1000
		buckets = timeBuckets
	}
	ln, lv := labelNames(labels)
	k := vecKey(name, ln)
	h := vecOf(s, s.hists, k, func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: "hashicorp/raft's " + dotted, Buckets: buckets}, ln)
	})
	if h == nil {
		s.cache('h', key, labels, child{})
		return
	}
	o := h.WithLabelValues(lv...)
	s.cache('h', key, labels, child{obs: o, scale: scale})
	o.Observe(float64(val) * scale)
}
