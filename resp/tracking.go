package resp

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"raftset/internal/command"
	"raftset/internal/strictint"
)

// CLIENT TRACKING (client-side caching), node-local as in Redis: this
// node's table of which connection read which key, and its BCAST prefixes.
// What changes keys is the replicated log, so the store tells every node,
// leader or follower, which keys each applied entry changed (WrittenNotifier);
// a client connected to a follower hears of a write made through any node.
//
// The store's callback only queues the keys (it runs on the apply path);
// one goroutine, started with the first tracking connection, sends the
// invalidations. While no connection tracks, the store is not asked for the
// keys at all.
//
// Keys a connection reads are remembered before the read is run, with the
// number of the last notification queued then: a write applied after that
// invalidates the key (one applied before the read's state was taken may
// do so needlessly, which is harmless). The key stays remembered until a
// write queued after the read returned has invalidated it, so a write that
// races the read can neither be missed nor use up the entry.
//
// Differences from Redis: NOLOOP skips the invalidations of a key that
// entries applied from the start of this connection's write of it until its
// reply carry (its own write is among them, group commit may put another
// connection's write of the same key in the same window: that one is not
// sent either); REDIRECT reaches a connection
// only if it can receive out-of-band messages here (it subscribed, or
// tracks itself).

// WrittenNotifier is what a Store implements to support CLIENT TRACKING:
// OnWritten has fn called after each applied entry with the keys it changed
// (flushed: every key did), nil stops the calls. fn must not block.
type WrittenNotifier interface {
	OnWritten(fn func(keys [][]byte, flushed bool))
}

// trackedMaxQueue bounds the queued notifications: past it they collapse
// into one "everything changed" (an invalidation of every cached key).
const trackedMaxQueue = 4096

var (
	invalidateHdr   = []byte(">2\r\n$10\r\ninvalidate\r\n")
	invalidateChan  = "__redis__:invalidate"
	redirBrokenBulk = []byte("tracking-redir-broken")
)

// tracker is the server's tracking state.
type tracker struct {
	active atomic.Int32 // connections with tracking on

	mu     sync.Mutex
	keys   map[string]map[*client]readMark // default mode: who read the key
	bcast  map[*client]struct{}
	hooked bool
	seq    atomic.Uint64 // notifications queued so far
	// dispatched is the number of the last notification the sender has
	// gone through.
	dispatched uint64

	qmu     sync.Mutex
	queue   []writtenNote
	overrun bool
	wake    chan struct{}
	started bool
}

type writtenNote struct {
	seq     uint64
	keys    [][]byte
	flushed bool
}

// ownMark is a NOLOOP connection's write of a key: the notifications
// numbered in (from, until] may carry it (until 0: not answered yet). The
// store queues an entry's notification before the entry's replies are
// released, so the write's own is numbered at most until.
type ownMark struct{ from, until uint64 }

// readMark is a remembered read: the notification count when it was
// remembered, and one more than the count when it returned (0: still
// running).
type readMark struct{ from, done uint64 }

// trackState is a connection's CLIENT TRACKING state: written by its own
// goroutine under tracker.mu, read by the sender under it.
type trackState struct {
	on, bcast, optin, optout, noloop bool
	broken                           bool
	redirect                         int64
	prefixes                         []string
	caching                          bool // CLIENT CACHING yes (OPTIN) or no (OPTOUT) given
	cachingHold                      bool // the flag survives the current command
	own                              map[string]ownMark
	inflight                         []string // keys of reads not yet answered
}

// trackingRedirect is CLIENT LIST's redir field.
func (c *client) trackingRedirect() int64 {
	t := &c.s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.trk.on {
		return -1
	}
	return c.trk.redirect
}

