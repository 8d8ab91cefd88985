package resp

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"raftset/internal/command"
	"raftset/internal/strictint"
)

// MONITOR and the CLIENT subcommands that act on other connections or on
// how this one is answered: KILL, PAUSE, UNPAUSE, REPLY, NO-EVICT,
// NO-TOUCH.
//
// MONITOR shows the commands this node runs for its clients, in Redis's
// format, when they run (a queued command at EXEC); as in Redis, commands
// refused before running and admin commands (CONFIG, DEBUG, CLIENT KILL...)
// are not shown, and AUTH's and HELLO's secrets are redacted. The commands
// a script runs (Redis's "[0 lua]" lines) run inside the state machine and
// are not shown. Every connection pays one atomic load per command while
// nobody monitors.

// monitors is the server's set of MONITOR connections.
type monitors struct {
	n    atomic.Int32
	mu   sync.Mutex
	list map[*client]struct{}
}

// pauseState is CLIENT PAUSE: until when, and whether every command or only
// writes wait. done is closed when the pause ends early (UNPAUSE).
type pauseState struct {
	mu    sync.Mutex
	until time.Time
	all   bool
	done  chan struct{}
	on    atomic.Bool
}

// clientModes are a connection's flags set by CLIENT NO-EVICT, NO-TOUCH and
// MONITOR (CLIENT LIST shows them).
type clientModes struct {
	monitor atomic.Bool
	noEvict atomic.Bool
	noTouch atomic.Bool
	// closeAfterReply: CLIENT KILL matched this connection (its goroutine only).
	closeAfterReply bool
}

// beforeRun runs before a command runs or is queued while anyone monitors,
// a pause is on, or the connection tracks keys: it refuses a monitor's data
// commands, holds the command through a pause, shows it to the monitors
// and remembers the keys it reads. It reports whether it answered the
// command itself.
func (c *client) beforeRun(spec *command.Spec, args [][]byte) bool {
	if c.modes.monitor.Load() && (spec.Has(command.Write) || spec.Has(command.ReadOnly)) {
		c.reject(errMonitorKeyspace)
		return true
	}
	if c.s.pause.on.Load() && (!c.inMulti || spec.Name == "exec") {
		c.waitPause(c.pauseSpec(spec), args)
	}
	if c.s.mon.n.Load() > 0 {
		c.feedMonitors(spec, args)
	}
	if c.trk.on {
		c.trackCommand(spec, args)
	}
	return false
}

// pauseSpec is the spec a pause looks at: EXEC counts as a write when it
// runs one.
func (c *client) pauseSpec(spec *command.Spec) *command.Spec {
	if spec.Name != "exec" || !c.inMulti {
		return spec
	}
	for _, q := range c.queue {
		if q.spec.Has(command.Write) {
			return q.spec
		}
	}
	return spec
}

// errMonitorKeyspace is Redis's reply to a monitor that sends a data
// command (a monitor is a replica to Redis).
const errMonitorKeyspace = "ERR Replica can't interact with the keyspace"

func (c *client) cmdMonitor() []byte {
	if c.modes.monitor.Load() {
		return nil // Redis ignores a second MONITOR without a reply
	}
	c.fc.startPushes()
	m := &c.s.mon
	m.mu.Lock()
	if m.list == nil {
		m.list = map[*client]struct{}{}
	}
	m.list[c] = struct{}{}
	m.n.Store(int32(len(m.list)))
	m.mu.Unlock()
	c.modes.monitor.Store(true)
	return command.OK
}

// leaveMonitor ends MONITOR (RESET, close).
func (c *client) leaveMonitor() {
	if !c.modes.monitor.Load() {
		return
	}
	m := &c.s.mon
	m.mu.Lock()
	delete(m.list, c)
	m.n.Store(int32(len(m.list)))
	m.mu.Unlock()
	c.modes.monitor.Store(false)
}

// feedMonitors shows a command that is about to run; for EXEC, the queued
// commands first, as they run before EXEC returns.
func (c *client) feedMonitors(spec *command.Spec, args [][]byte) {
	if c.inMulti {
		switch spec.Name {
		case "exec":
			for _, q := range c.queue {
				c.feedMonitor(q.spec, q.args)
			}
		case "multi", "discard", "watch", "quit", "reset":
		default:
			return // queued: shown at EXEC
		}
	}
	c.feedMonitor(spec, args)
}

