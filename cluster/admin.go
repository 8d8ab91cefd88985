package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"raftset/fsm"
	"raftset/internal/command"
	"raftset/internal/glob"
)

// Admin runs a node command: SAVE, BGSAVE, LASTSAVE, DEBUG, ROLE, WAIT,
// CONFIG, RAFT.* and SENTINEL. args[0] is the name; arity is already
// checked by the front end. The internal raftset.* commands arrive through
// Internal (rpcserve.go), not here.
func (n *Node) Admin(ctx context.Context, args [][]byte) []byte {
	if len(args) == 0 {
		return replyNoAdminCommand
	}
	switch strings.ToLower(string(args[0])) {
	case "save":
		if err := n.snapshotNow(); err != nil {
			return command.Error("ERR " + err.Error())
		}
		return command.OK
	case "bgsave":
		return n.bgSave(args)
	case "lastsave":
		return command.AppendInt(nil, n.lastSaveTime())
	case "debug":
		return n.debug(ctx, args)
	case "role":
		return n.role()
	case "wait":
		// Without the connection's write index (WriteIndexed): every
		// write this node has applied.
		return n.Wait(ctx, args, n.fsm.AppliedIndex())
	case "config":
		return n.config(ctx, args)
	case "raft.join", "raft.remove", "raft.transfer", "raft.restore":
		return n.onLeader(ctx, args)
	case "raft.info":
		return n.raftInfo()
	case "raft.snapshot":
		if err := n.snapshotNow(); err != nil {
			return command.Error("ERR " + err.Error())
		}
		return command.OK
	case "sentinel":
		return n.sentinel(args)
	case "raft.shard":
		// A single-group node is shard 0 (Host.Admin routes the command
		// between the shards of a process that hosts several).
		if sub := strings.ToLower(string(args[1])); sub == "moveslots" || sub == "map" || sub == "balance-leaders" || sub == "addshard" ||
			sub == "addreplica" || sub == "removereplica" || sub == "removeshard" {
			return command.Error("ERR RAFT.SHARD " + strings.ToUpper(sub) + " needs a sharded node (shard-map)")
		}
		if len(args) < 3 || string(args[1]) != strconv.FormatUint(uint64(n.cfg.Shard), 10) ||
			strings.EqualFold(string(args[2]), "raft.shard") {
			return command.Error("ERR this node holds no replica of shard " + string(args[1]))
		}
		return n.Admin(ctx, args[2:])
	case "cluster":
		return n.clusterCmd(ctx, args)
	}
	return command.Error(command.ErrUnknownCommand(string(args[0]), args[1:]))
}

// snapshotNow takes a Raft snapshot (the state machine writes an RDB file)
// and waits for it. On the leader a barrier goes first, so the snapshot holds
// every write acknowledged before SAVE. Raft refuses to snapshot a state
// machine that has applied nothing since start; that is a success only when
// the state is already in a snapshot (or empty), and an error otherwise
// (state loaded outside the log, before this node has a leader).
func (n *Node) snapshotNow() error {
	n.saveMu.Lock()
	defer n.saveMu.Unlock()
	if n.raft.State() == raft.Leader {
		if err := n.raft.Barrier(n.cfg.BarrierTimeout).Error(); err != nil {
			return fmt.Errorf("snapshot failed: barrier: %w", err)
		}
	}
	err := n.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		list, lerr := n.snaps.List()
		keys, _ := n.fsm.KeyspaceCounts()
		if lerr != nil || (len(list) == 0 && keys > 0) {
			return errors.New("snapshot failed: this node has applied no log entry yet (wait until it has a leader)")
		}
		err = nil
	}
	if err != nil {
		n.log.Warn("snapshot failed", "error", err)
		return fmt.Errorf("snapshot failed: %w", err)
	}
	n.lastSave.Store(time.Now().Unix())
	n.st.saves.Add(1)
	return nil
}

