package resp

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"raftset/internal/command"
	"raftset/internal/strictint"
)

// nodeAuthCommand authenticates a connection as another node of the
// cluster (cluster.CmdAuth).
const nodeAuthCommand = "raftset.auth"

// local runs a command that is not a data command: connection commands,
// transactions, and node commands (resp answers INFO and CONFIG itself and
// passes the others to Store.Admin, and internal ones to Store.Internal).
func (c *client) local(spec *command.Spec, args [][]byte) {
	switch spec.Name {
	case "ping", "echo", "multi", "unwatch":
		// Replies that depend on nothing: they may wait behind a pending
		// store call.
	case "exec":
		c.exec()
		return
	case "shutdown":
		c.flush()
		c.cmdShutdown(args)
		return
	case "sync", "psync":
		c.flush()
		c.cmdSync(spec.Name == "psync")
		return
	case "quit":
		c.flush()
		c.write(command.OK)
		c.quit = true
		_ = c.rc.Close()
		return
	case "reset":
		c.flush()
		c.reset()
		c.write(resetReply)
		return
	default:
		c.flush()
	}
	start := time.Now()
	c.scratch = c.runLocal(c.scratch[:0], spec, args)
	c.accountLocal(spec, args, time.Since(start), c.scratch)
	c.reply(c.scratch)
	if c.modes.closeAfterReply {
		// CLIENT KILL of this very connection (monitor.go).
		c.flush()
		c.quit = true
		_ = c.rc.Close()
	}
}

