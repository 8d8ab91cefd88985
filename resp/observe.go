package resp

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"raftset/internal/command"
	istats "raftset/internal/stats"
	"raftset/internal/strictint"
)

// Command accounting: INFO commandstats, errorstats and latencystats,
// SLOWLOG, LATENCY, and what the metrics endpoint reads (CommandStats,
// ErrorStats).
//
// A command's duration is how long the client waited for its reply once
// the front end started on it: for a data command, the duration of the
// store call that answered it (for a write, until its log entry was
// committed and applied), shared by every command of a pipelined run; for
// anything else, the time to run it here. Redis measures only execution on
// its own thread; in a replicated store the wait for the quorum is the cost
// a client sees, so that is what is reported. Commands queued by MULTI are
// counted as one EXEC, not one by one.
//
// The hot path is one atomic add per counter on a slice indexed by
// command.Spec.ID, and one per histogram bucket: no map and no lock. A
// pipelined run of one command is counted with one add per counter.

// cmdStat is one command's counters; hist's sum is its total time.
type cmdStat struct {
	calls, failed, rejected atomic.Uint64
	hist                    istats.Hist
}

// Defaults of the Redis parameters of this file.
const (
	defaultSlowerThan = 10000 // µs
	defaultSlowMaxLen = 128
	maxErrorTypes     = 128 // Redis stops tracking new error codes past this
	slowMaxArgs       = 32
	slowMaxArgLen     = 128
	latencyHistoryLen = 160
	peakSlots         = 8 // client_recent_max_*: the last 8 seconds, as Redis
)

type observe struct {
	cmds []cmdStat // by Spec.ID

	errMu sync.Mutex
	errs  map[string]uint64

	slowerThan atomic.Int64 // µs; negative: off
	slowMax    atomic.Int64
	slowMu     sync.Mutex
	slow       []slowEntry // oldest first, from slowFrom on (pushSlow)
	slowFrom   int
	slowID     int64

	latThreshold atomic.Int64 // ms; 0: off
	latMu        sync.Mutex
	latEvents    map[string]*latEvent

	// Per-second peaks of one batch's input and output bytes.
	inPeak, outPeak [peakSlots]atomic.Int64
	peakSec         [peakSlots]atomic.Int64
}

type slowEntry struct {
	id         int64
	unix       int64
	usec       int64
	args       [][]byte
	addr, name string
}

type latEvent struct {
	max     int64
	history []latSample // oldest first
}

type latSample struct{ unix, ms int64 }

func (s *Server) initObserve() {
	o := &s.obs
	o.cmds = make([]cmdStat, s.table.MaxID())
	o.errs = make(map[string]uint64)
	o.latEvents = make(map[string]*latEvent)
	o.slowerThan.Store(defaultSlowerThan)
	o.slowMax.Store(defaultSlowMaxLen)
	intParam := func(name string, v *atomic.Int64, lo, hi int64) {
		s.RegisterConfig(name, func() string { return itoa(v.Load()) }, func(val string) error {
			n, ok := strictint.Parse([]byte(val))
			if !ok {
				return errors.New("argument couldn't be parsed into an integer")
			}
			if n < lo || n > hi {
				return errors.New("argument must be between " + itoa(lo) + " and " + itoa(hi) + " inclusive")
			}
			v.Store(n)
			return nil
		})
	}
	intParam("slowlog-log-slower-than", &o.slowerThan, -1, 1<<63-1)
	intParam("slowlog-max-len", &o.slowMax, 0, 1<<63-1)
	intParam("latency-monitor-threshold", &o.latThreshold, 0, 1<<63-1)
}

// SetSlowlog sets slowlog-log-slower-than (µs, negative: off) and
// slowlog-max-len, as the start-up directives do.
func (s *Server) SetSlowlog(slowerThan, maxLen int64) {
	s.obs.slowerThan.Store(slowerThan)
	s.obs.slowMax.Store(max(maxLen, 0))
}

// SetLatencyMonitorThreshold sets latency-monitor-threshold (ms, 0: off).
func (s *Server) SetLatencyMonitorThreshold(ms int64) { s.obs.latThreshold.Store(max(ms, 0)) }

func (s *Server) cmdStat(spec *command.Spec) *cmdStat {
	if spec == nil || spec.ID < 0 || spec.ID >= len(s.obs.cmds) {
		return nil
	}
	return &s.obs.cmds[spec.ID]
}