func (n *Node) bgSave(args [][]byte) []byte {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "schedule")) {
		return command.Error(command.ErrSyntax)
	}
	if n.isClosing() {
		return replyTryAgainClosing
	}
	if !n.bgsave.CompareAndSwap(false, true) {
		if len(args) == 2 {
			return command.AppendSimple(nil, "Background saving scheduled")
		}
		return command.Error("ERR Background save already in progress")
	}
	// Not in n.wg: it only waits on a Raft future, which Raft resolves at
	// shutdown.
	go func() {
		defer n.bgsave.Store(false)
		_ = n.snapshotNow()
	}()
	return command.AppendSimple(nil, "Background saving started")
}

// lastSaveTime is LASTSAVE: the Unix time of the newest snapshot, or of the
// node's start when it has none newer.
func (n *Node) lastSaveTime() int64 {
	t := n.lastSave.Load()
	if list, err := n.snaps.List(); err == nil && len(list) > 0 {
		if ms := snapshotMillis(list[0].ID); ms/1000 > t {
			t = ms / 1000
		}
	}
	return t
}

// snapshotMillis parses the creation time out of a snapshot id
// (term-index-unixms), 0 if it has none.
func snapshotMillis(id string) int64 {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0
	}
	ms, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return ms
}

func (n *Node) debug(ctx context.Context, args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity("debug"))
	}
	switch strings.ToLower(string(args[1])) {
	case "digest", "digest-value":
		// On the leader the digest covers every acknowledged write (a
		// linearizable read: after a restart, the log replay too); on a
		// follower it is of this replica as it is, for comparing replicas.
		return n.Read(ctx, args, n.raft.State() != raft.Leader)
	case "reload":
		return n.debugReload(ctx)
	case "set-active-expire":
		if len(args) != 3 {
			return command.Error(command.ErrSyntax)
		}
		n.activeExpire.Store(string(args[2]) != "0")
		return command.OK
	case "sleep":
		if len(args) != 3 {
			return command.Error(command.ErrSyntax)
		}
		secs, err := strconv.ParseFloat(string(args[2]), 64)
		if err != nil || secs < 0 {
			return command.Error(command.ErrNotFloat)
		}
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return command.OK
	case "change-repl-id", "quicklist-packed-threshold":
		return command.OK
	case "help":
		lines := []string{
			"DIGEST", "    Output a hex signature representing the current DB content.",
			"DIGEST-VALUE <key> [<key> ...]", "    Output a hex signature of the values of all the specified keys.",
			"OBJECT <key>", "    Show low level info about the key and associated value.",
			"RELOAD", "    Save the RDB on disk and reload it back to memory.",
			"SET-ACTIVE-EXPIRE <0|1>", "    Setting it to 0 disables expiring keys in the background.",
			"SLEEP <seconds>", "    Stop the server for <seconds>. Decimals allowed.",
		}
		return command.AppendHelp(nil, "DEBUG", lines)
	}
	return command.Error("ERR unknown subcommand '" + string(args[1]) + "'. Try DEBUG HELP.")
}

// debugReload is DEBUG RELOAD: write this node's state as an RDB file and
// load it back in place, as Redis's test suite uses it to check that a
// save/load round trip keeps everything. The load is an exact restore (the
// file carries the replicated metadata too), so the state after it is the
// state before it and replicas do not diverge. Nothing may be applied in
// between, so it runs only on the leader, with the proposer paused and a
// barrier applied first.
func (n *Node) debugReload(ctx context.Context) []byte {
	if n.raft.State() != raft.Leader {
		return command.Error("ERR DEBUG RELOAD runs only on the leader")
	}
	n.w.pause.Lock()
	defer n.w.pause.Unlock()
	if err := n.raft.Barrier(n.cfg.BarrierTimeout).Error(); err != nil {
		return command.Error("ERR DEBUG RELOAD: barrier: " + err.Error())
	}
	if err := ctx.Err(); err != nil {
		return command.Error("ERR DEBUG RELOAD: " + err.Error())
	}
	var buf bytes.Buffer
	if err := n.fsm.WriteRDB(&buf); err != nil {
		return command.Error("ERR DEBUG RELOAD: write: " + err.Error())
	}
	if err := n.fsm.Restore(io.NopCloser(&buf)); err != nil {
		n.log.Error("debug reload failed to load back its own file; state unchanged", "error", err)
		return command.Error("ERR DEBUG RELOAD: load: " + err.Error())
	}
	return command.OK
}