func (c *client) cmdTracking(dst []byte, args [][]byte) []byte {
	var redir int64
	var bcast, optin, optout, noloop bool
	var prefixes []string
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := args[j]; {
		case bytes.EqualFold(opt, []byte("redirect")) && more > 0:
			j++
			if redir != 0 {
				return command.AppendError(dst, "ERR A client can only redirect to a single other client")
			}
			id, ok := strictint.Parse(args[j])
			if !ok {
				return command.AppendError(dst, command.ErrNotInteger)
			}
			redir = id
			if c.s.clientByID(id) == nil {
				return command.AppendError(dst, "ERR The client ID you want redirect to does not exist")
			}
		case bytes.EqualFold(opt, []byte("bcast")):
			bcast = true
		case bytes.EqualFold(opt, []byte("optin")):
			optin = true
		case bytes.EqualFold(opt, []byte("optout")):
			optout = true
		case bytes.EqualFold(opt, []byte("noloop")):
			noloop = true
		case bytes.EqualFold(opt, []byte("prefix")) && more > 0:
			j++
			prefixes = append(prefixes, string(args[j]))
		default:
			return command.AppendError(dst, command.ErrSyntax)
		}
	}
	t := &c.s.trk
	switch {
	case bytes.EqualFold(args[2], []byte("on")):
	case bytes.EqualFold(args[2], []byte("off")):
		c.trackingOff()
		return append(dst, command.OK...)
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	t.mu.Lock()
	cur := c.trk
	t.mu.Unlock()
	switch {
	case !bcast && len(prefixes) > 0:
		return command.AppendError(dst, "ERR PREFIX option requires BCAST mode to be enabled")
	case cur.on && cur.bcast != bcast:
		return command.AppendError(dst, "ERR You can't switch BCAST mode on/off before disabling tracking "+
			"for this client, and then re-enabling it with a different mode.")
	case bcast && (optin || optout):
		return command.AppendError(dst, "ERR OPTIN and OPTOUT are not compatible with BCAST")
	case optin && optout:
		return command.AppendError(dst, "ERR You can't specify both OPTIN mode and OPTOUT mode")
	case (optin && cur.optout) || (optout && cur.optin):
		return command.AppendError(dst, "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking "+
			"for this client, and then re-enabling it with a different mode.")
	}
	if bcast {
		for i, p := range prefixes {
			for _, old := range cur.prefixes {
				if strings.HasPrefix(p, old) || strings.HasPrefix(old, p) {
					if p == old {
						continue
					}
					return command.AppendError(dst, "ERR Prefix '"+p+"' overlaps with an existing prefix '"+old+
						"'. Prefixes for a single client must not overlap.")
				}
			}
			for _, q := range prefixes[i+1:] {
				if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
					return command.AppendError(dst, "ERR Prefix '"+p+"' overlaps with another provided prefix '"+q+
						"'. Prefixes for a single client must not overlap.")
				}
			}
		}
		if len(prefixes) == 0 {
			prefixes = []string{""}
		}
	}
	c.fc.startPushes() // invalidations come from another goroutine
	t.mu.Lock()
	if !c.trk.on {
		t.active.Add(1)
	}
	c.trk.on, c.trk.broken, c.trk.redirect = true, false, redir
	c.trk.bcast, c.trk.optin, c.trk.optout, c.trk.noloop = bcast, optin, optout, noloop
	if bcast {
		for _, p := range prefixes {
			if !slices.Contains(c.trk.prefixes, p) {
				c.trk.prefixes = append(c.trk.prefixes, p)
			}
		}
		slices.Sort(c.trk.prefixes)
		if t.bcast == nil {
			t.bcast = map[*client]struct{}{}
		}
		t.bcast[c] = struct{}{}
	}
	t.mu.Unlock()
	c.s.hookWrites()
	return append(dst, command.OK...)
}

// trackingOff is CLIENT TRACKING OFF, and what RESET and a closing
// connection do. Keys the connection read stay in the table until they are
// invalidated; the sender skips connections no longer tracking.
func (c *client) trackingOff() {
	t := &c.s.trk
	t.mu.Lock()
	if c.trk.on {
		t.active.Add(-1)
	}
	delete(t.bcast, c)
	c.trk = trackState{}
	t.mu.Unlock()
}