// runLocal appends the reply of a local command (one that is neither a
// write nor a read of the store's data) to dst.
func (c *client) runLocal(dst []byte, spec *command.Spec, args [][]byte) []byte {
	s := c.s
	switch spec.Name {
	case "ping":
		if len(args) > 2 {
			return command.AppendError(dst, command.ErrArity("ping"))
		}
		if c.inSubscribedMode() {
			return appendSubscribedPong(dst, args)
		}
		if len(args) == 2 {
			return command.AppendBulk(dst, args[1])
		}
		return append(dst, command.Pong...)
	case "echo":
		return command.AppendBulk(dst, args[1])
	case "select":
		return c.cmdSelect(dst, args)
	case "hello":
		return c.cmdHello(dst, args)
	case "auth":
		return c.cmdAuth(dst, args)
	case "readonly", "readwrite":
		c.stale = spec.Name == "readonly"
		c.readonly.Store(c.stale)
		return append(dst, command.OK...)
	case "time":
		now := c.s.store.ClusterTime()
		dst = command.AppendArray(dst, 2)
		dst = command.AppendBulkInt(dst, now.Unix())
		return command.AppendBulkInt(dst, int64(now.Nanosecond()/1000))
	case "multi":
		c.inMulti, c.dirty, c.queue = true, false, c.queue[:0]
		c.multiLen.Store(0)
		return append(dst, command.OK...)
	case "discard":
		return append(dst, command.Error("ERR DISCARD without MULTI")...)
	case "watch":
		return c.cmdWatch(dst, args)
	case "unwatch":
		c.watches = nil
		return append(dst, command.OK...)
	case "info":
		return c.cmdInfo(dst, args)
	case "command":
		return s.docs.appendAll(dst)
	case "command|count":
		return command.AppendInt(dst, int64(len(s.docs.names)))
	case "command|info":
		return s.docs.appendInfo(dst, args[2:])
	case "command|docs":
		return s.docs.appendDocs(dst, args[2:])
	case "command|list":
		return s.docs.appendList(dst, args[2:])
	case "command|getkeys", "command|getkeysandflags":
		return s.docs.appendGetKeys(dst, args[2:], spec.Name == "command|getkeysandflags")
	case "command|help":
		return command.AppendHelp(dst, "COMMAND", commandHelp)
	case "client|id":
		return command.AppendInt(dst, c.id)
	case "client|getname":
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			return append(dst, command.NullBulk...)
		}
		return command.AppendBulkString(dst, name)
	case "client|setname":
		if !validClientName(args[2]) {
			return command.AppendError(dst, "ERR Client names cannot contain spaces, newlines or special characters.")
		}
		c.mu.Lock()
		c.name = string(args[2])
		c.mu.Unlock()
		return append(dst, command.OK...)
	case "client|setinfo":
		return c.cmdSetinfo(dst, args)
	case "client|info":
		line := c.infoLine(nil)
		return command.AppendBulk(dst, append(line, '\n'))
	case "client|list":
		return c.cmdClientList(dst, args)
	case "client|help":
		return command.AppendHelp(dst, "CLIENT", clientHelp)
	case "client|tracking":
		return c.cmdTracking(dst, args)
	case "client|caching":
		return c.cmdCaching(dst, args)
	case "client|getredir":
		return c.cmdGetredir(dst)
	case "client|trackinginfo":
		return c.cmdTrackinginfo(dst)
	case "client|kill":
		return c.cmdClientKill(dst, args)
	case "client|pause":
		return c.cmdClientPause(dst, args)
	case "client|unpause":
		s.unpause()
		return append(dst, command.OK...)
	case "client|reply":
		return c.cmdClientReply(dst, args)
	case "client|no-evict":
		return cmdOnOff(dst, args[2], &c.modes.noEvict)
	case "client|no-touch":
		return cmdOnOff(dst, args[2], &c.modes.noTouch)
	case "monitor":
		return append(dst, c.cmdMonitor()...)
	case "config|get":
		return c.cmdConfigGet(dst, args[2:])
	case "config|set":
		return c.cmdConfigSet(dst, args)
	case "config|resetstat":
		s.resetStats()
		s.store.Admin(s.ctx, args)
		return append(dst, command.OK...)
	case "config|rewrite":
		if s.cfg.ConfigRewrite == nil {
			return command.AppendError(dst, "ERR The server is running without a config file")
		}
		if err := s.cfg.ConfigRewrite(); err != nil {
			s.log.Warn("CONFIG REWRITE failed", "error", err)
			return command.AppendError(dst, "ERR Rewriting config file: "+err.Error())
		}
		s.log.Info("CONFIG REWRITE executed with success.")
		return append(dst, command.OK...)
	case "config|help":
		return command.AppendHelp(dst, "CONFIG", configHelp)
	case "slowlog|get", "slowlog|len", "slowlog|reset", "slowlog|help":
		return c.cmdSlowlog(dst, spec, args)
	case "latency|latest", "latency|history", "latency|reset", "latency|histogram", "latency|help":
		return c.cmdLatency(dst, spec, args)
	case "subscribe", "psubscribe":
		return c.cmdSubscribe(dst, args, spec.Name == "psubscribe")
	case "unsubscribe", "punsubscribe":
		return c.cmdUnsubscribe(dst, args, spec.Name == "punsubscribe")
	case "publish":
		return command.AppendInt(dst, int64(s.Publish(string(args[1]), args[2])))
	case "acl|cat", "acl|dryrun", "acl|genpass", "acl|getuser", "acl|help", "acl|list",
		"acl|log", "acl|save", "acl|users", "acl|whoami":
		return c.cmdACL(dst, spec, args)
	case "replconf":
		return cmdReplconf(dst, args)
	case "wait":
		ctx, stop := c.watchClose(s.ctx)
		defer stop()
		return append(dst, s.store.Wait(ctx, args, c.lastWrite)...)
	case nodeAuthCommand:
		return c.cmdNodeAuth(dst, args)
	case "asking":
		return c.cmdAsking(dst)
	case "cluster|keyslot", "cluster|myid", "cluster|info", "cluster|slots", "cluster|shards", "cluster|nodes",
		"cluster|countkeysinslot", "cluster|getkeysinslot":
		return c.cmdCluster(dst, spec, args)
	}
	if spec.Has(command.Internal) {
		// Node-to-node calls have their own entry point; handle lets them
		// through only after RAFTSET.AUTH.
		return append(dst, s.store.Internal(s.ctx, args)...)
	}
	if spec.Has(command.Admin) {
		return append(dst, s.store.Admin(s.ctx, args)...)
	}
	// A Conn command of the table that this front end does not implement.
	return command.AppendError(dst, unknownCommand(args))
}

// cmdSelect: only database 0 exists.
func (c *client) cmdSelect(dst []byte, args [][]byte) []byte {
	n, ok := strictint.Parse(args[1])
	if !ok || n < -1<<31 || n > 1<<31-1 {
		return command.AppendError(dst, command.ErrNotInteger)
	}
	if n != 0 {
		return command.AppendError(dst, command.ErrDBIndex)
	}
	return append(dst, command.OK...)
}

const errHelloNoAuth = "NOAUTH HELLO must be called with the client already authenticated, " +
	"otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate " +
	"the client and select the RESP protocol version at the same time"

