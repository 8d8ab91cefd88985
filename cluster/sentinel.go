package cluster

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// Sentinel as clients read it. Every node answers the Sentinel queries that
// clients use to find the master (the Raft leader) and the replicas (the
// other members): redis-py's Sentinel, go-redis's failover client, Jedis's
// sentinel pool. The replies carry every field Redis Sentinel 7 sends
// (sentinel.c addReplySentinelRedisInstance), since clients index them by
// name; the values that describe Sentinel's own monitoring are fixed ones
// that say "healthy" (link-pending-commands 0, last-ok-ping-reply 0, ...).
//
// Any master name is answered: the cluster has one master. SENTINEL MASTERS
// lists Config.MasterName ("mymaster" if unset) and the names clients asked
// about, because redis-py looks the name up in that list.

const (
	// Values of the fixed fields: Sentinel's defaults.
	sentinelDownAfterMs     = "30000"
	sentinelFailoverTimeout = "180000"
	sentinelParallelSyncs   = "1"
	// sentinelProbeTimeout bounds the dial that decides whether a member's
	// client port answers (its s_down flag); sentinelProbeTTL is how long
	// an answer is reused.
	sentinelProbeTimeout = 300 * time.Millisecond
	sentinelProbeTTL     = time.Second
)

// sentinelProbes caches which client addresses answered a TCP dial.
type sentinelProbes struct {
	mu   sync.Mutex
	seen map[string]probeResult
}

type probeResult struct {
	at   time.Time
	down bool
}

// downAddrs dials each address whose last answer is older than
// sentinelProbeTTL (in parallel) and reports which did not answer: a replica
// that is down is flagged s_down, so that read-from-replica clients skip it.
func (n *Node) downAddrs(addrs []string) map[string]bool {
	p := &n.sentinelProbes
	now := time.Now()
	out := make(map[string]bool, len(addrs))
	var stale []string
	p.mu.Lock()
	for _, a := range addrs {
		if r, ok := p.seen[a]; ok && now.Sub(r.at) < sentinelProbeTTL {
			out[a] = r.down
		} else {
			stale = append(stale, a)
		}
	}
	p.mu.Unlock()
	if len(stale) == 0 {
		return out
	}
	res := make([]bool, len(stale))
	var wg sync.WaitGroup
	for i, a := range stale {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", a, sentinelProbeTimeout)
			if err == nil {
				c.Close()
			}
			res[i] = err != nil
		}()
	}
	wg.Wait()
	p.mu.Lock()
	if p.seen == nil {
		p.seen = map[string]probeResult{}
	}
	for i, a := range stale {
		p.seen[a] = probeResult{at: now, down: res[i]}
		out[a] = res[i]
	}
	p.mu.Unlock()
	return out
}

// sentinelMember is one member as a Sentinel instance.
type sentinelMember struct {
	id         string
	host, port string
	voter      bool
}

func (n *Node) sentinelMembers() []sentinelMember {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []sentinelMember
	for _, s := range f.Configuration().Servers {
		host, port := n.clientHostPort(s)
		if string(s.ID) == n.cfg.NodeID && n.cfg.ClientAddr != "" {
			host, port = splitAddr(n.cfg.ClientAddr)
		}
		out = append(out, sentinelMember{id: string(s.ID), host: host, port: port, voter: s.Suffrage == raft.Voter})
	}
	return out
}

// sentinelMasterNames are the names SENTINEL MASTERS lists.
func (n *Node) sentinelMasterNames() []string {
	names := n.masterNames()
	if n.cfg.MasterName != "" {
		// The configured name first; "mymaster" only stands in for none.
		names = slices.DeleteFunc(names, func(s string) bool { return s == "mymaster" && !n.askedAbout("mymaster") })
		i := slices.Index(names, n.cfg.MasterName)
		names = append([]string{n.cfg.MasterName}, slices.Delete(names, i, i+1)...)
	}
	return names
}

func (n *Node) askedAbout(name string) bool {
	n.sw.mu.Lock()
	defer n.sw.mu.Unlock()
	return slices.Contains(n.sw.names, name)
}