// role is ROLE, in Redis's master/slave shape with client addresses (a
// member that has not published one yet shows its Raft address).
func (n *Node) role() []byte {
	offset := int64(n.fsm.AppliedIndex())
	if n.raft.State() == raft.Leader {
		out := command.AppendArray(nil, 3)
		out = command.AppendBulkString(out, "master")
		out = command.AppendInt(out, offset)
		others := n.otherServers()
		out = command.AppendArray(out, len(others))
		for _, s := range others {
			host, port := n.clientHostPort(s)
			out = command.AppendArray(out, 3)
			out = command.AppendBulkString(out, host)
			out = command.AppendBulkString(out, port)
			out = command.AppendBulkString(out, "0")
		}
		return out
	}
	_, addr := n.leaderClient()
	host, port := splitAddr(addr)
	state := "connected"
	if addr == "" {
		state = "connect"
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	out := command.AppendArray(nil, 5)
	out = command.AppendBulkString(out, "slave")
	out = command.AppendBulkString(out, host)
	out = command.AppendInt(out, p)
	out = command.AppendBulkString(out, state)
	return command.AppendInt(out, offset)
}

// otherServers returns the configuration's servers other than this node.
func (n *Node) otherServers() []raft.Server {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []raft.Server
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != n.cfg.NodeID {
			out = append(out, s)
		}
	}
	return out
}

func splitAddr(addr string) (host, port string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "0"
	}
	return h, p
}

// configParam is one parameter of CONFIG GET/SET.
type configParam struct {
	name string
	get  func(n *Node) string
	// set validates v and returns an error reply, or the change to make;
	// replicated parameters return a log op instead.
	replicated bool
	check      func(v string) error
	apply      func(n *Node, v string) error // local parameters
}

