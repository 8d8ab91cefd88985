package resp

import (
	"errors"
	"sync"
	"time"

	"raftset/internal/command"
	"raftset/internal/glob"
)

// Pub/Sub (RESP2, node-local): SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE,
// PUNSUBSCRIBE, PUBLISH, and PING in subscribed mode, with Redis's reply
// shapes. It exists so that Sentinel-aware clients (go-redis's failover
// client) hear "+switch-master" when the Raft leader changes (the store
// publishes it through Server.Publish, which cmd/raftset hands the node); PUBLISH reaches only the subscribers
// of the node it is sent to.
//
// Once a connection has subscribed, its replies and the messages published
// to it are queued in order and written by a goroutine of its own, so a
// publisher never waits on a subscriber's socket; a message published while
// a SUBSCRIBE reply is still in redcon's buffer is held until that reply is
// queued, so a client never gets a message before the confirmation of its
// subscription. A subscriber whose queue passes client-output-buffer-limit's
// pubsub class (Redis's 32mb hard, 8mb for 60 s soft) is dropped, as Redis
// drops it.

// closeDrain bounds how long a closing subscribed connection may take to
// write what it has queued (a QUIT's +OK, say).
const closeDrain = time.Second

var (
	pubsubBulkSubscribe    = []byte("subscribe")
	pubsubBulkUnsubscribe  = []byte("unsubscribe")
	pubsubBulkPsubscribe   = []byte("psubscribe")
	pubsubBulkPunsubscribe = []byte("punsubscribe")
	pubsubBulkMessage      = []byte("message")
	pubsubBulkPmessage     = []byte("pmessage")
	pubsubBulkPong         = []byte("pong")
)

// registry maps channels and patterns to their subscribers.
type registry struct {
	mu       sync.RWMutex
	channels map[string]map[*client]struct{}
	patterns map[string]map[*client]struct{}
}

func (r *registry) add(m *map[string]map[*client]struct{}, name string, c *client) {
	r.mu.Lock()
	if *m == nil {
		*m = map[string]map[*client]struct{}{}
	}
	set := (*m)[name]
	if set == nil {
		set = map[*client]struct{}{}
		(*m)[name] = set
	}
	set[c] = struct{}{}
	r.mu.Unlock()
}

func (r *registry) remove(m map[string]map[*client]struct{}, name string, c *client) {
	r.mu.Lock()
	if set := m[name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(m, name)
		}
	}
	r.mu.Unlock()
}

// Publish sends message to this server's subscribers of channel (and of
// patterns matching it) and returns how many received it, as PUBLISH does.
func (s *Server) Publish(channel string, message []byte) int {
	type target struct {
		c       *client
		pattern string
		byPat   bool
	}
	var targets []target
	s.pubsub.mu.RLock()
	for c := range s.pubsub.channels[channel] {
		targets = append(targets, target{c: c})
	}
	for pat, set := range s.pubsub.patterns {
		if glob.Match([]byte(pat), []byte(channel), false) {
			for c := range set {
				targets = append(targets, target{c: c, pattern: pat, byPat: true})
			}
		}
	}
	s.pubsub.mu.RUnlock()
	for _, tg := range targets {
		var msg []byte
		if tg.byPat {
			msg = command.AppendArray(nil, 4)
			msg = command.AppendBulk(msg, pubsubBulkPmessage)
			msg = command.AppendBulkString(msg, tg.pattern)
		} else {
			msg = command.AppendArray(nil, 3)
			msg = command.AppendBulk(msg, pubsubBulkMessage)
		}
		msg = command.AppendBulkString(msg, channel)
		msg = command.AppendBulk(msg, message)
		if tg.c.isRESP3() {
			msg[0] = '>' // a push message (resp3.go)
		}
		tg.c.fc.push(msg)
	}
	return len(targets)
}

// subscriptions is the connection's count of channels and patterns.
func (c *client) subscriptions() int { return len(c.subs) + len(c.psubs) }

// inSubscribedMode reports whether only the pub/sub commands (and PING,
// QUIT) may run: Redis's RESP2 subscribed mode. A RESP3 connection gets
// messages as pushes and may run anything.
func (c *client) inSubscribedMode() bool { return len(c.subs)+len(c.psubs) > 0 && !c.r3.resp3 }

