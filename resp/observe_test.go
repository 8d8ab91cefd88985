package resp

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"raftset/internal/command"
	"raftset/internal/respwire"
	istats "raftset/internal/stats"
)

// slowStore makes writes to the key "slow" take slowFor: a write whose
// commit is slow, as a paused quorum makes it.
type slowStore struct {
	*fakeStore
	slowFor time.Duration
}

func (s slowStore) WriteIndexed(ctx context.Context, ops []command.Op) ([][]byte, uint64) {
	for _, op := range ops {
		if op.Kind == command.OpCommand && len(op.Args) > 1 && string(op.Args[1]) == "slow" {
			time.Sleep(s.slowFor)
		}
	}
	return s.fakeStore.WriteIndexed(ctx, ops)
}

func infoFields(t *testing.T, tc *testConn, section string) map[string]string {
	t.Helper()
	r := tc.do("INFO", section)
	v, err := respwire.Parse([]byte(r))
	if err != nil {
		t.Fatalf("INFO %s = %q: %v", section, r, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(v.Str, "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok {
			out[k] = val
		}
	}
	return out
}

func TestCommandStats(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	// Three SADDs, two pipelined in one store call; one that fails
	// (WRONGTYPE); one refused for its arity; an unknown command.
	tc.do("SADD", "k", "a")
	tc.send(enc("SADD", "k", "b") + enc("SADD", "k", "c"))
	tc.replies(2)
	tc.do("SET", "s", "v")
	if r := tc.do("SADD", "s", "x"); !strings.HasPrefix(r, "-WRONGTYPE") {
		t.Fatalf("SADD on a string = %q", r)
	}
	tc.do("SADD", "k")
	tc.do("NOSUCH")
	tc.do("PING")

	cs := infoFields(t, tc, "commandstats")
	re := regexp.MustCompile(`^calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=(\d+),failed_calls=(\d+)$`)
	m := re.FindStringSubmatch(cs["cmdstat_sadd"])
	if m == nil {
		t.Fatalf("cmdstat_sadd = %q (all: %v)", cs["cmdstat_sadd"], cs)
	}
	if m[1] != "4" || m[4] != "1" || m[5] != "1" {
		t.Errorf("cmdstat_sadd = %q, want calls=4 rejected_calls=1 failed_calls=1", cs["cmdstat_sadd"])
	}
	if !strings.HasPrefix(cs["cmdstat_ping"], "calls=1,") || !strings.HasPrefix(cs["cmdstat_set"], "calls=1,") {
		t.Errorf("cmdstat_ping = %q, cmdstat_set = %q", cs["cmdstat_ping"], cs["cmdstat_set"])
	}
	if _, ok := cs["cmdstat_nosuch"]; ok {
		t.Error("an unknown command has a cmdstat line")
	}

	es := infoFields(t, tc, "errorstats")
	// WRONGTYPE once; ERR for the arity and the unknown command.
	if es["errorstat_WRONGTYPE"] != "count=1" || es["errorstat_ERR"] != "count=2" {
		t.Errorf("errorstats = %v", es)
	}

	ls := infoFields(t, tc, "latencystats")
	if !regexp.MustCompile(`^p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}$`).MatchString(ls["latency_percentiles_usec_sadd"]) {
		t.Errorf("latency_percentiles_usec_sadd = %q", ls["latency_percentiles_usec_sadd"])
	}

	// INFO without arguments leaves commandstats and latencystats out, as
	// Redis does; "all" has them.
	def := tc.do("INFO")
	if strings.Contains(def, "# Commandstats") || strings.Contains(def, "# Latencystats") || !strings.Contains(def, "# Errorstats") {
		t.Errorf("default INFO sections wrong")
	}
	if all := tc.do("INFO", "all"); !strings.Contains(all, "# Commandstats") || !strings.Contains(all, "# Latencystats") {
		t.Error("INFO all lacks commandstats or latencystats")
	}
	cpu := infoFields(t, tc, "cpu")
	for _, k := range []string{"used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"} {
		if !regexp.MustCompile(`^\d+\.\d{6}$`).MatchString(cpu[k]) {
			t.Errorf("%s = %q", k, cpu[k])
		}
	}
	if v, _ := strconv.ParseFloat(cpu["used_cpu_user"], 64); v+mustFloat(cpu["used_cpu_sys"]) <= 0 {
		t.Errorf("no CPU time used: %v", cpu)
	}

	tc.do("CONFIG", "RESETSTAT")
	cs = infoFields(t, tc, "commandstats")
	if _, ok := cs["cmdstat_sadd"]; ok {
		t.Errorf("after RESETSTAT: %v", cs)
	}
}

func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func TestSlowlog(t *testing.T) {
	_, addr := startServer(t, Config{}, slowStore{newFakeStore(), 600 * time.Millisecond})
	tc := dial(t, addr)
	if r := tc.do("CONFIG", "GET", "slowlog-*"); r != bulks("slowlog-log-slower-than", "10000", "slowlog-max-len", "128") {
		t.Errorf("CONFIG GET slowlog-* = %q", r)
	}
	// A threshold far above what a fast command takes on a loaded CI
	// machine (the default 10 ms is not), and below the slow write's time.
	tc.do("CONFIG", "SET", "slowlog-log-slower-than", "500000")
	tc.do("CLIENT", "SETNAME", "tester")
	tc.do("SADD", "fast", "a")
	tc.do("SADD", "slow", "a", strings.Repeat("x", 200))
	if r := tc.do("SLOWLOG", "LEN"); r != integer(1) {
		t.Fatalf("SLOWLOG LEN = %q", r)
	}
	r := tc.do("SLOWLOG", "GET")
	v, err := respwire.Parse([]byte(r))
	if err != nil || len(v.Elems) != 1 || len(v.Elems[0].Elems) != 6 {
		t.Fatalf("SLOWLOG GET = %q", r)
	}
	e := v.Elems[0].Elems
	if num(e[0]) != 0 || num(e[2]) < 600000 || e[4].Str != tc.c.LocalAddr().String() || e[5].Str != "tester" {
		t.Errorf("entry = %q", r)
	}
	args := e[3].Elems
	if len(args) != 4 || args[0].Str != "SADD" || args[1].Str != "slow" ||
		args[3].Str != strings.Repeat("x", 128)+"... (72 more bytes)" {
		t.Errorf("entry args = %q", r)
	}
	if now := time.Now().Unix(); num(e[1]) < now-5 || num(e[1]) > now+1 {
		t.Errorf("timestamp %d, now %d", num(e[1]), now)
	}

	// 0 logs everything; max-len keeps the newest.
	tc.do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	tc.do("CONFIG", "SET", "slowlog-max-len", "2")
	tc.do("PING")
	tc.do("ECHO", "hi")
	r = tc.do("SLOWLOG", "GET", "-1")
	v, _ = respwire.Parse([]byte(r))
	if len(v.Elems) != 2 {
		t.Fatalf("SLOWLOG GET -1 = %q", r)
	}
	// Newest first: CONFIG SET slowlog-max-len was logged before PING, and
	// trimmed; the last two are PING then ECHO, reversed.
	if v.Elems[0].Elems[3].Elems[0].Str != "ECHO" || v.Elems[1].Elems[3].Elems[0].Str != "PING" {
		t.Errorf("SLOWLOG GET -1 = %q", r)
	}
	if r := tc.do("SLOWLOG", "RESET"); r != "+OK\r\n" {
		t.Errorf("RESET = %q", r)
	}
	// RESET itself is logged after it ran (slower-than 0).
	if r := tc.do("SLOWLOG", "LEN"); r != integer(1) {
		t.Errorf("LEN after RESET = %q", r)
	}
	if r := tc.do("CONFIG", "SET", "slowlog-log-slower-than", "-2"); !strings.HasPrefix(r, "-ERR CONFIG SET failed") {
		t.Errorf("slowlog-log-slower-than -2 = %q", r)
	}
	// AUTH never reaches the log: its argument is a password; CONFIG SET
	// requirepass's value is redacted, as Redis does.
	tc.do("SLOWLOG", "RESET")
	tc.do("AUTH", "secret")
	tc.do("CONFIG", "SET", "slowlog-max-len", "10", "requirepass", "secret2")
	r = tc.do("SLOWLOG", "GET")
	if strings.Contains(r, "secret") || !strings.Contains(r, bulks("CONFIG", "SET", "slowlog-max-len", "10", "requirepass", "(redacted)")) {
		t.Errorf("secrets in the slow log: %q", r)
	}
}

// TestSlowlogPipelinedRun: the commands of a pipelined write run share
// their store call's time, and each gets its own entry, numbered in order,
// with its own arguments (cut as for a single command) and the newest
// slowlog-max-len kept, over many runs.
func TestSlowlogPipelinedRun(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	tc.do("CONFIG", "SET", "slowlog-log-slower-than", "0")
	tc.do("CONFIG", "SET", "slowlog-max-len", "4")
	tc.do("SLOWLOG", "RESET")
	many := []string{"SADD", "wide"}
	for i := range 40 {
		many = append(many, "m"+strconv.Itoa(i))
	}
	long := strings.Repeat("y", 300)
	var run strings.Builder
	for i := range 300 {
		run.WriteString(enc("SADD", "k", "m"+strconv.Itoa(i)))
	}
	run.WriteString(enc(many...))
	run.WriteString(enc("SADD", "long", long))
	tc.send(run.String())
	tc.replies(302)
	r := tc.do("SLOWLOG", "GET", "-1")
	v, err := respwire.Parse([]byte(r))
	if err != nil || len(v.Elems) != 4 {
		t.Fatalf("SLOWLOG GET -1 = %q", r)
	}
	// Newest first: the long SADD, the wide one, then m299 and m298; the
	// ids count every command logged (the two CONFIG SETs, 0 and 1, and
	// RESET, 2: RESET empties the log, not the count, as in Redis).
	wantArgs := [][]string{
		{"SADD", "long", strings.Repeat("y", 128) + "... (172 more bytes)"},
		append(append([]string{}, many[:31]...), "... (11 more arguments)"),
		{"SADD", "k", "m299"},
		{"SADD", "k", "m298"},
	}
	for i, e := range v.Elems {
		if id := num(e.Elems[0]); id != int64(304-i) {
			t.Errorf("entry %d: id %d, want %d", i, id, 304-i)
		}
		var got []string
		for _, a := range e.Elems[3].Elems {
			got = append(got, a.Str)
		}
		if strings.Join(got, " ") != strings.Join(wantArgs[i], " ") {
			t.Errorf("entry %d: args %q, want %q", i, got, wantArgs[i])
		}
	}
	// The SLOWLOG GET was logged after it ran: five now, four kept.
	if r := tc.do("SLOWLOG", "LEN"); r != integer(4) {
		t.Errorf("SLOWLOG LEN = %q", r)
	}
}

func TestLatencyCommands(t *testing.T) {
	_, addr := startServer(t, Config{}, slowStore{newFakeStore(), 600 * time.Millisecond})
	tc := dial(t, addr)
	if r := tc.do("LATENCY", "LATEST"); r != "*0\r\n" {
		t.Errorf("LATEST with the monitor off = %q", r)
	}
	// Far above a fast command's time on a loaded CI machine.
	tc.do("CONFIG", "SET", "latency-monitor-threshold", "500")
	tc.do("SADD", "slow", "a")
	tc.do("SADD", "k", "a")
	r := tc.do("LATENCY", "LATEST")
	v, err := respwire.Parse([]byte(r))
	if err != nil || len(v.Elems) != 1 || len(v.Elems[0].Elems) != 4 {
		t.Fatalf("LATENCY LATEST = %q", r)
	}
	ev := v.Elems[0].Elems
	if ev[0].Str != "fast-command" || num(ev[2]) < 600 || num(ev[3]) < num(ev[2]) {
		t.Errorf("LATENCY LATEST = %q", r)
	}
	if r := tc.do("LATENCY", "HISTORY", "fast-command"); !strings.HasPrefix(r, "*1\r\n*2\r\n:") {
		t.Errorf("HISTORY = %q", r)
	}
	if r := tc.do("LATENCY", "RESET"); r != integer(1) {
		t.Errorf("RESET = %q", r)
	}

	// HISTOGRAM: calls and cumulative counts at powers of two of µs.
	r = tc.do("LATENCY", "HISTOGRAM", "sadd", "nosuch")
	v, _ = respwire.Parse([]byte(r))
	if len(v.Elems) != 2 || v.Elems[0].Str != "sadd" {
		t.Fatalf("HISTOGRAM = %q", r)
	}
	h := v.Elems[1].Elems
	if len(h) != 4 || h[0].Str != "calls" || num(h[1]) != 2 || h[2].Str != "histogram_usec" {
		t.Fatalf("HISTOGRAM sadd = %q", r)
	}
	pairs := h[3].Elems
	if len(pairs) < 2 || len(pairs)%2 != 0 || num(pairs[len(pairs)-1]) != 2 {
		t.Fatalf("histogram_usec = %q", r)
	}
	prevB, prevN := int64(0), int64(0)
	for i := 0; i < len(pairs); i += 2 {
		b, n := num(pairs[i]), num(pairs[i+1])
		if b <= prevB || n <= prevN {
			t.Errorf("histogram_usec not increasing: %q", r)
		}
		prevB, prevN = b, n
	}
	// The slow SADD (≥ 600 ms) is in a bucket at or above 524288 µs.
	if num(pairs[len(pairs)-2]) < 524288 {
		t.Errorf("last bucket %d µs for a 600 ms command", num(pairs[len(pairs)-2]))
	}
}

func TestClientBuffers(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeStore())
	tc := dial(t, addr)
	big := strings.Repeat("m", 100000)
	tc.do("SADD", "k", big)
	cl := infoFields(t, tc, "clients")
	if n, _ := strconv.Atoi(cl["client_recent_max_input_buffer"]); n < 100000 || n > 101000 {
		t.Errorf("client_recent_max_input_buffer = %q after a 100 kB command", cl["client_recent_max_input_buffer"])
	}
	if st := s.ClientStats(); st.RecentMaxInput < 100000 || st.Connected != 1 {
		t.Errorf("ClientStats = %+v", st)
	}
	// A 100 kB reply is the largest output of the last seconds.
	if r := tc.do("ECHO", big); len(r) < 100000 {
		t.Fatalf("ECHO of 100 kB = %.40q", r)
	}
	cl = infoFields(t, tc, "clients")
	if n, _ := strconv.Atoi(cl["client_recent_max_output_buffer"]); n < 100000 || n > 101000 {
		t.Errorf("client_recent_max_output_buffer = %q after a 100 kB reply", cl["client_recent_max_output_buffer"])
	}
	if st := s.ClientStats(); st.RecentMaxOutput < 100000 {
		t.Errorf("ClientStats.RecentMaxOutput = %d after a 100 kB reply", st.RecentMaxOutput)
	}
	// total_error_replies counts rejected commands (unknown, arity) and
	// failed ones alike, as Redis's does.
	before, _ := strconv.Atoi(infoFields(t, tc, "stats")["total_error_replies"])
	tc.do("NOSUCHCOMMAND")
	tc.do("ECHO")
	tc.do("CLIENT", "SETNAME", "a b")
	if n, _ := strconv.Atoi(infoFields(t, tc, "stats")["total_error_replies"]); n != before+3 {
		t.Errorf("total_error_replies = %d after 3 error replies, was %d", n, before)
	}
	var got []istats.Command
	s.CommandStats(func(c istats.Command) {
		c.Hist = nil
		got = append(got, c)
	})
	if len(got) < 2 || got[len(got)-1].Name != "sadd" || got[len(got)-1].Calls != 1 || got[len(got)-1].Group != "set" {
		t.Errorf("CommandStats = %+v", got)
	}
}

func num(r respwire.Reply) int64 {
	n, _ := strconv.ParseInt(r.Str, 10, 64)
	return n
}