func configParams() []configParam {
	limit := func(f func(n *Node) int) func(n *Node) string {
		return func(n *Node) string { return strconv.Itoa(f(n)) }
	}
	nonNegInt := func(v string) error {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x < 0 {
			return errors.New("argument must be a non-negative integer")
		}
		return nil
	}
	readOnly := func(v string) func(n *Node) string { return func(*Node) string { return v } }
	return []configParam{
		{name: "set-max-intset-entries", get: limit(func(n *Node) int { return n.fsm.Limits().MaxIntsetEntries }), replicated: true, check: nonNegInt},
		{name: "set-max-listpack-entries", get: limit(func(n *Node) int { return n.fsm.Limits().MaxListpackEntries }), replicated: true, check: nonNegInt},
		{name: "set-max-listpack-value", get: limit(func(n *Node) int { return n.fsm.Limits().MaxListpackValue }), replicated: true, check: nonNegInt},
		{
			name:  "snapshot-threshold",
			get:   func(n *Node) string { return strconv.FormatUint(n.raft.ReloadableConfig().SnapshotThreshold, 10) },
			check: nonNegInt,
			apply: func(n *Node, v string) error {
				x, _ := strconv.ParseUint(v, 10, 64)
				rc := n.raft.ReloadableConfig()
				rc.SnapshotThreshold = x
				return n.raft.ReloadConfig(rc)
			},
		},
		{
			name: "snapshot-interval",
			get:  func(n *Node) string { return n.raft.ReloadableConfig().SnapshotInterval.String() },
			check: func(v string) error {
				d, err := parseInterval(v)
				if err != nil || d <= 0 {
					return errors.New("argument must be a positive duration (\"30s\") or number of seconds")
				}
				return nil
			},
			apply: func(n *Node, v string) error {
				d, _ := parseInterval(v)
				rc := n.raft.ReloadableConfig()
				rc.SnapshotInterval = d
				return n.raft.ReloadConfig(rc)
			},
		},
		// The snapshot for the log's size (retention.go): 0 is off, as in
		// the config file (-1 in Config).
		{
			name: "snapshot-log-size",
			get:  func(n *Node) string { return strconv.FormatInt(max(n.snapLogBytes.Load(), 0), 10) },
			check: func(v string) error {
				if _, ok := fsm.ParseMemory(v); !ok {
					return errors.New("argument must be a memory value")
				}
				return nil
			},
			apply: func(n *Node, v string) error {
				b, _ := fsm.ParseMemory(v)
				n.snapLogBytes.Store(OffIsNegative(b))
				return nil
			},
		},
		{
			name:  "snapshot-log-percentage",
			get:   func(n *Node) string { return strconv.FormatInt(max(n.snapLogPercent.Load(), 0), 10) },
			check: nonNegInt,
			apply: func(n *Node, v string) error {
				p, _ := strconv.ParseInt(v, 10, 64)
				n.snapLogPercent.Store(OffIsNegative(p))
				return nil
			},
		},
		// Read-only answers that Redis clients and tools ask for.
		// Accepted and echoed, changing nothing: every write is in the Raft
		// log, synced on a majority, before it is acknowledged, whatever
		// these say (test harnesses and tools set them).
		{name: "appendonly", get: accepted("appendonly", "no"), check: checkYesNo, apply: accept("appendonly")},
		{name: "save", get: accepted("save", ""), check: checkSave, apply: accept("save")},
		{name: "databases", get: readOnly("1")},
		// maxmemory is replicated like set-max-*: every node must agree on
		// the bound (evict.go, docs/cache.md).
		{name: "maxmemory", get: evictGet(func(c fsm.EvictConfig) string { return strconv.FormatInt(c.MaxMemory, 10) }),
			replicated: true, check: evictCheck("maxmemory")},
		{name: "maxmemory-policy", get: evictGet(func(c fsm.EvictConfig) string { return c.Policy.String() }),
			replicated: true, check: evictCheck("maxmemory-policy")},
		{name: "maxmemory-samples", get: evictGet(func(c fsm.EvictConfig) string { return strconv.Itoa(c.Samples) }),
			replicated: true, check: evictCheck("maxmemory-samples")},
		{name: "maxmemory-eviction-tenacity", get: evictGet(func(c fsm.EvictConfig) string { return strconv.Itoa(c.Tenacity) }),
			replicated: true, check: evictCheck("maxmemory-eviction-tenacity")},
	}
}

// OffIsNegative maps a directive's 0, which says "off" in raftset.conf and
// CONFIG SET as in Redis, to the -1 that says it in Config (and in
// resp.Config), where 0 asks for the default.
func OffIsNegative(v int64) int64 {
	if v == 0 {
		return -1
	}
	return v
}

func evictGet(f func(fsm.EvictConfig) string) func(n *Node) string {
	return func(n *Node) string {
		if ev := n.evictor(); ev != nil {
			return f(ev.EvictConfig())
		}
		return f(fsm.DefaultEvictConfig())
	}
}

func evictCheck(name string) func(v string) error {
	return func(v string) error {
		if _, msg := fsm.CheckEvictParam(name, v); msg != "" {
			return errors.New(msg)
		}
		return nil
	}
}

// accepted reads back what CONFIG SET gave a parameter that has no effect.
func accepted(name, def string) func(n *Node) string {
	return func(n *Node) string {
		if v, ok := n.accepted.Load(name); ok {
			return v.(string)
		}
		return def
	}
}