// cmdHello answers HELLO [protover [AUTH user pass] [SETNAME name]] in
// Redis's order of checks; HELLO 3 switches the connection to RESP3
// (resp3.go), and the reply already takes the new protocol's form.
func (c *client) cmdHello(dst []byte, args [][]byte) []byte {
	proto := int64(2)
	if c.r3.resp3 {
		proto = 3
	}
	if len(args) >= 2 {
		ver, ok := strictint.Parse(args[1])
		if !ok {
			return command.AppendError(dst, "ERR Protocol version is not an integer or out of range")
		}
		if ver != 2 && ver != 3 {
			return command.AppendError(dst, "NOPROTO unsupported protocol version")
		}
		proto = ver
	}
	var user, pass, name []byte
	setName := false
	for j := 2; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := args[j]; {
		case bytes.EqualFold(opt, []byte("auth")) && more >= 2:
			user, pass = args[j+1], args[j+2]
			j += 2
		case bytes.EqualFold(opt, []byte("setname")) && more >= 1:
			name, setName = args[j+1], true
			if !validClientName(name) {
				return command.AppendError(dst, "ERR Client names cannot contain spaces, newlines or special characters.")
			}
			j++
		default:
			return command.AppendError(dst, "ERR Syntax error in HELLO option '"+string(opt)+"'")
		}
	}
	if pass != nil {
		if msg := c.authenticate(user, pass, args[0]); msg != "" {
			return command.AppendError(dst, msg)
		}
	}
	if !c.authed && c.s.authRequired() {
		return command.AppendError(dst, errHelloNoAuth)
	}
	if setName {
		c.mu.Lock()
		c.name = string(name)
		c.mu.Unlock()
	}
	c.setProto(int(proto))
	if c.r3.special && c.r3.cur != muteShape {
		c.r3.cur = replyShapes["hello"]
	}
	dst = command.AppendArray(dst, 14)
	dst = command.AppendBulkString(dst, "server")
	dst = command.AppendBulkString(dst, "redis")
	dst = command.AppendBulkString(dst, "version")
	dst = command.AppendBulkString(dst, c.s.cfg.RedisVersion)
	dst = command.AppendBulkString(dst, "proto")
	dst = command.AppendInt(dst, proto)
	dst = command.AppendBulkString(dst, "id")
	dst = command.AppendInt(dst, c.id)
	dst = command.AppendBulkString(dst, "mode")
	dst = command.AppendBulkString(dst, c.s.cfg.Mode)
	dst = command.AppendBulkString(dst, "role")
	dst = command.AppendBulkString(dst, c.s.role())
	dst = command.AppendBulkString(dst, "modules")
	return append(dst, command.EmptyArr...)
}

// cmdAuth answers AUTH [user] pass (acl.go authenticates).
func (c *client) cmdAuth(dst []byte, args [][]byte) []byte {
	if len(args) > 3 {
		return command.AppendError(dst, command.ErrSyntax)
	}
	if len(args) == 2 {
		if c.s.acl.users.DefaultNoPass() {
			return command.AppendError(dst, "ERR AUTH <password> called without any password "+
				"configured for the default user. Are you sure your configuration is correct?")
		}
		if msg := c.authenticate([]byte("default"), args[1], args[0]); msg != "" {
			return command.AppendError(dst, msg)
		}
		return append(dst, command.OK...)
	}
	if msg := c.authenticate(args[1], args[2], args[0]); msg != "" {
		return command.AppendError(dst, msg)
	}
	return append(dst, command.OK...)
}

// validClientName reports whether b suits CLIENT SETNAME: printable ASCII
// without spaces (Redis's validateClientName).
func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func (c *client) cmdSetinfo(dst []byte, args [][]byte) []byte {
	attr, val := args[2], args[3]
	var lib bool
	switch {
	case bytes.EqualFold(attr, []byte("lib-name")):
		lib = true
	case bytes.EqualFold(attr, []byte("lib-ver")):
	default:
		return command.AppendError(dst, "ERR Unrecognized option '"+string(attr)+"'")
	}
	if !validClientName(val) {
		return command.AppendError(dst, "ERR "+string(attr)+" cannot contain spaces, newlines or special characters.")
	}
	c.mu.Lock()
	if lib {
		c.libName = string(val)
	} else {
		c.libVer = string(val)
	}
	c.mu.Unlock()
	return append(dst, command.OK...)
}

