package resp

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"raftset/internal/command"
)

// sectionOrder is Redis's order of INFO sections; sections the store adds
// that Redis does not know (raft) come before keyspace.
var sectionOrder = []string{"server", "clients", "memory", "persistence", "stats",
	"replication", "cpu", "modules", "commandstats", "errorstats", "latencystats", "cluster", "", "keyspace"}

// notDefault are the sections INFO without arguments (or "default") leaves
// out, as Redis does: they are long.
func notDefault(name string) bool { return name == "commandstats" || name == "latencystats" }

// ownSections are the sections the front end answers without the store.
var ownSections = []string{"server", "clients", "stats", "cpu", "commandstats", "errorstats", "latencystats", "cluster"}

func sectionRank(name string) int {
	if i := slices.Index(sectionOrder, name); i >= 0 {
		return i
	}
	return slices.Index(sectionOrder, "")
}

// cmdInfo answers INFO [section ...]: the front end's own sections (server,
// clients, stats) merged with the store's, in Redis's format.
func (c *client) cmdInfo(dst []byte, args [][]byte) []byte {
	all, def := false, len(args) == 1
	want := make(map[string]bool)
	for _, a := range args[1:] {
		switch name := strings.ToLower(string(a)); name {
		case "all", "everything":
			all = true
		case "default":
			def = true
		default:
			want[name] = true
		}
	}
	needStore := all || def
	for name := range want {
		// The store adds its counters (keyspace hits, evictions) to stats,
		// and a sharded store its leader balancer's to cluster.
		if !slices.Contains(ownSections, name) || name == "stats" || name == "cluster" {
			needStore = true
		}
	}
	secs := append(c.s.infoSections(), c.s.observeSections()...)
	secs = append(secs, c.s.clusterSection())
	if needStore {
		for _, st := range c.s.store.Info() {
			merged := false
			for i := range secs {
				if strings.EqualFold(secs[i].Name, st.Name) {
					secs[i].Fields = append(secs[i].Fields, st.Fields...)
					merged = true
				}
			}
			if !merged {
				secs = append(secs, st)
			}
		}
	}
	slices.SortStableFunc(secs, func(a, b InfoSection) int {
		return sectionRank(strings.ToLower(a.Name)) - sectionRank(strings.ToLower(b.Name))
	})
	var out []byte
	for _, sec := range secs {
		name := strings.ToLower(sec.Name)
		if !all && !want[name] && (!def || notDefault(name)) {
			continue
		}
		if len(out) > 0 {
			out = append(out, "\r\n"...)
		}
		out = append(out, "# "...)
		out = append(out, sec.Name...)
		out = append(out, "\r\n"...)
		for _, f := range sec.Fields {
			out = append(out, f[0]...)
			out = append(out, ':')
			out = append(out, f[1]...)
			out = append(out, "\r\n"...)
		}
	}
	return command.AppendBulk(dst, out)
}

// infoSections returns the sections the front end owns.
func (s *Server) infoSections() []InfoSection {
	now := time.Now()
	uptime := int64(now.Sub(s.started) / time.Second)
	exe, _ := os.Executable()
	s.mu.Lock()
	nclients := len(s.clients)
	netIn, netOut := s.stats.netIn.Load(), s.stats.netOut.Load()
	for _, c := range s.clients {
		netIn += c.fc.in.Load()
		netOut += c.fc.out.Load()
	}
	s.mu.Unlock()
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	st := &s.stats
	peakIn, peakOut := s.recentPeaks()
	return []InfoSection{
		{Name: "Server", Fields: [][2]string{
			{"redis_version", s.cfg.RedisVersion},
			{"raftset_version", s.cfg.Version},
			{"redis_git_sha1", "00000000"},
			{"redis_git_dirty", "0"},
			{"redis_build_id", "0"},
			{"redis_mode", s.cfg.Mode},
			{"os", runtime.GOOS + " " + runtime.GOARCH},
			{"arch_bits", strconv.Itoa(strconv.IntSize)},
			{"monotonic_clock", "Go runtime"},
			{"multiplexing_api", "go netpoll"},
			{"go_version", runtime.Version()},
			{"process_id", strconv.Itoa(os.Getpid())},
			{"process_supervised", "no"},
			{"run_id", s.runID},
			{"tcp_port", s.port()},
			{"server_time_usec", i64(now.UnixMicro())},
			{"uptime_in_seconds", i64(uptime)},
			{"uptime_in_days", i64(uptime / 86400)},
			{"hz", "10"},
			{"configured_hz", "10"},
			{"executable", exe},
			{"config_file", ""},
			{"io_threads_active", "0"},
		}},
		{Name: "Clients", Fields: [][2]string{
			{"connected_clients", strconv.Itoa(nclients)},
			{"cluster_connections", "0"},
			{"maxclients", i64(s.maxClients.Load())},
			{"client_recent_max_input_buffer", i64(peakIn)},
			{"client_recent_max_output_buffer", i64(peakOut)},
			{"blocked_clients", "0"},
			{"tracking_clients", "0"},
			{"clients_in_timeout_table", "0"},
			{"total_blocking_keys", "0"},
			{"total_blocking_keys_on_nokey", "0"},
		}},
		{Name: "Stats", Fields: [][2]string{
			{"total_connections_received", i64(st.connections.Load())},
			{"total_commands_processed", i64(st.commands.Load())},
			{"instantaneous_ops_per_sec", i64(st.opsPerSec.Load())},
			{"total_net_input_bytes", i64(netIn)},
			{"total_net_output_bytes", i64(netOut)},
			{"rejected_connections", i64(st.rejected.Load())},
			{"total_error_replies", i64(st.errors.Load())},
			{"total_reads_processed", i64(st.reads.Load())},
			{"client_query_buffer_limit_disconnections", i64(s.lim.qbufDrops.Load())},
			{"client_output_buffer_limit_disconnections", i64(s.lim.obufDrops.Load())},
			{"acl_access_denied_auth", i64(s.lim.authDenied.Load())},
		}},
		cpuSection(),
	}
}
