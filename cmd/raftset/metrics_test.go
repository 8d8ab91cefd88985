package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"raftset/internal/testutil"
)

const metricsToken = "s3cret-token"

// startMetricsCluster is startCluster with metrics-addr on every node; it
// returns the nodes and their metrics addresses.
func startMetricsCluster(t *testing.T, size int) ([]*clusterProc, []string) {
	t.Helper()
	var peers []string
	nodes := make([]*clusterProc, size)
	raftAddrs := make([]string, size)
	maddrs := make([]string, size)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		raftAddrs[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		maddrs[i] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		peers = append(peers, id+"="+raftAddrs[i])
		nodes[i] = &clusterProc{id: id, dir: filepath.Join(t.TempDir(), id),
			addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	}
	for i, cp := range nodes {
		_, port, _ := net.SplitHostPort(cp.addr)
		cp.extra = []string{"--port", port, "--raft-addr", raftAddrs[i], "--node-id", cp.id,
			"--peers", strings.Join(peers, ","), "--loglevel", "info",
			"--metrics-addr", maddrs[i], "--metrics-auth", metricsToken}
		cp.start(t)
	}
	for _, cp := range nodes {
		waitWritable(t, cp.addr)
	}
	return nodes, maddrs
}

func httpGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape fetches /metrics and parses the exposition format.
func scrape(t *testing.T, maddr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+maddr+"/metrics", metricsToken)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of fam whose labels include want
// (counter, gauge, or a histogram's count), and whether it exists.
func value(fams map[string]*dto.MetricFamily, fam string, want ...string) (float64, bool) {
	f := fams[fam]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// replicationLag parses the leader's INFO replication line of the follower
// on port: its lag (s), lag_entries and lag_ms.
func replicationLag(t *testing.T, c *testutil.RESPClient, port string) (lag, entries, ms int64, ok bool) {
	t.Helper()
	r := testutil.ParseReply(do(t, c, "INFO", "replication")).Str
	re := regexp.MustCompile(`slave\d+:ip=[^,]+,port=` + port + `,state=online,offset=(\d+),lag=(-?\d+),lag_entries=(\d+),lag_ms=(\d+)`)
	m := re.FindStringSubmatch(r)
	if m == nil {
		return 0, 0, 0, false
	}
	lag, _ = strconv.ParseInt(m[2], 10, 64)
	entries, _ = strconv.ParseInt(m[3], 10, 64)
	ms, _ = strconv.ParseInt(m[4], 10, 64)
	return lag, entries, ms, true
}

// TestMetricsAndLagProcesses runs a 3-node cluster with metrics on: the
// probes, the endpoint's auth and series, a paused follower whose lag grows
// in INFO and in the metrics and shrinks once it runs again, a slow command
// in SLOWLOG, the Grafana dashboard's queries against what a node exports,
// and /readyz failing once the node has lost its quorum.
func TestMetricsAndLagProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	nodes, maddrs := startMetricsCluster(t, 3)
	l := leaderOf(t, nodes, nil)
	li := 0
	for i, cp := range nodes {
		if cp == l {
			li = i
		}
	}
	for _, ma := range maddrs {
		if code, body := httpGet(t, "http://"+ma+"/livez", ""); code != 200 || body != "ok\n" {
			t.Errorf("/livez on %s = %d %q", ma, code, body)
		}
		testutil.WaitFor(t, 10*time.Second, "/readyz on "+ma, func() bool {
			code, _ := httpGet(t, "http://"+ma+"/readyz", "")
			return code == 200
		})
	}
	if code, _ := httpGet(t, "http://"+maddrs[li]+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token = %d, want 401", code)
	}
	if code, _ := httpGet(t, "http://"+maddrs[li]+"/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token = %d, want 401", code)
	}

	c := dial(t, l.addr)
	for i := range 200 {
		do(t, c, "SADD", "s", strconv.Itoa(i))
	}
	do(t, c, "SET", "str", "v")
	do(t, c, "SADD", "str", "x") // WRONGTYPE
	do(t, c, "SAVE")
	// A follower forwards writes and runs reads through the read index.
	fc := dial(t, followersOf(nodes, l)[0].addr)
	do(t, fc, "SADD", "f", "1")
	do(t, fc, "SCARD", "s")

	fams := scrape(t, maddrs[li])
	checks := []struct {
		fam    string
		labels []string
		min    float64
	}{
		{"raftset_commands_total", []string{"cmd", "sadd"}, 200},
		{"raftset_command_failed_total", []string{"cmd", "sadd"}, 1},
		{"raftset_errors_total", []string{"error", "WRONGTYPE"}, 1},
		{"raftset_command_duration_seconds", []string{"family", "set"}, 200},
		{"raftset_raft_is_leader", nil, 1},
		{"raftset_raft_has_leader", nil, 1},
		{"raftset_ready", nil, 1},
		{"raftset_raft_term", nil, 1},
		{"raftset_raft_commit_index", nil, 200},
		{"raftset_raft_applied_index", nil, 200},
		{"raftset_raft_leader_changes_total", nil, 1},
		{"raftset_raft_entries_proposed_total", nil, 1},
		{"raftset_group_commit_ops", nil, 1},
		{"raftset_read_index_rounds_total", nil, 1},
		{"raftset_keys", nil, 2},
		{"raftset_connected_clients", nil, 1},
		{"raftset_memory_heap_bytes", nil, 1},
		{"raftset_memory_rss_bytes", nil, 1},
		{"raftset_snapshot_size_bytes", nil, 1},
		{"raftset_evicted_keys_total", nil, 0},
		{"raft_commit_time_seconds", nil, 1},
		{"raft_fsm_apply_batch_seconds", nil, 1},
		{"raftset_log_store_logs_seconds", nil, 1},
		{"raft_snapshot_persist_seconds", nil, 1},
		{"process_cpu_seconds_total", nil, 0},
	}
	for _, f := range followersOf(nodes, l) {
		checks = append(checks,
			struct {
				fam    string
				labels []string
				min    float64
			}{"raftset_raft_follower_lag_entries", []string{"peer", f.id}, 0},
			struct {
				fam    string
				labels []string
				min    float64
			}{"raft_replication_append_entries_rpc_seconds", []string{"peer_id", f.id}, 1})
	}
	for _, ch := range checks {
		v, ok := value(fams, ch.fam, ch.labels...)
		if !ok || v < ch.min {
			t.Errorf("%s%v = %v (present %v), want ≥ %v", ch.fam, ch.labels, v, ok, ch.min)
		}
	}
	ffams := scrape(t, maddrs[indexOf(nodes, followersOf(nodes, l)[0])])
	if v, _ := value(ffams, "raftset_forwarded_write_ops_total"); v < 1 {
		t.Errorf("follower's raftset_forwarded_write_ops_total = %v", v)
	}
	if v, _ := value(ffams, "raftset_raft_is_leader"); v != 0 {
		t.Errorf("follower's raftset_raft_is_leader = %v", v)
	}
	checkDashboard(t, false, fams, ffams)
	// No shard-map, no metadata group: none of its series.
	for _, fs := range []map[string]*dto.MetricFamily{fams, ffams} {
		for name := range fs {
			if strings.HasPrefix(name, "raftset_meta_") {
				t.Errorf("a node without shard-map exports %s", name)
			}
		}
	}

	// A slow command: DEBUG SLEEP appears in SLOWLOG.
	do(t, c, "SLOWLOG", "RESET")
	do(t, c, "DEBUG", "SLEEP", "0.05")
	sl := testutil.ParseReply(do(t, c, "SLOWLOG", "GET"))
	if len(sl.Elems) != 1 || len(sl.Elems[0].Elems) != 6 {
		t.Fatalf("SLOWLOG GET = %+v", sl)
	}
	e := sl.Elems[0].Elems
	if us, _ := strconv.ParseInt(e[2].Str, 10, 64); us < 50000 || len(e[3].Elems) != 3 ||
		!strings.EqualFold(e[3].Elems[0].Str, "debug") || e[3].Elems[2].Str != "0.05" {
		t.Errorf("SLOWLOG entry = %+v", e)
	}

	// Pause a follower: the leader sees its lag grow, in entries and in
	// time, while writes go on; once it runs again the lag goes away.
	paused := followersOf(nodes, l)[0]
	_, pport, _ := net.SplitHostPort(paused.addr)
	testutil.WaitFor(t, 10*time.Second, "the leader to hear from every follower", func() bool {
		_, entries, _, ok := replicationLag(t, c, pport)
		return ok && entries < 50
	})
	if err := paused.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = paused.p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	start := time.Now()
	i := 0
	var lag, entries, ms int64
	testutil.WaitFor(t, 20*time.Second, "the paused follower's lag to grow", func() bool {
		for range 20 {
			do(t, c, "SADD", "during", strconv.Itoa(i))
			i++
		}
		var ok bool
		lag, entries, ms, ok = replicationLag(t, c, pport)
		return ok && entries >= 200 && ms >= 1500 && lag >= 1
	})
	if el := time.Since(start).Milliseconds(); ms > el+500 {
		t.Errorf("lag_ms %d more than the %d ms the follower was paused", ms, el)
	}
	fams = scrape(t, maddrs[li])
	if v, _ := value(fams, "raftset_raft_follower_lag_entries", "peer", paused.id); v < float64(entries) {
		t.Errorf("raftset_raft_follower_lag_entries{peer=%s} = %v, INFO said %d", paused.id, v, entries)
	}
	if v, _ := value(fams, "raftset_raft_follower_lag_seconds", "peer", paused.id); v < 1.5 {
		t.Errorf("raftset_raft_follower_lag_seconds{peer=%s} = %v", paused.id, v)
	}
	if v, _ := value(fams, "raftset_raft_follower_last_contact_seconds", "peer", paused.id); v < 1 {
		t.Errorf("raftset_raft_follower_last_contact_seconds{peer=%s} = %v", paused.id, v)
	}
	resume()
	testutil.WaitFor(t, 20*time.Second, "the resumed follower to catch up", func() bool {
		_, entries, ms, ok := replicationLag(t, c, pport)
		return ok && entries == 0 && ms == 0
	})

	// A majority gone for good: the leader steps down, /readyz says why
	// with a 503 while /livez stays up, and the gauges agree.
	for _, f := range followersOf(nodes, l) {
		f.p.kill9(t)
	}
	var code int
	var body string
	testutil.WaitFor(t, 20*time.Second, "/readyz to fail on the node left alone", func() bool {
		code, body = httpGet(t, "http://"+maddrs[li]+"/readyz", "")
		return code != http.StatusOK
	})
	if code != http.StatusServiceUnavailable || body != "no leader\n" {
		t.Errorf("/readyz without a quorum = %d %q, want 503 \"no leader\"", code, body)
	}
	if code, body := httpGet(t, "http://"+maddrs[li]+"/livez", ""); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/livez without a quorum = %d %q", code, body)
	}
	fams = scrape(t, maddrs[li])
	for _, fam := range []string{"raftset_ready", "raftset_raft_has_leader", "raftset_raft_is_leader"} {
		if v, ok := value(fams, fam); !ok || v != 0 {
			t.Errorf("%s without a quorum = %v (present %v), want 0", fam, v, ok)
		}
	}
}