// cmdClientList answers CLIENT LIST [TYPE type] [ID id ...].
func (c *client) cmdClientList(dst []byte, args [][]byte) []byte {
	var ids []int64
	none := false
	typ := "" // "normal" or "pubsub": subscribed connections are pubsub
	switch {
	case len(args) == 2:
	case len(args) == 4 && bytes.EqualFold(args[2], []byte("type")):
		switch typ = strings.ToLower(string(args[3])); typ {
		case "normal", "pubsub":
		case "master", "replica", "slave":
			none = true
		default:
			return command.AppendError(dst, "ERR Unknown client type '"+string(args[3])+"'")
		}
	case len(args) > 3 && bytes.EqualFold(args[2], []byte("id")):
		for _, a := range args[3:] {
			id, ok := strictint.Parse(a)
			if !ok || id < 1 {
				return command.AppendError(dst, "ERR Invalid client ID")
			}
			ids = append(ids, id)
		}
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	var out []byte
	if !none {
		for _, cl := range c.s.clientList() {
			if ids != nil && !slices.Contains(ids, cl.id) {
				continue
			}
			if pubsub := cl.nsubs.Load()+cl.npsubs.Load() > 0; (typ == "pubsub" && !pubsub) || (typ == "normal" && pubsub) {
				continue
			}
			out = append(cl.infoLine(out), '\n')
		}
	}
	return command.AppendBulk(dst, out)
}

// clientList returns the connections in id order.
func (s *Server) clientList() []*client {
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, cl := range s.clients {
		list = append(list, cl)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *client) int { return int(a.id - b.id) })
	return list
}

// infoLine appends the connection's CLIENT LIST line (Redis 7.2's fields).
func (c *client) infoLine(dst []byte) []byte {
	now := c.s.now.Load()
	c.mu.Lock()
	name, libName, libVer, user := c.name, c.libName, c.libVer, c.user
	c.mu.Unlock()
	flags := c.clientFlags()
	multi := c.multiLen.Load()
	nsubs, npsubs := c.nsubs.Load(), c.npsubs.Load()
	cmd := "NULL"
	if sp := c.lastCmd.Load(); sp != nil {
		cmd = sp.Name
	}
	dst = append(dst, "id="...)
	dst = strconv.AppendInt(dst, c.id, 10)
	dst = append(dst, " addr="...)
	dst = append(dst, c.addr...)
	dst = append(dst, " laddr="...)
	dst = append(dst, c.laddr...)
	dst = append(dst, " fd="...)
	dst = strconv.AppendInt(dst, int64(c.fc.fd), 10)
	dst = append(dst, " name="...)
	dst = append(dst, name...)
	dst = append(dst, " age="...)
	dst = strconv.AppendInt(dst, max(0, (now-c.created)/int64(time.Second)), 10)
	dst = append(dst, " idle="...)
	dst = strconv.AppendInt(dst, max(0, (now-c.lastActive.Load())/int64(time.Second)), 10)
	dst = append(dst, " flags="...)
	dst = append(dst, flags...)
	dst = append(dst, " db=0 sub="...)
	dst = strconv.AppendInt(dst, int64(nsubs), 10)
	dst = append(dst, " psub="...)
	dst = strconv.AppendInt(dst, int64(npsubs), 10)
	dst = append(dst, " ssub=0 multi="...)
	dst = strconv.AppendInt(dst, int64(multi), 10)
	dst = append(dst, " qbuf="...)
	dst = strconv.AppendInt(dst, c.qbuf.Load(), 10)
	dst = append(dst, " qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd="...)
	dst = append(dst, cmd...)
	dst = append(dst, " user="...)
	dst = append(dst, user...)
	dst = append(dst, " redir="...)
	dst = strconv.AppendInt(dst, c.trackingRedirect(), 10)
	dst = append(dst, " resp="...)
	dst = strconv.AppendInt(dst, int64(max(2, c.r3.proto.Load())), 10)
	dst = append(dst, " lib-name="...)
	dst = append(dst, libName...)
	dst = append(dst, " lib-ver="...)
	return append(dst, libVer...)
}

var clientHelp = []string{
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"UNPAUSE",
	"    Stop the current client pause, resuming traffic.",
	"PAUSE <timeout> [WRITE|ALL]",
	"    Suspend all, or just write, clients for <timeout> milliseconds.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on.",
	"HELP",
	"    Prints this help.",
}

var configHelp = []string{
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"REWRITE",
	"    Rewrite the configuration file.",
	"HELP",
	"    Prints this help.",
}

var commandHelp = []string{
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Prints this help.",
}

var resetReply = []byte("+RESET\r\n")

// reset is RESET (Redis's clearClientConnectionState): the connection
// returns to the state of a new one — no transaction or watched keys, no
// subscriptions, no name, linearizable reads, and authenticated only if no
// password is required.
func (c *client) reset() {
	c.endMulti()
	c.watches = nil
	c.leavePubsub()
	c.nsubs.Store(0)
	c.npsubs.Store(0)
	c.stale = false
	c.readonly.Store(false)
	c.authed = !c.s.authRequired()
	c.mu.Lock()
	c.name = ""
	c.mu.Unlock()
	c.resetModes()
}