// allowedSubscribed lists the commands a subscribed connection may run.
func allowedSubscribed(name string) bool {
	switch name {
	case "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset":
		return true
	}
	return false
}

func errSubscribedMode(name string) string {
	return "ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}

func appendPubsubReply(dst, kind []byte, name []byte, count int) []byte {
	dst = command.AppendArray(dst, 3)
	dst = command.AppendBulk(dst, kind)
	if name == nil {
		dst = append(dst, command.NullBulk...)
	} else {
		dst = command.AppendBulk(dst, name)
	}
	return command.AppendInt(dst, int64(count))
}

// cmdSubscribe is SUBSCRIBE / PSUBSCRIBE: one confirmation per argument.
func (c *client) cmdSubscribe(dst []byte, args [][]byte, pattern bool) []byte {
	c.fc.startPushes()
	kind, set, reg := pubsubBulkSubscribe, &c.subs, &c.s.pubsub.channels
	if pattern {
		kind, set, reg = pubsubBulkPsubscribe, &c.psubs, &c.s.pubsub.patterns
	}
	if *set == nil {
		*set = map[string]struct{}{}
	}
	for _, a := range args[1:] {
		name := string(a)
		if _, ok := (*set)[name]; !ok {
			(*set)[name] = struct{}{}
			c.s.pubsub.add(reg, name, c)
		}
		dst = appendPubsubReply(dst, kind, a, c.subscriptions())
	}
	c.nsubs.Store(int32(len(c.subs)))
	c.npsubs.Store(int32(len(c.psubs)))
	return dst
}

// cmdUnsubscribe is UNSUBSCRIBE / PUNSUBSCRIBE: the named channels, or
// every one; with none to leave, one reply with a null name.
func (c *client) cmdUnsubscribe(dst []byte, args [][]byte, pattern bool) []byte {
	c.fc.startPushes()
	kind, set, reg := pubsubBulkUnsubscribe, c.subs, c.s.pubsub.channels
	if pattern {
		kind, set, reg = pubsubBulkPunsubscribe, c.psubs, c.s.pubsub.patterns
	}
	names := args[1:]
	if len(names) == 0 {
		for name := range set {
			names = append(names, []byte(name))
		}
		if len(names) == 0 {
			return appendPubsubReply(dst, kind, nil, c.subscriptions())
		}
	}
	for _, a := range names {
		name := string(a)
		if _, ok := set[name]; ok {
			delete(set, name)
			c.s.pubsub.remove(reg, name, c)
		}
		dst = appendPubsubReply(dst, kind, a, c.subscriptions())
	}
	c.nsubs.Store(int32(len(c.subs)))
	c.npsubs.Store(int32(len(c.psubs)))
	return dst
}

// leavePubsub removes a closing connection from the registry.
func (c *client) leavePubsub() {
	for name := range c.subs {
		c.s.pubsub.remove(c.s.pubsub.channels, name, c)
	}
	for name := range c.psubs {
		c.s.pubsub.remove(c.s.pubsub.patterns, name, c)
	}
	c.subs, c.psubs = nil, nil
}

// appendSubscribedPong is PING's reply in subscribed mode.
func appendSubscribedPong(dst []byte, args [][]byte) []byte {
	dst = command.AppendArray(dst, 2)
	dst = command.AppendBulk(dst, pubsubBulkPong)
	if len(args) == 2 {
		return command.AppendBulk(dst, args[1])
	}
	return command.AppendBulk(dst, nil)
}

// pushState is a subscribed connection's output queue (frameConn).
type pushState struct {
	mu      sync.Mutex
	hold    bool   // a SUBSCRIBE reply is still in redcon's buffer
	held    []byte // messages waiting for it
	queue   []byte // bytes for the writer
	writing int64  // bytes the writer is writing now
	since   int64  // when the soft limit was first reached (Unix ns); 0: it is not
	dead    bool   // dropped, or a write failed: nothing more is written
	closing bool   // the connection is closing: write what is queued, then stop
	wake    chan struct{}
}

// startPushes makes every later write of the connection go through the
// queue, and holds messages until the pending replies (the confirmation
// being built) are queued. Only the connection's goroutine calls it, while
// it handles a command.
func (fc *frameConn) startPushes() {
	if !fc.pushing.Load() {
		fc.ps.wake = make(chan struct{}, 1)
		fc.s.conns.Add(1) // the connection's own count is held: Close waits for both
		go fc.writer()
		fc.pushing.Store(true)
	}
	fc.ps.mu.Lock()
	fc.ps.hold = true
	fc.ps.mu.Unlock()
}

// writer writes the queue to the socket until the connection is dropped or
// closed, then closes the socket.
func (fc *frameConn) writer() {
	defer fc.s.conns.Done()
	defer fc.Conn.Close()
	ps := &fc.ps
	for {
		ps.mu.Lock()
		for len(ps.queue) == 0 && !ps.dead && !ps.closing {
			ps.mu.Unlock()
			<-ps.wake
			ps.mu.Lock()
		}
		if ps.dead || len(ps.queue) == 0 {
			ps.mu.Unlock()
			return
		}
		buf := ps.queue
		ps.queue, ps.writing = nil, int64(len(buf))
		ps.mu.Unlock()
		for len(buf) > 0 {
			n, err := fc.Conn.Write(buf[:min(len(buf), 64<<10)])
			fc.out.Add(int64(n))
			buf = buf[n:]
			ps.mu.Lock()
			ps.writing -= int64(n)
			if err != nil {
				ps.dead = true
			}
			dead := ps.dead
			ps.mu.Unlock()
			if dead {
				return
			}
		}
	}
}

func (ps *pushState) signal() {
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// enqueue adds b to the queue, or drops the connection when that takes it
// past its output buffer limit; ps.mu is held.
func (fc *frameConn) enqueue(b []byte) {
	ps := &fc.ps
	if ps.dead || len(b) == 0 {
		return
	}
	ps.queue = append(ps.queue, b...)
	ps.signal()
	fc.checkPushLimit()
}

// checkPushLimit applies client-output-buffer-limit to what is queued,
// held and being written; ps.mu is held.
func (fc *frameConn) checkPushLimit() {
	ps := &fc.ps
	ol := fc.s.lim.obuf.Load()
	l := ol.Normal
	if fc.cl != nil && fc.cl.nsubs.Load()+fc.cl.npsubs.Load() > 0 {
		l = ol.Pubsub
	}
	used := int64(len(ps.queue)+len(ps.held)) + ps.writing
	if !l.over(used, &ps.since, fc.s.now.Load()) {
		return
	}
	ps.dead = true
	ps.queue, ps.held = nil, nil
	ps.signal()
	fc.s.outputLimitReached(fc.cl)
	_ = fc.Conn.Close() // the writer and the connection's goroutine see it and end
}

// push queues a message for the subscriber, or holds it behind a reply not
// yet queued.
func (fc *frameConn) push(msg []byte) {
	fc.ps.mu.Lock()
	defer fc.ps.mu.Unlock()
	if fc.ps.dead {
		return
	}
	if fc.ps.hold {
		fc.ps.held = append(fc.ps.held, msg...)
		fc.checkPushLimit()
		return
	}
	fc.enqueue(msg)
}

// errDropped fails the writes of a dropped connection.
var errDropped = errors.New("resp: connection dropped")

// writeSubscribed is Write once the connection has subscribed: the reply
// bytes are queued (redcon reuses p), then any messages held behind them.
func (fc *frameConn) writeSubscribed(p []byte) (int, error) {
	fc.ps.mu.Lock()
	defer fc.ps.mu.Unlock()
	if fc.ps.dead {
		return 0, errDropped
	}
	fc.enqueue(p)
	fc.enqueue(fc.ps.held)
	fc.ps.hold, fc.ps.held = false, nil
	if fc.ps.dead {
		return 0, errDropped
	}
	return len(p), nil
}

// Close closes the socket; a subscribed connection's writer first writes
// what is queued, for at most closeDrain (not at all when the server is
// closing).
func (fc *frameConn) Close() error {
	if !fc.pushing.Load() {
		return fc.Conn.Close()
	}
	fc.ps.mu.Lock()
	fc.ps.closing = true
	fc.ps.signal()
	fc.ps.mu.Unlock()
	deadline := time.Now().Add(closeDrain)
	if fc.s.ctx.Err() != nil {
		deadline = time.Now()
	}
	return fc.Conn.SetWriteDeadline(deadline)
}