func indexOf(nodes []*clusterProc, cp *clusterProc) int {
	for i, n := range nodes {
		if n == cp {
			return i
		}
	}
	return -1
}

// promIdent finds the metric names in a PromQL expression: raftset's,
// Raft's, and the process and Go collectors'.
var promIdent = regexp.MustCompile(`\b(?:raftset|raft|process|go)_[a-zA-Z0-9_:]*`)

// shardingPanel starts the titles of the dashboard's panels on a sharded
// cluster's series (the metadata group's, the leader balancer's), which a
// process without shard-map does not export.
const shardingPanel = "Sharding: "

// checkDashboard checks that every query of docs/grafana-dashboard.json
// names only series that the scraped processes (fams: a leader and a
// follower, say) export: with sharded, the queries of the sharding panels,
// else those of every other panel.
func checkDashboard(t *testing.T, sharded bool, fams ...map[string]*dto.MetricFamily) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exported := func(name string) bool {
		for _, fs := range fams {
			if _, ok := fs[name]; ok {
				return true
			}
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suf); ok {
					if f := fs[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
						return true
					}
				}
			}
		}
		return false
	}
	queries := 0
	for _, p := range dash.Panels {
		if strings.HasPrefix(p.Title, shardingPanel) != sharded {
			continue
		}
		for _, tg := range p.Targets {
			queries++
			names := promIdent.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no series", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !exported(n) {
					t.Errorf("panel %q: %s is not exported (query %q)", p.Title, n, tg.Expr)
				}
			}
		}
	}
	if least := map[bool]int{false: 20, true: 3}[sharded]; queries < least {
		t.Errorf("dashboard has %d queries (sharded %v)", queries, sharded)
	}
}