func (c *client) feedMonitor(spec *command.Spec, args [][]byte) {
	if spec.Has(command.Admin) || slices.Contains(command.ACLCategories(spec), "@admin") {
		return
	}
	now := time.Now()
	line := []byte{'+'}
	line = strconv.AppendInt(line, now.Unix(), 10)
	line = append(line, '.')
	us := strconv.Itoa(now.Nanosecond() / 1000)
	line = append(line, "000000"[len(us):]...)
	line = append(line, us...)
	line = append(line, " [0 "...)
	line = append(line, c.addr...)
	line = append(line, ']')
	redactFrom := len(args)
	switch spec.Name {
	case "auth":
		redactFrom = 1
	case "hello":
		for i := 2; i < len(args); i++ {
			if bytes.EqualFold(args[i], []byte("auth")) && i+2 < len(args) {
				redactFrom = i + 1
				break
			}
		}
	}
	for i, a := range args {
		line = append(line, ' ')
		if i >= redactFrom && (spec.Name == "auth" || i <= redactFrom+1) {
			line = append(line, `"(redacted)"`...)
			continue
		}
		line = appendRepr(line, a)
	}
	line = append(line, '\r', '\n')
	m := &c.s.mon
	m.mu.Lock()
	targets := make([]*client, 0, len(m.list))
	for t := range m.list {
		targets = append(targets, t)
	}
	m.mu.Unlock()
	for _, t := range targets {
		t.fc.push(line)
	}
}

// appendRepr quotes b as Redis's sdscatrepr does.
func appendRepr(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, ch := range b {
		switch ch {
		case '\\', '"':
			dst = append(dst, '\\', ch)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\a':
			dst = append(dst, '\\', 'a')
		case '\b':
			dst = append(dst, '\\', 'b')
		default:
			if ch >= 0x20 && ch < 0x7f {
				dst = append(dst, ch)
			} else {
				dst = append(dst, '\\', 'x', hex[ch>>4], hex[ch&15])
			}
		}
	}
	return append(dst, '"')
}

// cmdClientKill is CLIENT KILL addr (answers +OK, may kill the caller) and
// CLIENT KILL <filter> <value> ... (answers the count; SKIPME yes by
// default).
func (c *client) cmdClientKill(dst []byte, args [][]byte) []byte {
	var id int64
	var addr, laddr, user, typ string
	hasUser := false
	skipme := true
	if len(args) == 3 {
		addr, skipme = string(args[2]), false
	} else {
		if (len(args)-2)%2 != 0 {
			return command.AppendError(dst, command.ErrSyntax)
		}
		for i := 2; i < len(args); i += 2 {
			opt, val := strings.ToLower(string(args[i])), args[i+1]
			switch opt {
			case "id":
				n, ok := strictint.Parse(val)
				if !ok || n < 1 {
					return command.AppendError(dst, "ERR client-id should be greater than 0")
				}
				id = n
			case "type":
				switch typ = strings.ToLower(string(val)); typ {
				case "normal", "pubsub", "master", "replica":
				case "slave":
					typ = "replica"
				default:
					return command.AppendError(dst, "ERR Unknown client type '"+string(val)+"'")
				}
			case "addr":
				addr = string(val)
			case "laddr":
				laddr = string(val)
			case "user":
				if _, ok := c.s.acl.users.User(string(val)); !ok {
					return command.AppendError(dst, "ERR No such user '"+string(val)+"'")
				}
				user, hasUser = string(val), true
			case "skipme":
				switch {
				case bytes.EqualFold(val, []byte("yes")):
					skipme = true
				case bytes.EqualFold(val, []byte("no")):
					skipme = false
				default:
					return command.AppendError(dst, command.ErrSyntax)
				}
			default:
				return command.AppendError(dst, command.ErrSyntax)
			}
		}
	}
	killed := 0
	self := false
	for _, cl := range c.s.clientList() {
		switch {
		case addr != "" && cl.addr != addr,
			laddr != "" && cl.laddr != laddr,
			typ != "" && typ != cl.clientType(),
			id != 0 && cl.id != id,
			hasUser && cl.userName() != user,
			cl == c && skipme:
			continue
		}
		if cl == c {
			self = true
		} else {
			_ = cl.fc.Conn.Close()
		}
		killed++
	}
	if self {
		c.modes.closeAfterReply = true
	}
	if len(args) == 3 {
		if killed == 0 {
			return command.AppendError(dst, "ERR No such client")
		}
		return append(dst, command.OK...)
	}
	return command.AppendInt(dst, int64(killed))
}