// sentinel answers SENTINEL subcommands.
func (n *Node) sentinel(args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity("sentinel"))
	}
	sub := strings.ToLower(string(args[1]))
	named := func() bool { return len(args) == 3 }
	switch sub {
	case "get-master-addr-by-name", "master", "replicas", "slaves", "sentinels", "ckquorum":
		if !named() {
			return command.Error(command.ErrArity("sentinel|" + sub))
		}
		n.rememberMasterName(string(args[2])) // for +switch-master (switch.go)
	}
	lid, laddr := n.leaderClient()
	switch sub {
	case "get-master-addr-by-name":
		if laddr == "" {
			return command.NullArray
		}
		host, port := splitAddr(laddr)
		out := command.AppendArray(nil, 2)
		out = command.AppendBulkString(out, host)
		return command.AppendBulkString(out, port)
	case "master":
		if laddr == "" {
			return command.Error("ERR No such master with that name")
		}
		return n.appendMaster(nil, string(args[2]), lid, laddr)
	case "masters":
		if len(args) != 2 {
			return command.Error(command.ErrArity("sentinel|masters"))
		}
		if laddr == "" {
			return command.AppendArray(nil, 0)
		}
		names := n.sentinelMasterNames()
		out := command.AppendArray(nil, len(names))
		for _, name := range names {
			out = n.appendMaster(out, name, lid, laddr)
		}
		return out
	case "replicas", "slaves":
		return n.appendInstances(nil, lid, laddr, false)
	case "sentinels":
		return n.appendInstances(nil, lid, laddr, true)
	case "ckquorum":
		voters := 0
		for _, m := range n.sentinelMembers() {
			if m.voter {
				voters++
			}
		}
		if laddr == "" {
			return command.Error("NOQUORUM the cluster has no leader: " + strconv.Itoa(voters) + " voters, a majority must agree on one")
		}
		return command.AppendSimple(nil, "OK "+strconv.Itoa(voters)+" usable Sentinels. Quorum and failover authorization can be reached")
	case "is-master-down-by-addr":
		// ip port current-epoch runid: down unless ip:port is the leader.
		if len(args) != 6 {
			return command.Error(command.ErrArity("sentinel|is-master-down-by-addr"))
		}
		down := laddr == "" || net.JoinHostPort(string(args[2]), string(args[3])) != laddr
		out := command.AppendArray(nil, 3)
		out = command.AppendInt(out, map[bool]int64{false: 0, true: 1}[down])
		out = command.AppendBulkString(out, "*")
		return command.AppendInt(out, 0)
	}
	return command.Error("ERR unknown subcommand '" + string(args[1]) + "'. Try SENTINEL HELP.")
}

// appendMaster appends the leader as a master named name.
func (n *Node) appendMaster(out []byte, name, lid, laddr string) []byte {
	host, port := splitAddr(laddr)
	members := n.sentinelMembers()
	voters := 0
	for _, m := range members {
		if m.voter {
			voters++
		}
	}
	kvs := []string{
		"name", name, "ip", host, "port", port, "runid", lid, "flags", "master",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0",
		"last-ok-ping-reply", "0", "last-ping-reply", "0", "down-after-milliseconds", sentinelDownAfterMs,
		"info-refresh", "0", "role-reported", "master", "role-reported-time", "0",
		"config-epoch", strconv.FormatUint(n.raftTerm(), 10),
		"num-slaves", strconv.Itoa(max(len(members)-1, 0)),
		"num-other-sentinels", strconv.Itoa(max(len(members)-1, 0)),
		"quorum", strconv.Itoa(voters/2 + 1),
		"failover-timeout", sentinelFailoverTimeout, "parallel-syncs", sentinelParallelSyncs,
	}
	return appendKVs(out, kvs)
}

// appendInstances appends the members other than the leader as replicas,
// or the members other than this node as sentinels (every node answers
// Sentinel queries).
func (n *Node) appendInstances(out []byte, lid, laddr string, sentinels bool) []byte {
	var list []sentinelMember
	var addrs []string
	for _, m := range n.sentinelMembers() {
		if (sentinels && m.id == n.cfg.NodeID) || (!sentinels && m.id == lid) {
			continue
		}
		if sentinels && n.ClientAddr(m.id) == "" {
			continue // a sentinel without an address is of no use to a client
		}
		list = append(list, m)
		addrs = append(addrs, net.JoinHostPort(m.host, m.port))
	}
	down := map[string]bool{}
	if !sentinels {
		down = n.downAddrs(addrs)
	}
	mhost, mport := "?", "0"
	if laddr != "" {
		mhost, mport = splitAddr(laddr)
	}
	out = command.AppendArray(out, len(list))
	for i, m := range list {
		addr := addrs[i]
		flags := "slave"
		if sentinels {
			flags = "sentinel"
		} else if down[addr] {
			flags = "s_down,slave,disconnected"
		}
		kvs := []string{
			"name", addr, "ip", m.host, "port", m.port, "runid", m.id, "flags", flags,
			"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0",
			"last-ok-ping-reply", "0", "last-ping-reply", "0",
		}
		if down[addr] {
			kvs = append(kvs, "s-down-time", "0")
		}
		kvs = append(kvs, "down-after-milliseconds", sentinelDownAfterMs)
		if sentinels {
			kvs = append(kvs, "last-hello-message", "0", "voted-leader", "?", "voted-leader-epoch", "0")
		} else {
			status := "ok"
			if down[addr] || laddr == "" {
				status = "err"
			}
			kvs = append(kvs, "info-refresh", "0", "role-reported", "slave", "role-reported-time", "0",
				"master-link-down-time", "0", "master-link-status", status,
				"master-host", mhost, "master-port", mport, "slave-priority", "100",
				"slave-repl-offset", strconv.FormatUint(n.fsm.AppliedIndex(), 10), "replica-announced", "1")
		}
		out = appendKVs(out, kvs)
	}
	return out
}

func appendKVs(out []byte, kvs []string) []byte {
	out = command.AppendArray(out, len(kvs))
	for _, v := range kvs {
		out = command.AppendBulkString(out, v)
	}
	return out
}

// raftTerm is the current Raft term: Sentinel's config epoch also grows by
// one with every failover.
func (n *Node) raftTerm() uint64 {
	t, _ := strconv.ParseUint(n.raft.Stats()["term"], 10, 64)
	return t
}
