package resp

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"raftset/internal/acl"
	"raftset/internal/command"
)

// Limits on one store call made for a pipeline; a longer pipeline makes
// several calls.
const (
	maxRunOps   = 1024
	maxRunBytes = 1 << 20
)

// runKind says what the pending store call of a connection is.
type runKind uint8

const (
	runNone runKind = iota
	runWrite
	runRead
)

// pendItem is one reply waiting for the pending store call: either the
// store's reply idx, or a reply decided here (decided[off:end]).
type pendItem struct {
	idx      int // -1 for a reply decided here
	off, end int
	spec     *command.Spec // the command answered by the store (observe.go)
	sh       *shape        // RESP3 form or muting (resp3.go); nil: as it is
}

// queued is a command queued by MULTI.
type queued struct {
	spec *command.Spec
	args [][]byte
}

// client is one connection's state. The fields above mu belong to the
// connection's goroutine; the ones below are read by other connections
// (CLIENT LIST) and INFO.
type client struct {
	s  *Server
	rc redcon.Conn
	fc *frameConn

	authed bool
	node   bool // RAFTSET.AUTH succeeded: internal commands are allowed
	// u is the connection's ACL user as of generation ugen of the users
	// (acl.go); nil until looked up.
	u     *acl.User
	ugen  uint64
	stale bool // READONLY: reads skip the consistency barrier
	quit  bool

	// guarded: protected mode let this non-loopback connection in only to
	// prove it is a node (limits.go); anything else is refused.
	guarded bool
	// nodeProof is what RAFTSET.AUTH PROOF must bring after HELLO.
	nodeProof []byte
	// obuf is the reply bytes of this batch waiting in redcon's buffer, and
	// obufSince when they first reached the normal class's soft limit;
	// dropped is set once they passed client-output-buffer-limit.
	obuf      int64
	obufSince int64
	dropped   bool

	inMulti bool
	dirty   bool // a command was refused while queueing: EXEC aborts
	queue   []queued
	watches []command.Watch

	run      runKind
	ops      []command.Op
	reads    [][][]byte
	runBytes int
	pend     []pendItem
	decided  []byte // replies decided here, waiting behind the pending store call
	scratch  []byte
	ncmds    int64
	nerrs    int64
	// cur is the command being handled (nil while unknown), for accounting.
	cur *command.Spec
	// qbuf is the input bytes of the batch being handled (CLIENT LIST).
	qbuf atomic.Int64
	// lastWrite is the store's log index covering this connection's
	// writes (Store.WriteIndexed), for WAIT.
	lastWrite uint64
	// subs and psubs are the channels and patterns subscribed (pubsub.go).
	subs, psubs map[string]struct{}

	id      int64
	addr    string
	laddr   string
	created int64 // Unix ns

	mu      sync.Mutex
	user    string // the ACL user the connection runs as
	name    string
	libName string
	libVer  string

	lastCmd    atomic.Pointer[command.Spec]
	lastActive atomic.Int64 // Unix ns
	multiLen   atomic.Int32 // commands queued, -1 outside MULTI
	readonly   atomic.Bool
	nsubs      atomic.Int32 // len(subs), for CLIENT LIST
	npsubs     atomic.Int32

	r3    resp3State  // protocol and CLIENT REPLY mode (resp3.go)
	trk   trackState  // CLIENT TRACKING (tracking.go), under s.trk.mu
	modes clientModes // MONITOR, CLIENT NO-EVICT / NO-TOUCH (monitor.go)
}

func newClient(s *Server, rc redcon.Conn, fc *frameConn) *client {
	c := &client{
		s:      s,
		rc:     rc,
		fc:     fc,
		authed: !s.authRequired(),
		user:   "default",
		id:     s.nextID.Add(1),
		addr:   rc.RemoteAddr(),
	}
	if a := fc.LocalAddr(); a != nil {
		c.laddr = a.String()
	}
	c.created = s.now.Load()
	c.lastActive.Store(c.created)
	c.multiLen.Store(-1)
	fc.cl = c
	return c
}