func (c *client) cmdCaching(dst []byte, args [][]byte) []byte {
	t := &c.s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.trk.on {
		return command.AppendError(dst, "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	}
	switch {
	case bytes.EqualFold(args[2], []byte("yes")):
		if !c.trk.optin {
			return command.AppendError(dst, "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
		}
	case bytes.EqualFold(args[2], []byte("no")):
		if !c.trk.optout {
			return command.AppendError(dst, "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
		}
	default:
		return command.AppendError(dst, command.ErrSyntax)
	}
	c.trk.caching, c.trk.cachingHold = true, true
	return append(dst, command.OK...)
}

func (c *client) cmdGetredir(dst []byte) []byte {
	return command.AppendInt(dst, c.trackingRedirect())
}

func (c *client) cmdTrackinginfo(dst []byte) []byte {
	t := &c.s.trk
	t.mu.Lock()
	st := c.trk
	t.mu.Unlock()
	flags := []string{"off"}
	if st.on {
		flags[0] = "on"
	}
	if st.bcast {
		flags = append(flags, "bcast")
	}
	if st.optin {
		flags = append(flags, "optin")
		if st.caching {
			flags = append(flags, "caching-yes")
		}
	}
	if st.optout {
		flags = append(flags, "optout")
		if st.caching {
			flags = append(flags, "caching-no")
		}
	}
	if st.noloop {
		flags = append(flags, "noloop")
	}
	if st.broken {
		flags = append(flags, "broken_redirect")
	}
	dst = command.AppendArray(dst, 6)
	dst = command.AppendBulkString(dst, "flags")
	dst = command.AppendArray(dst, len(flags))
	for _, f := range flags {
		dst = command.AppendBulkString(dst, f)
	}
	dst = command.AppendBulkString(dst, "redirect")
	redir := int64(-1)
	if st.on {
		redir = st.redirect
	}
	dst = command.AppendInt(dst, redir)
	dst = command.AppendBulkString(dst, "prefixes")
	dst = command.AppendArray(dst, len(st.prefixes))
	for _, p := range st.prefixes {
		dst = command.AppendBulkString(dst, p)
	}
	return dst
}

// trackCommand runs before a command of a tracking connection is run or
// queued: it remembers the keys a read will return (default mode, as OPTIN
// or OPTOUT allow) and marks the keys a NOLOOP write changes as its own. It
// also ends CLIENT CACHING's effect after the command that followed it.
func (c *client) trackCommand(spec *command.Spec, args [][]byte) {
	t := &c.s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &c.trk
	if !st.on {
		return
	}
	keep := st.cachingHold || (c.inMulti && spec.Name != "exec") || strings.HasPrefix(spec.Name, "client|")
	st.cachingHold = false
	defer func() {
		if !keep {
			st.caching = false
		}
	}()
	if c.inMulti && spec.Name != "exec" {
		return // queued: remembered at EXEC
	}
	if spec.Has(command.Write) || spec.Name == "exec" {
		// As in Redis, the invalidations this write causes for the
		// connection itself follow its reply: hold pushes until the reply
		// is written.
		c.fc.startPushes()
	}
	specs, argvs := []*command.Spec{spec}, [][][]byte{args}
	if spec.Name == "exec" {
		specs, argvs = specs[:0], argvs[:0]
		for _, q := range c.queue {
			if q.spec.Name == "client|caching" {
				st.caching = true // run at EXEC, before the reads after it
			}
			specs, argvs = append(specs, q.spec), append(argvs, q.args)
		}
	}
	for i, sp := range specs {
		isRead := sp.Has(command.ReadOnly) && !strings.HasSuffix(sp.Name, "_ro") && sp.Group != "scripting"
		switch {
		case isRead && !st.bcast && !(st.optin && !st.caching) && !(st.optout && st.caching):
			pos, _, _ := sp.FindKeys(argvs[i])
			from := t.seq.Load()
			for _, p := range pos {
				k := string(argvs[i][p])
				set := t.keys[k]
				if set == nil {
					if t.keys == nil {
						t.keys = map[string]map[*client]readMark{}
					}
					set = map[*client]readMark{}
					t.keys[k] = set
				}
				m, ok := set[c]
				if !ok {
					m.from = from
				}
				m.done = 0
				set[c] = m
				st.inflight = append(st.inflight, k)
			}
		case sp.Has(command.Write) && st.noloop:
			pos, _, _ := sp.FindKeys(argvs[i])
			from := t.seq.Load()
			for _, p := range pos {
				if st.own == nil {
					st.own = map[string]ownMark{}
				}
				k := string(argvs[i][p])
				m, ok := st.own[k]
				if !ok || m.until != 0 && m.until <= t.dispatched {
					m.from = from // the earlier window was used up
				}
				m.until = 0
				st.own[k] = m
			}
		}
	}
}

// ownWritesDone closes the windows of the connection's NOLOOP writes once
// the store answered them (flush): their notifications are queued by now.
// Windows the sender has gone past are forgotten.
func (c *client) ownWritesDone() {
	t := &c.s.trk
	t.mu.Lock()
	until := t.seq.Load()
	for k, m := range c.trk.own {
		switch {
		case m.until == 0:
			m.until = until
			c.trk.own[k] = m
		case m.until <= t.dispatched:
			delete(c.trk.own, k)
		}
	}
	t.mu.Unlock()
}

// readsDone marks the connection's remembered reads as answered (flush).
func (c *client) readsDone() {
	t := &c.s.trk
	t.mu.Lock()
	done := t.seq.Load()
	for _, k := range c.trk.inflight {
		if m, ok := t.keys[k][c]; ok && m.done == 0 {
			m.done = done + 1
			t.keys[k][c] = m
		}
	}
	c.trk.inflight = c.trk.inflight[:0]
	t.mu.Unlock()
}

// hookWrites asks the store for the written keys while anyone tracks.
func (s *Server) hookWrites() {
	n, ok := s.store.(WrittenNotifier)
	if !ok {
		return
	}
	t := &s.trk
	t.qmu.Lock()
	if !t.started {
		t.started = true
		t.wake = make(chan struct{}, 1)
		s.conns.Add(1)
		go s.sendInvalidations()
	}
	t.qmu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.hooked {
		t.hooked = true
		n.OnWritten(s.written)
	}
}

// written is the store's callback: queue, wake the sender, return.
func (s *Server) written(keys [][]byte, flushed bool) {
	t := &s.trk
	t.qmu.Lock()
	if len(t.queue) >= trackedMaxQueue {
		t.overrun = true
		t.queue = t.queue[:0]
	}
	seq := t.seq.Add(1)
	if !t.overrun {
		t.queue = append(t.queue, writtenNote{seq: seq, keys: keys, flushed: flushed})
	}
	t.qmu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// sendInvalidations is the sender goroutine: it ends with the server.
func (s *Server) sendInvalidations() {
	defer s.conns.Done()
	t := &s.trk
	for {
		select {
		case <-s.ctx.Done():
			if n, ok := s.store.(WrittenNotifier); ok {
				n.OnWritten(nil)
			}
			return
		case <-t.wake:
		}
		t.qmu.Lock()
		notes, overrun := t.queue, t.overrun
		t.queue, t.overrun = nil, false
		t.qmu.Unlock()
		if overrun {
			notes = append([]writtenNote{{seq: t.seq.Load(), flushed: true}}, notes...)
		}
		s.dispatch(notes)
	}
}

// dispatch sends the invalidations of a run of notes: one message per key
// in default mode, one per connection with all its keys in BCAST mode (and
// a null for a flush, to every tracking connection).
func (s *Server) dispatch(notes []writtenNote) {
	t := &s.trk
	type out struct {
		keys    [][]byte
		flushed bool
		bcast   bool
	}
	sends := map[*client]*out{}
	var order []*client
	get := func(c *client) *out {
		o := sends[c]
		if o == nil {
			o = &out{bcast: c.trk.bcast}
			sends[c] = o
			order = append(order, c)
		}
		return o
	}
	t.mu.Lock()
	for _, n := range notes {
		t.dispatched = max(t.dispatched, n.seq)
		if n.flushed {
			for k, set := range t.keys {
				for c, m := range set {
					if m.done != 0 && n.seq >= m.done {
						delete(set, c)
					}
				}
				if len(set) == 0 {
					delete(t.keys, k)
				}
			}
			for _, c := range s.clientList() {
				if c.trk.on {
					get(c).flushed = true
				}
			}
		}
		seen := map[string]bool{}
		for _, k := range n.keys {
			if seen[string(k)] {
				continue
			}
			seen[string(k)] = true
			set := t.keys[string(k)]
			for c, m := range set {
				if !c.trk.on || c.trk.bcast {
					delete(set, c)
					continue
				}
				if n.seq <= m.from {
					continue // the read saw this write
				}
				if m.done != 0 && n.seq >= m.done {
					delete(set, c) // a write after the read: the entry is used up
				}
				if c.trk.ownWrite(n.seq, k) {
					continue
				}
				o := get(c)
				o.keys = append(o.keys, k)
			}
			if set != nil && len(set) == 0 {
				delete(t.keys, string(k))
			}
			for c := range t.bcast {
				if c.trk.ownWrite(n.seq, k) {
					continue
				}
				for _, p := range c.trk.prefixes {
					if bytes.HasPrefix(k, []byte(p)) {
						o := get(c)
						o.keys = append(o.keys, k)
						break
					}
				}
			}
		}
	}
	t.mu.Unlock()
	for _, c := range order {
		o := sends[c]
		if o.flushed {
			s.sendInvalidate(c, nil, true)
		}
		if len(o.keys) == 0 {
			continue
		}
		if o.bcast {
			s.sendInvalidate(c, o.keys, false)
			continue
		}
		for _, k := range o.keys {
			s.sendInvalidate(c, [][]byte{k}, false)
		}
	}
}

// ownWrite reports (t.mu held) whether notification seq may carry a NOLOOP
// connection's own write of k.
func (st *trackState) ownWrite(seq uint64, k []byte) bool {
	if !st.noloop {
		return false
	}
	m, ok := st.own[string(k)]
	return ok && seq > m.from && (m.until == 0 || seq <= m.until)
}

// sendInvalidate sends one invalidation message to c, or to the connection
// it redirects to (Redis's sendTrackingMessage).
func (s *Server) sendInvalidate(c *client, keys [][]byte, flushed bool) {
	s.trk.mu.Lock()
	redir, on := c.trk.redirect, c.trk.on
	s.trk.mu.Unlock()
	if !on {
		return
	}
	target, redirected := c, false
	if redir != 0 {
		target = s.clientByID(redir)
		if target == nil {
			s.trk.mu.Lock()
			c.trk.broken = true
			s.trk.mu.Unlock()
			if c.isRESP3() {
				msg := command.AppendArray(nil, 2)
				msg[0] = '>'
				msg = command.AppendBulk(msg, redirBrokenBulk)
				c.fc.push(command.AppendInt(msg, redir))
			}
			return
		}
		redirected = true
	}
	if !target.fc.pushing.Load() {
		return // it cannot take out-of-band messages (see above)
	}
	resp3 := target.isRESP3()
	var msg []byte
	switch {
	case resp3:
		msg = append(msg, invalidateHdr...)
	case redirected && target.nsubs.Load()+target.npsubs.Load() > 0:
		msg = command.AppendArray(msg, 3)
		msg = command.AppendBulk(msg, pubsubBulkMessage)
		msg = command.AppendBulkString(msg, invalidateChan)
	default:
		return // RESP2 without redirection: nowhere to send it
	}
	switch {
	case flushed && c.isRESP3():
		msg = append(msg, '_', '\r', '\n')
	case flushed:
		msg = append(msg, command.NullArray...)
	default:
		msg = command.AppendArray(msg, len(keys))
		for _, k := range keys {
			msg = command.AppendBulk(msg, k)
		}
	}
	target.fc.push(msg)
}

// clientByID finds a connection of this server.
func (s *Server) clientByID(id int64) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[id]
}