// clientType is CLIENT KILL TYPE's class of the connection.
func (c *client) clientType() string {
	if c.nsubs.Load()+c.npsubs.Load() > 0 {
		return "pubsub"
	}
	return "normal"
}

// cmdClientPause is CLIENT PAUSE timeout [WRITE|ALL].
func (c *client) cmdClientPause(dst []byte, args [][]byte) []byte {
	if len(args) > 4 {
		return command.AppendError(dst, "ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.")
	}
	ms, ok := strictint.Parse(args[2])
	if !ok {
		return command.AppendError(dst, "ERR timeout is not an integer or out of range")
	}
	if ms < 0 {
		return command.AppendError(dst, "ERR timeout is negative")
	}
	all := true
	if len(args) == 4 {
		switch {
		case bytes.EqualFold(args[3], []byte("write")):
			all = false
		case bytes.EqualFold(args[3], []byte("all")):
		default:
			return command.AppendError(dst, "ERR CLIENT PAUSE mode must be WRITE or ALL")
		}
	}
	p := &c.s.pause
	p.mu.Lock()
	until := time.Now().Add(time.Duration(ms) * time.Millisecond)
	// As in Redis, a pause never shortens one in force, and ALL wins.
	if !p.on.Load() {
		p.done = make(chan struct{})
		p.until, p.all = until, all
	} else {
		if until.After(p.until) {
			p.until = until
		}
		p.all = p.all || all
	}
	p.on.Store(true)
	p.mu.Unlock()
	return append(dst, command.OK...)
}

// unpause ends a pause (CLIENT UNPAUSE, or its end time seen by a waiter).
func (s *Server) unpause() {
	p := &s.pause
	p.mu.Lock()
	if p.on.Load() {
		p.on.Store(false)
		close(p.done)
	}
	p.mu.Unlock()
}

// waitPause holds a command while CLIENT PAUSE applies to it: every command
// under ALL, writes (and the commands that may lead to one: EVAL, EVALSHA,
// PUBLISH) under WRITE. CLIENT UNPAUSE is never held, so that a pause can be
// ended by any client.
func (c *client) waitPause(spec *command.Spec, args [][]byte) {
	for {
		p := &c.s.pause
		p.mu.Lock()
		until, all, done := p.until, p.all, p.done
		on := p.on.Load()
		p.mu.Unlock()
		if !on || spec.Name == "client|unpause" {
			return
		}
		if !all && !(spec.Has(command.Write) && !noWritesEval(spec, args)) && spec.Name != "publish" {
			return
		}
		d := time.Until(until)
		if d <= 0 {
			c.s.unpause()
			return
		}
		c.flush()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-done:
		case <-c.s.ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// cmdClientReply is CLIENT REPLY ON|OFF|SKIP: OFF and SKIP are not
// answered, ON is.
func (c *client) cmdClientReply(dst []byte, args [][]byte) []byte {
	r := &c.r3
	switch {
	case bytes.EqualFold(args[2], []byte("on")):
		r.replyOff, r.skipNext = false, false
		r.update()
		if r.resp3 {
			r.cur = keepShape
		} else {
			r.cur = nil
		}
		return append(dst, command.OK...)
	case bytes.EqualFold(args[2], []byte("off")):
		r.replyOff = true
	case bytes.EqualFold(args[2], []byte("skip")):
		if !r.replyOff {
			r.skipNext = true
		}
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	r.update()
	r.cur = muteShape
	return dst
}

// cmdOnOff answers CLIENT NO-EVICT and NO-TOUCH on|off.
func cmdOnOff(dst []byte, arg []byte, flag *atomic.Bool) []byte {
	switch {
	case bytes.EqualFold(arg, []byte("on")):
		flag.Store(true)
	case bytes.EqualFold(arg, []byte("off")):
		flag.Store(false)
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	return append(dst, command.OK...)
}

// resetModes is RESET's part for RESP3, CLIENT REPLY, tracking, MONITOR
// and the CLIENT flags.
func (c *client) resetModes() {
	c.r3.replyOff, c.r3.skipNext, c.r3.skipThis = false, false, false
	c.setProto(2)
	c.trackingOff()
	c.leaveMonitor()
	c.modes.noEvict.Store(false)
	c.modes.noTouch.Store(false)
}