// serveRESP is the connection loop's handler (loop.go). The loop calls it for the first command of
// what it read; the rest of the pipeline is taken here so that it is served
// as one batch.
func (s *Server) serveRESP(rc redcon.Conn, cmd redcon.Command) {
	c, _ := rc.Context().(*client)
	if c == nil {
		_ = rc.Close()
		return
	}
	rest := rc.ReadPipeline()
	c.obuf = 0 // the loop wrote the last batch's replies before reading this one
	in := batchBytes(cmd.Args)
	for i := range rest {
		in += batchBytes(rest[i].Args)
	}
	for _, b := range c.fc.bigs { // read apart from redcon's buffer (bigarg.go)
		in += int64(len(b))
	}
	c.qbuf.Store(in)
	c.handle(cmd.Args)
	for i := 0; i < len(rest) && !c.quit; i++ {
		c.handle(rest[i].Args)
	}
	c.flush()
	c.qbuf.Store(0)
	s.notePeaks(in, c.obuf)
	s.stats.commands.Add(c.ncmds)
	s.stats.reads.Add(1)
	if c.nerrs > 0 {
		s.stats.errors.Add(c.nerrs)
	}
	c.ncmds, c.nerrs = 0, 0
	c.lastActive.Store(s.now.Load())
	// Keep the per-connection buffers, unless a large reply grew them.
	if cap(c.scratch) > maxKeptBuffer {
		c.scratch = nil
	}
	if cap(c.decided) > maxKeptBuffer {
		c.decided = nil
	}
}

// maxKeptBuffer is the largest scratch buffer a connection keeps between
// batches.
const maxKeptBuffer = 64 << 10

// handle runs one command, or queues it for the pending store call.
// The checks come in Redis's order: existence, arity, authentication,
// transaction state.
func (c *client) handle(args [][]byte) {
	if len(args) == 0 {
		return
	}
	c.ncmds++
	c.cur = nil
	if c.r3.special {
		c.beginCommand()
	}
	if len(c.fc.bigs) > 0 {
		c.fc.takeBigArgs(args)
	}
	if c.guarded && !c.node && !strings.EqualFold(string(args[0]), nodeAuthCommand) {
		c.deny()
		return
	}
	s := c.s
	spec := s.table.Lookup(args[0])
	if spec == nil || (spec.Has(command.Internal) && !c.node && spec.Name != nodeAuthCommand) {
		// Internal commands do not exist for ordinary clients.
		c.reject(unknownCommand(args))
		return
	}
	if len(spec.Subs) > 0 && len(args) > 1 {
		sub := s.sub(spec, args[1])
		if sub == nil {
			c.reject(unknownSubcommand(args))
			return
		}
		spec = sub
	}
	c.lastCmd.Store(spec)
	c.cur = spec
	if c.r3.special {
		c.commandShape(spec, args)
	} else {
		c.r3.cur = c.resp2Shape(spec)
	}
	if !spec.CheckArity(len(args)) {
		c.reject(command.ErrArity(spec.Name))
		return
	}
	if !c.authed && !spec.Has(command.NoAuth) && spec.Name != nodeAuthCommand && s.authRequired() {
		c.reject(command.ErrNoAuth)
		return
	}
	if !c.inMulti || !spec.Has(command.NoMulti) || queuedAnyway(spec.Name) {
		ctx := "toplevel"
		if c.inMulti {
			ctx = "multi"
		}
		if msg, gone := c.aclCheck(spec, args, ctx); gone {
			return
		} else if msg != "" {
			c.reject(msg)
			return
		}
	}
	if isACLLoad(spec) {
		load, errReply := s.aclLoadArgs(args)
		if errReply != nil {
			if c.inMulti {
				c.dirty = true
			}
			c.reply(errReply)
			return
		}
		args = load
	}
	if c.inSubscribedMode() && !allowedSubscribed(spec.Name) {
		c.reject(errSubscribedMode(spec.Name))
		return
	}
	if c.trk.on || s.mon.n.Load() > 0 || s.pause.on.Load() {
		if c.beforeRun(spec, args) {
			return
		}
	}
	if s.clusterEnabled() && (spec.Name != "exec" || (c.inMulti && !c.dirty)) {
		if msg := c.clusterRedirect(spec, args); msg != "" {
			if spec.Name == "exec" {
				// Redis discards the transaction, then redirects.
				c.endMulti()
				c.scratch = command.AppendError(c.scratch[:0], msg)
				c.reply(c.scratch)
				return
			}
			c.reject(msg)
			return
		}
	}
	if c.inMulti {
		c.queueCommand(spec, args)
		return
	}
	switch {
	case spec.Has(command.Write) && !noWritesEval(spec, args):
		c.pendWrite(command.Op{Kind: command.OpCommand, Args: args}, args)
	case spec.Has(command.ReadOnly), spec.Has(command.Write):
		c.pendRead(args)
	default:
		c.local(spec, args)
	}
}

// noWritesEval reports an EVAL whose script declares no-writes in its
// shebang: Redis 7 runs it as a read, and so does raftset, through the read
// barrier and without a log entry. (EVALSHA of such a script still goes
// through the log: the front end does not know the body behind a SHA.)
func noWritesEval(spec *command.Spec, args [][]byte) bool {
	return spec.Name == "eval" && command.NoWritesScript(args[1])
}