// rejected counts a known command refused before it ran (arity, NOAUTH...).
func (s *Server) rejected(spec *command.Spec) {
	if st := s.cmdStat(spec); st != nil {
		st.rejected.Add(1)
	}
}

// account counts n runs of spec that took d each, failed of them with an
// error reply.
func (s *Server) account(spec *command.Spec, d time.Duration, n, failed uint64) {
	st := s.cmdStat(spec)
	if st == nil || n == 0 {
		return
	}
	st.calls.Add(n)
	if failed > 0 {
		st.failed.Add(failed)
	}
	st.hist.AddN(d, n)
}

// accountLocal accounts a command run by the front end, reply its reply.
func (c *client) accountLocal(spec *command.Spec, args [][]byte, d time.Duration, reply []byte) {
	var failed uint64
	if len(reply) > 0 && reply[0] == '-' {
		failed = 1
	}
	c.s.account(spec, d, 1, failed)
	c.s.slowCheck(c, d, []slowCmd{{spec, args}})
}

// accountRun accounts the commands answered by one store call that took d;
// it runs before flush clears the run.
func (c *client) accountRun(d time.Duration, replies [][]byte) {
	s := c.s
	var cur *command.Spec
	var n, failed uint64
	for _, p := range c.pend {
		if p.idx < 0 || p.spec == nil {
			continue
		}
		if p.spec != cur {
			s.account(cur, d, n, failed)
			cur, n, failed = p.spec, 0, 0
		}
		n++
		if p.idx < len(replies) && len(replies[p.idx]) > 0 && replies[p.idx][0] == '-' {
			failed++
		}
	}
	s.account(cur, d, n, failed)
	if !s.slowWanted(d) && !s.latencyWanted(d) {
		return
	}
	cmds := make([]slowCmd, 0, len(c.pend))
	for _, p := range c.pend {
		if p.idx < 0 || p.spec == nil {
			continue
		}
		var args [][]byte
		switch {
		case c.run == runWrite && p.idx < len(c.ops):
			args = c.ops[p.idx].Args
		case c.run == runRead && p.idx < len(c.reads):
			args = c.reads[p.idx]
		}
		cmds = append(cmds, slowCmd{p.spec, args})
	}
	s.slowCheck(c, d, cmds)
}

// countError counts an error reply by its code (the first word), as Redis's
// errorstats do.
func (s *Server) countError(reply []byte) {
	code := reply[1:]
	if i := slices.IndexFunc(code, func(r byte) bool { return r == ' ' || r == '\r' }); i >= 0 {
		code = code[:i]
	}
	o := &s.obs
	o.errMu.Lock()
	if n, ok := o.errs[string(code)]; ok {
		o.errs[string(code)] = n + 1
	} else if len(o.errs) < maxErrorTypes {
		o.errs[string(code)] = 1
	}
	o.errMu.Unlock()
}