func accept(name string) func(n *Node, v string) error {
	return func(n *Node, v string) error {
		if name == "appendonly" {
			v = strings.ToLower(v)
		}
		n.accepted.Store(name, v)
		return nil
	}
}

func checkYesNo(v string) error {
	if strings.EqualFold(v, "yes") || strings.EqualFold(v, "no") {
		return nil
	}
	return errors.New("argument must be 'yes' or 'no'")
}

// checkSave accepts Redis's save syntax: "" or pairs of seconds and changes.
func checkSave(v string) error {
	f := strings.Fields(v)
	if len(f)%2 != 0 {
		return errors.New("Invalid save parameters")
	}
	for _, x := range f {
		if n, err := strconv.ParseInt(x, 10, 64); err != nil || n < 0 {
			return errors.New("Invalid save parameters")
		}
	}
	return nil
}

func parseInterval(v string) (time.Duration, error) {
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(s) * time.Second, nil
	}
	return time.ParseDuration(v)
}

func (n *Node) config(ctx context.Context, args [][]byte) []byte {
	if len(args) < 2 {
		return command.Error(command.ErrArity("config"))
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "get":
		if len(args) < 3 {
			return command.Error(command.ErrArity("config|get"))
		}
		var pairs []string
		for _, p := range configParams() {
			for _, pat := range args[2:] {
				if glob.Match(pat, []byte(p.name), true) {
					pairs = append(pairs, p.name, p.get(n))
					break
				}
			}
		}
		out := command.AppendArray(nil, len(pairs))
		for _, s := range pairs {
			out = command.AppendBulkString(out, s)
		}
		return out
	case "set":
		return n.configSet(ctx, args)
	case "resetstat":
		return command.OK
	case "help":
		lines := []string{
			"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
			"SET <directive> <value>", "    Set the configuration <directive> to <value>.",
			"RESETSTAT", "    Reset statistics reported by the INFO command.",
		}
		return command.AppendHelp(nil, "CONFIG", lines)
	}
	return command.Error("ERR unknown subcommand '" + string(args[1]) + "'. Try CONFIG HELP.")
}

// configSet is CONFIG SET name value [name value ...]: every pair is checked
// first; set-max-* go through the log (one entry), the rest are local.
func (n *Node) configSet(ctx context.Context, args [][]byte) []byte {
	if len(args) < 4 || len(args)%2 != 0 {
		return command.Error(command.ErrArity("config|set"))
	}
	params := configParams()
	var ops []command.Op
	type local struct {
		p *configParam
		v string
	}
	var locals []local
	seen := map[string]bool{}
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		v := string(args[i+1])
		var p *configParam
		for j := range params {
			if params[j].name == name {
				p = &params[j]
			}
		}
		if p == nil || p.check == nil {
			return command.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + string(args[i]) + "'")
		}
		if seen[name] {
			return command.Error("ERR CONFIG SET failed (possibly related to argument '" + name + "') - duplicate parameter")
		}
		seen[name] = true
		if err := p.check(v); err != nil {
			return command.Error("ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + err.Error())
		}
		if p.replicated {
			ops = append(ops, command.Cmd([]byte("config"), []byte("set"), []byte(name), []byte(v)))
		} else {
			locals = append(locals, local{p, v})
		}
	}
	if len(ops) > 0 {
		// A follower forwards the change to the leader (which prepares it
		// as any write); the leader proposes it as it is.
		var replies [][]byte
		if _, addr := n.leaderClient(); n.raft.State() != raft.Leader && !n.isClosing() && addr != "" {
			replies = n.Write(ctx, ops)
		} else {
			replies = n.w.submit(ctx, ops, true)
		}
		for _, r := range replies {
			if command.IsError(r) {
				return r
			}
		}
	}
	for _, l := range locals {
		if err := l.p.apply(n, l.v); err != nil {
			return command.Error("ERR CONFIG SET failed (possibly related to argument '" + l.p.name + "') - " + err.Error())
		}
	}
	return command.OK
}