// reject answers a command refused before it ran; inside MULTI it also
// makes EXEC abort, as Redis's rejectCommand does.
func (c *client) reject(msg string) {
	if c.inMulti {
		c.dirty = true
	}
	c.s.rejected(c.cur)
	c.scratch = command.AppendError(c.scratch[:0], msg)
	c.reply(c.scratch)
}

// reply sends a reply decided without the store. If a store call is
// pending, the reply waits for it so that replies keep their order.
func (c *client) reply(b []byte) {
	if c.run == runNone {
		c.writeShaped(c.r3.cur, b)
		return
	}
	off := len(c.decided)
	c.decided = append(c.decided, b...)
	c.pend = append(c.pend, pendItem{idx: -1, off: off, end: len(c.decided), sh: c.r3.cur})
}

func (c *client) write(b []byte) {
	if c.dropped {
		return
	}
	if len(b) > 0 && b[0] == '-' {
		c.nerrs++
		c.s.countError(b)
	}
	c.rc.WriteRaw(b)
	if !c.fc.pushing.Load() {
		c.obuf += int64(len(b))
		c.checkOutputLimit()
	}
}

// pendWrite adds a write to the pending Store.WriteIndexed call.
func (c *client) pendWrite(op command.Op, args [][]byte) {
	if c.run == runRead {
		c.flush()
	}
	c.run = runWrite
	c.pend = append(c.pend, pendItem{idx: len(c.ops), spec: c.cur, sh: c.r3.cur})
	c.ops = append(c.ops, op)
	c.addRunBytes(args)
}

// pendRead adds a read to the pending ReadBatch call. It runs after every
// write before it was answered.
func (c *client) pendRead(args [][]byte) {
	if c.run == runWrite {
		c.flush()
	}
	c.run = runRead
	c.pend = append(c.pend, pendItem{idx: len(c.reads), spec: c.cur, sh: c.r3.cur})
	c.reads = append(c.reads, args)
	c.addRunBytes(args)
}

func (c *client) addRunBytes(args [][]byte) {
	for _, a := range args {
		c.runBytes += len(a)
	}
	if len(c.pend) >= maxRunOps || c.runBytes >= maxRunBytes {
		c.flush()
	}
}

// flush makes the pending store call and writes every waiting reply in
// order.
func (c *client) flush() {
	var replies [][]byte
	start := time.Now()
	switch c.run {
	case runNone:
		return
	case runWrite:
		var index uint64
		replies, index = c.s.store.WriteIndexed(c.s.ctx, c.ops)
		c.lastWrite = max(c.lastWrite, index)
		if c.trk.own != nil {
			c.ownWritesDone()
		}
	case runRead:
		replies = c.s.store.ReadBatch(c.s.ctx, c.reads, c.stale)
	}
	c.accountRun(time.Since(start), replies)
	if len(c.trk.inflight) > 0 {
		c.readsDone()
	}
	for _, p := range c.pend {
		switch {
		case p.idx < 0:
			c.writeShaped(p.sh, c.decided[p.off:p.end])
		case p.idx < len(replies) && len(replies[p.idx]) > 0:
			c.writeShaped(p.sh, replies[p.idx])
		default:
			c.s.log.Error("store returned no reply", "op", p.idx, "replies", len(replies))
			c.write(errNoReply)
		}
	}
	clear(c.ops)
	clear(c.reads)
	c.ops, c.reads, c.pend, c.decided = c.ops[:0], c.reads[:0], c.pend[:0], c.decided[:0]
	c.run, c.runBytes = runNone, 0
}

// errNoReply answers an op the store did not answer: its fate is unknown.
var errNoReply = command.Error(command.ErrClusterDown)

// unknownCommand formats Redis's reply: the name and the arguments are cut
// at 128 bytes.
func unknownCommand(args [][]byte) string {
	name := args[0]
	if len(name) > 128 {
		name = name[:128]
	}
	var shown [][]byte
	total := 0
	for _, a := range args[1:] {
		if total >= 128 {
			break
		}
		if len(a) > 128-total {
			a = a[:128-total]
		}
		shown = append(shown, a)
		total += len(a) + 3
	}
	return command.ErrUnknownCommand(string(name), shown)
}

// unknownSubcommand formats Redis's reply for an unknown subcommand.
func unknownSubcommand(args [][]byte) string {
	sub := args[1]
	if len(sub) > 128 {
		sub = sub[:128]
	}
	return "ERR unknown subcommand '" + string(sub) + "'. Try " + upper(args[0]) + " HELP."
}

func upper(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// batchBytes is the input a command held in the query buffer: its
// arguments and their RESP framing, about 16 bytes each.
func batchBytes(args [][]byte) int64 {
	n := int64(16)
	for _, a := range args {
		n += int64(len(a)) + 16
	}
	return n
}