// notePeaks records one batch's input and output bytes for the
// client_recent_max_* fields.
func (s *Server) notePeaks(in, out int64) {
	sec := s.now.Load() / int64(time.Second)
	o := &s.obs
	i := sec % peakSlots
	if o.peakSec[i].Load() != sec {
		// A new second in this slot: forget what it held 8 s ago. Racing
		// connections may lose a peak of that instant; INFO is a sample.
		o.peakSec[i].Store(sec)
		o.inPeak[i].Store(0)
		o.outPeak[i].Store(0)
	}
	storeMax(&o.inPeak[i], in)
	storeMax(&o.outPeak[i], out)
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// recentPeaks returns the largest input and output of one batch in the
// last peakSlots seconds.
func (s *Server) recentPeaks() (in, out int64) {
	sec := s.now.Load() / int64(time.Second)
	o := &s.obs
	for i := range peakSlots {
		if sec-o.peakSec[i].Load() < peakSlots {
			in = max(in, o.inPeak[i].Load())
			out = max(out, o.outPeak[i].Load())
		}
	}
	return in, out
}

// Slow log.

func (s *Server) slowWanted(d time.Duration) bool {
	t := s.obs.slowerThan.Load()
	return t >= 0 && d.Microseconds() >= t
}

func (s *Server) latencyWanted(d time.Duration) bool {
	t := s.obs.latThreshold.Load()
	return t > 0 && d.Milliseconds() >= t
}

// noSlowlog are commands Redis keeps out of the slow log (their arguments
// may be secrets, or they only wrap others).
func noSlowlog(spec *command.Spec) bool {
	switch spec.Name {
	case "auth", "hello", "exec", nodeAuthCommand:
		return true
	}
	return false
}

// secretParams are the CONFIG SET parameters whose values the slow log
// hides, as Redis redacts requirepass.
var secretParams = []string{"requirepass", "masterauth", "cluster-secret", "metrics-auth", "tls-key-file-pass"}

// redacted reports whether args[i] is a secret: the value of a secret
// parameter in CONFIG SET.
func redacted(spec *command.Spec, args [][]byte, i int) bool {
	if spec.Name != "config|set" || i < 3 || i%2 == 0 {
		return false
	}
	return slices.Contains(secretParams, strings.ToLower(string(args[i-1])))
}

// slowCmd is a command for the slow log: its spec and arguments.
type slowCmd struct {
	spec *command.Spec
	args [][]byte
}

// slowCheck logs commands that took d each (a pipelined run shares its
// store call's time) if d passes the thresholds. A run is logged under one
// lock, with the arguments of all its entries copied into one buffer: under
// a loaded write load every store call passes the default 10 ms, and ten
// entries made one by one (three allocations and two locks each, and a
// shift of the whole log per entry once full) cost 2.5% of the server's CPU
// (docs/benchmarks.md, session 10).
func (s *Server) slowCheck(c *client, d time.Duration, cmds []slowCmd) {
	if s.latencyWanted(d) {
		var fast, other bool
		for _, sc := range cmds {
			if sc.spec.Has(command.Fast) {
				fast = true
			} else {
				other = true
			}
		}
		// The history keeps one sample a second, the largest: one per
		// event says the same as one per command.
		if fast {
			s.latencySample("fast-command", d.Milliseconds())
		}
		if other {
			s.latencySample("command", d.Milliseconds())
		}
	}
	if !s.slowWanted(d) {
		return
	}
	o := &s.obs
	limit := o.slowMax.Load()
	if limit == 0 {
		return
	}
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	unix, usec := s.now.Load()/int64(time.Second), d.Microseconds()
	var entries []slowEntry
	var hdrs [][]byte
	var buf []byte
	for _, sc := range cmds {
		if noSlowlog(sc.spec) {
			continue
		}
		if entries == nil {
			nb, nh := 0, 0
			for _, x := range cmds {
				nh += min(len(x.args), slowMaxArgs)
				for _, a := range x.args {
					nb += min(len(a), slowMaxArgLen)
				}
			}
			entries = make([]slowEntry, 0, len(cmds))
			hdrs = make([][]byte, 0, nh)
			buf = make([]byte, 0, nb)
		}
		from := len(hdrs)
		hdrs, buf = appendSlowArgs(hdrs, buf, sc.spec, sc.args)
		entries = append(entries, slowEntry{unix: unix, usec: usec, addr: c.addr, name: name,
			args: hdrs[from:len(hdrs):len(hdrs)]})
	}
	if len(entries) > 0 {
		o.pushSlow(entries, limit)
	}
}

// appendSlowArgs appends a command's arguments as the slow log shows them
// (at most slowMaxArgs, each cut at slowMaxArgLen, secrets redacted) to
// hdrs, their bytes copied to buf. An append that outgrows buf moves on to a
// new array; the arguments already made keep pointing into the old one,
// which nothing writes again.
func appendSlowArgs(hdrs [][]byte, buf []byte, spec *command.Spec, args [][]byte) ([][]byte, []byte) {
	argc := min(len(args), slowMaxArgs)
	for i := 0; i < argc; i++ {
		start := len(buf)
		switch {
		case argc == slowMaxArgs && i == slowMaxArgs-1 && len(args) > slowMaxArgs:
			buf = append(buf, "... ("+strconv.Itoa(len(args)-slowMaxArgs+1)+" more arguments)"...)
			return append(hdrs, buf[start:len(buf):len(buf)]), buf
		case redacted(spec, args, i):
			buf = append(buf, "(redacted)"...)
		case len(args[i]) > slowMaxArgLen:
			buf = append(buf, args[i][:slowMaxArgLen]...)
			buf = append(buf, "... ("+strconv.Itoa(len(args[i])-slowMaxArgLen)+" more bytes)"...)
		default:
			buf = append(buf, args[i]...)
		}
		hdrs = append(hdrs, buf[start:len(buf):len(buf)])
	}
	return hdrs, buf
}

// pushSlow appends entries to the slow log, numbering them, and drops the
// oldest beyond limit. Dropping moves slowFrom rather than the entries
// kept (deleting from the front moved all 127 others for every entry
// logged); the log is compacted once the dropped entries outnumber them.
func (o *observe) pushSlow(entries []slowEntry, limit int64) {
	o.slowMu.Lock()
	defer o.slowMu.Unlock()
	for i := range entries {
		entries[i].id = o.slowID
		o.slowID++
	}
	o.slow = append(o.slow, entries...)
	if over := int64(len(o.slow)-o.slowFrom) - limit; over > 0 {
		clear(o.slow[o.slowFrom : o.slowFrom+int(over)]) // their arguments go now
		o.slowFrom += int(over)
	}
	if o.slowFrom > len(o.slow)/2 {
		n := copy(o.slow, o.slow[o.slowFrom:])
		clear(o.slow[n:])
		o.slow, o.slowFrom = o.slow[:n], 0
	}
}

// slowKept is the slow log, oldest first; the caller holds slowMu.
func (o *observe) slowKept() []slowEntry { return o.slow[o.slowFrom:] }

func (c *client) cmdSlowlog(dst []byte, spec *command.Spec, args [][]byte) []byte {
	o := &c.s.obs
	switch spec.Name {
	case "slowlog|len":
		o.slowMu.Lock()
		n := len(o.slowKept())
		o.slowMu.Unlock()
		return command.AppendInt(dst, int64(n))
	case "slowlog|reset":
		o.slowMu.Lock()
		o.slow, o.slowFrom = nil, 0
		o.slowMu.Unlock()
		return append(dst, command.OK...)
	case "slowlog|help":
		return command.AppendHelp(dst, "SLOWLOG", slowlogHelp)
	}
	// SLOWLOG GET [count]: newest first; count -1 is all.
	count := int64(10)
	if len(args) > 3 {
		return command.AppendError(dst, command.ErrSyntax)
	}
	if len(args) == 3 {
		n, ok := strictint.Parse(args[2])
		if !ok || n < -1 {
			return command.AppendError(dst, "ERR count should be greater than or equal to -1")
		}
		count = n
	}
	o.slowMu.Lock()
	defer o.slowMu.Unlock()
	kept := o.slowKept()
	if count < 0 || count > int64(len(kept)) {
		count = int64(len(kept))
	}
	dst = command.AppendArray(dst, int(count))
	for i := len(kept) - 1; i >= len(kept)-int(count); i-- {
		e := &kept[i]
		dst = command.AppendArray(dst, 6)
		dst = command.AppendInt(dst, e.id)
		dst = command.AppendInt(dst, e.unix)
		dst = command.AppendInt(dst, e.usec)
		dst = command.AppendArray(dst, len(e.args))
		for _, a := range e.args {
			dst = command.AppendBulk(dst, a)
		}
		dst = command.AppendBulkString(dst, e.addr)
		dst = command.AppendBulkString(dst, e.name)
	}
	return dst
}

var slowlogHelp = []string{
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
}

// Latency monitor.

func (s *Server) latencySample(event string, ms int64) {
	now := s.now.Load() / int64(time.Second)
	o := &s.obs
	o.latMu.Lock()
	defer o.latMu.Unlock()
	ev := o.latEvents[event]
	if ev == nil {
		ev = &latEvent{}
		o.latEvents[event] = ev
	}
	ev.max = max(ev.max, ms)
	if n := len(ev.history); n > 0 && ev.history[n-1].unix == now {
		// One sample per second: the largest, as Redis keeps it.
		ev.history[n-1].ms = max(ev.history[n-1].ms, ms)
		return
	}
	ev.history = append(ev.history, latSample{unix: now, ms: ms})
	if len(ev.history) > latencyHistoryLen {
		ev.history = slices.Delete(ev.history, 0, 1)
	}
}

func (c *client) cmdLatency(dst []byte, spec *command.Spec, args [][]byte) []byte {
	s := c.s
	o := &s.obs
	switch spec.Name {
	case "latency|histogram":
		return s.appendLatencyHistogram(dst, args[2:])
	case "latency|help":
		return command.AppendHelp(dst, "LATENCY", latencyHelp)
	}
	o.latMu.Lock()
	defer o.latMu.Unlock()
	switch spec.Name {
	case "latency|latest":
		names := sortedKeys(o.latEvents)
		dst = command.AppendArray(dst, len(names))
		for _, name := range names {
			ev := o.latEvents[name]
			last := ev.history[len(ev.history)-1]
			dst = command.AppendArray(dst, 4)
			dst = command.AppendBulkString(dst, name)
			dst = command.AppendInt(dst, last.unix)
			dst = command.AppendInt(dst, last.ms)
			dst = command.AppendInt(dst, ev.max)
		}
		return dst
	case "latency|history":
		ev := o.latEvents[string(args[2])]
		if ev == nil {
			return command.AppendArray(dst, 0)
		}
		dst = command.AppendArray(dst, len(ev.history))
		for _, h := range ev.history {
			dst = command.AppendArray(dst, 2)
			dst = command.AppendInt(dst, h.unix)
			dst = command.AppendInt(dst, h.ms)
		}
		return dst
	case "latency|reset":
		n := 0
		if len(args) == 2 {
			n = len(o.latEvents)
			clear(o.latEvents)
		}
		for _, a := range args[2:] {
			if _, ok := o.latEvents[string(a)]; ok {
				delete(o.latEvents, string(a))
				n++
			}
		}
		return command.AppendInt(dst, int64(n))
	}
	return command.AppendError(dst, unknownSubcommand(args))
}

var latencyHelp = []string{
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HISTOGRAM [COMMAND ...]",
	"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
	"    If no commands are specified then all histograms are replied.",
	"HELP",
	"    Prints this help.",
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendLatencyHistogram is LATENCY HISTOGRAM [command ...]: for each
// command with calls, its count and the cumulative count at each power of
// two of 1024 ns, as Redis reports its HDR histograms (in µs, buckets where
// the count grew). Unknown names are skipped, as in Redis.
func (s *Server) appendLatencyHistogram(dst []byte, names [][]byte) []byte {
	var specs []*command.Spec
	if len(names) == 0 {
		for _, sp := range s.allSpecs() {
			if st := s.cmdStat(sp); st != nil && st.calls.Load() > 0 {
				specs = append(specs, sp)
			}
		}
	} else {
		for _, name := range names {
			sp := s.specByFullName(strings.ToLower(string(name)))
			if st := s.cmdStat(sp); st != nil && st.calls.Load() > 0 && !slices.Contains(specs, sp) {
				specs = append(specs, sp)
			}
		}
	}
	dst = command.AppendArray(dst, 2*len(specs))
	var snap istats.Snapshot
	for _, sp := range specs {
		s.cmdStat(sp).hist.SnapshotInto(&snap)
		dst = command.AppendBulkString(dst, sp.Name)
		dst = command.AppendArray(dst, 4)
		dst = command.AppendBulkString(dst, "calls")
		dst = command.AppendInt(dst, int64(snap.Count))
		dst = command.AppendBulkString(dst, "histogram_usec")
		var pairs []int64
		prev := uint64(0)
		for exp := 10; prev < snap.Count && exp <= 50; exp++ {
			cum := snap.CountBelow(exp)
			if cum > prev {
				pairs = append(pairs, (int64(1)<<exp)/1000, int64(cum))
			}
			prev = max(prev, cum)
		}
		dst = command.AppendArray(dst, len(pairs))
		for _, v := range pairs {
			dst = command.AppendInt(dst, v)
		}
	}
	return dst
}

// allSpecs returns every command and subcommand of the table by name.
func (s *Server) allSpecs() []*command.Spec {
	var out []*command.Spec
	for _, sp := range s.table {
		if sp.Has(command.Internal) {
			continue
		}
		out = append(out, sp)
		out = append(out, sp.Subs...)
	}
	slices.SortFunc(out, func(a, b *command.Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// specByFullName finds "name" or "container|sub".
func (s *Server) specByFullName(name string) *command.Spec {
	parent, sub, ok := strings.Cut(name, "|")
	sp := s.table[parent]
	if sp == nil || !ok {
		return sp
	}
	return s.subs[sp][sub]
}

// usedSpecs returns the commands with any count, in name order, and their
// counters' values.
func (s *Server) eachUsed(fn func(sp *command.Spec, st *cmdStat)) {
	for _, sp := range s.allSpecs() {
		st := s.cmdStat(sp)
		if st == nil {
			continue
		}
		if st.calls.Load() > 0 || st.rejected.Load() > 0 || st.failed.Load() > 0 {
			fn(sp, st)
		}
	}
}

// observeSections returns INFO's commandstats, errorstats and latencystats.
func (s *Server) observeSections() []InfoSection {
	cmd := InfoSection{Name: "Commandstats"}
	lat := InfoSection{Name: "Latencystats"}
	var snap istats.Snapshot
	s.eachUsed(func(sp *command.Spec, st *cmdStat) {
		st.hist.SnapshotInto(&snap)
		calls := snap.Count
		usec := snap.Sum.Microseconds()
		per := 0.0
		if calls > 0 {
			per = float64(snap.Sum.Nanoseconds()) / 1000 / float64(calls)
		}
		cmd.Fields = append(cmd.Fields, [2]string{"cmdstat_" + sp.Name,
			"calls=" + strconv.FormatUint(calls, 10) +
				",usec=" + strconv.FormatInt(usec, 10) +
				",usec_per_call=" + strconv.FormatFloat(per, 'f', 2, 64) +
				",rejected_calls=" + strconv.FormatUint(st.rejected.Load(), 10) +
				",failed_calls=" + strconv.FormatUint(st.failed.Load(), 10)})
		if calls > 0 {
			us := func(p float64) string {
				return strconv.FormatFloat(float64(snap.Percentile(p).Nanoseconds())/1000, 'f', 3, 64)
			}
			lat.Fields = append(lat.Fields, [2]string{"latency_percentiles_usec_" + sp.Name,
				"p50=" + us(50) + ",p99=" + us(99) + ",p99.9=" + us(99.9)})
		}
	})
	errs := InfoSection{Name: "Errorstats"}
	s.obs.errMu.Lock()
	for _, code := range sortedKeys(s.obs.errs) {
		errs.Fields = append(errs.Fields, [2]string{"errorstat_" + code, "count=" + strconv.FormatUint(s.obs.errs[code], 10)})
	}
	s.obs.errMu.Unlock()
	return []InfoSection{cmd, errs, lat}
}

// resetObserve is CONFIG RESETSTAT's part: command and error counts (the
// slow log and latency events are reset by their own commands, as in Redis).
func (s *Server) resetObserve() {
	for i := range s.obs.cmds {
		st := &s.obs.cmds[i]
		st.calls.Store(0)
		st.failed.Store(0)
		st.rejected.Store(0)
		st.hist.Reset()
	}
	s.obs.errMu.Lock()
	clear(s.obs.errs)
	s.obs.errMu.Unlock()
}

// CommandStats calls fn for every command with any count, in name order,
// for the metrics endpoint. The snapshot is reused between calls.
func (s *Server) CommandStats(fn func(istats.Command)) {
	var snap istats.Snapshot
	s.eachUsed(func(sp *command.Spec, st *cmdStat) {
		st.hist.SnapshotInto(&snap)
		fn(istats.Command{Name: sp.Name, Group: sp.Group, Calls: snap.Count,
			Failed: st.failed.Load(), Rejected: st.rejected.Load(), Hist: &snap})
	})
}

// ErrorStats calls fn for every error code counted, for the metrics endpoint.
func (s *Server) ErrorStats(fn func(code string, count uint64)) {
	s.obs.errMu.Lock()
	defer s.obs.errMu.Unlock()
	for _, code := range sortedKeys(s.obs.errs) {
		fn(code, s.obs.errs[code])
	}
}

// ClientStats returns the connection counts for the metrics endpoint.
func (s *Server) ClientStats() istats.Clients {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	in, out := s.recentPeaks()
	return istats.Clients{Connected: int64(n), Received: s.stats.connections.Load(),
		Rejected: s.stats.rejected.Load(), Commands: s.stats.commands.Load(),
		RecentMaxInput: in, RecentMaxOutput: out}
}
