package resp

import (
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
// Messages are written to a subscriber's socket by the publishing
// goroutine, while the connection's own goroutine may be writing a reply.
// Both go through frameConn.Write, which serialises them once the
// connection has subscribed; a message published while a SUBSCRIBE reply
// is still in redcon's buffer is held until that reply is written, so a
// client never gets a message before the confirmation of its subscription.

// pushTimeout bounds each write to a subscribed connection (a message, or
// a reply while publishers wait for the connection's lock); a subscriber
// that does not read is disconnected, as Redis disconnects one past its
// pub/sub output buffer limit.
const pushTimeout = 5 * time.Second

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
		tg.c.fc.push(msg)
	}
	return len(targets)
}

// subscriptions is the connection's count of channels and patterns.
func (c *client) subscriptions() int { return len(c.subs) + len(c.psubs) }

// inSubscribedMode reports whether only the pub/sub commands (and PING,
// QUIT) may run: Redis's RESP2 subscribed mode.
func (c *client) inSubscribedMode() bool { return len(c.subs)+len(c.psubs) > 0 }

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

// pushState serialises a subscribed connection's writes (frameConn).
type pushState struct {
	mu   sync.Mutex
	hold bool   // a SUBSCRIBE reply is still in redcon's buffer
	held []byte // messages waiting for it
	dead bool   // a message write failed: the connection is being closed
}

// startPushes makes every later write of the connection go through the
// push lock, and holds messages until the pending replies (the
// confirmation being built) are written. Only the connection's goroutine
// calls it, while it handles a command.
func (fc *frameConn) startPushes() {
	fc.pushing.Store(true)
	fc.ps.mu.Lock()
	fc.ps.hold = true
	fc.ps.mu.Unlock()
}

// push writes a message to the subscriber, or holds it behind a reply not
// yet written.
func (fc *frameConn) push(msg []byte) {
	fc.ps.mu.Lock()
	defer fc.ps.mu.Unlock()
	if fc.ps.dead {
		return
	}
	if fc.ps.hold {
		fc.ps.held = append(fc.ps.held, msg...)
		return
	}
	_ = fc.Conn.SetWriteDeadline(time.Now().Add(pushTimeout))
	n, err := fc.Conn.Write(msg)
	_ = fc.Conn.SetWriteDeadline(time.Time{})
	fc.out.Add(int64(n))
	if err != nil {
		fc.ps.dead = true
		_ = fc.Conn.Close() // the connection's goroutine sees the error and cleans up
	}
}

// writeSubscribed is Write once the connection has subscribed: the reply
// bytes, then any messages held behind them. The write is bounded like a
// message's, since publishers wait for the lock it holds.
func (fc *frameConn) writeSubscribed(p []byte) (int, error) {
	fc.ps.mu.Lock()
	defer fc.ps.mu.Unlock()
	_ = fc.Conn.SetWriteDeadline(time.Now().Add(pushTimeout))
	defer fc.Conn.SetWriteDeadline(time.Time{})
	n, err := fc.Conn.Write(p)
	fc.out.Add(int64(n))
	if err == nil && len(fc.ps.held) > 0 {
		var k int
		k, err = fc.Conn.Write(fc.ps.held)
		fc.out.Add(int64(k))
	}
	fc.ps.hold, fc.ps.held = false, nil
	return n, err
}
