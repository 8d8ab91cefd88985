package resp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/redcon"

	"raftset/internal/command"
)

// ErrServerClosed is returned by Serve and ListenAndServe after Close.
var ErrServerClosed = errors.New("resp: server closed")

// Config configures a Server. The zero value of each field means its default.
type Config struct {
	// Addr is the address ListenAndServe listens on; default ":6379".
	Addr string
	// RequirePass is the password of the default user; empty means none.
	RequirePass string
	// ProtoMaxBulkLen is the largest bulk string a client may send
	// (proto-max-bulk-len); default 512 MiB.
	ProtoMaxBulkLen int64
	// MaxClients is the largest number of connections served at once;
	// default 10000.
	MaxClients int
	// IdleTimeout closes connections idle that long (Redis's "timeout");
	// zero never does.
	IdleTimeout time.Duration
	// Logger receives the front end's logs; default hclog.Default().
	Logger hclog.Logger
	// Version is raftset's version, reported as raftset_version.
	Version string
	// RedisVersion is the Redis version reported to clients (INFO, HELLO);
	// default "7.2.0", so that clients enable Redis 7.2 features.
	RedisVersion string
	// Mode is reported by HELLO and INFO as redis_mode: "standalone"
	// (default) or "cluster".
	Mode string
	// Commands is the command table; default command.Commands().
	Commands command.Table
	// Shutdown asks the process to stop as SIGTERM does (SHUTDOWN calls it).
	// It must return at once: stopping closes this server, which waits for
	// the connection that asked. nil makes SHUTDOWN fail.
	Shutdown func()
	// ConfigRewrite writes the running configuration back into the file the
	// process was started with (CONFIG REWRITE). nil: there is no such file,
	// and CONFIG REWRITE fails as Redis's does.
	ConfigRewrite func() error
	// NodeSecret is what other nodes present with RAFTSET.AUTH before they
	// may send internal commands (command.Internal); empty accepts any
	// (see cluster.NodeSecret). A connection that presented a non-empty one
	// is authenticated and exempt from ACL rules.
	NodeSecret string
	// ACLFile is the aclfile directive: ACL LOAD proposes its contents to
	// every replica, ACL SAVE writes this node's users to it. Empty: ACL
	// LOAD and SAVE answer Redis's "not configured" error.
	ACLFile string

	// Client limits (limits.go).
	//
	// ProtectedModeOff is Redis's "protected-mode no": without it, while no
	// password is set, clients from non-loopback addresses are refused.
	ProtectedModeOff bool
	// TCPKeepAlive is the keepalive period of client connections
	// (tcp-keepalive); default 300s, negative turns keepalives off.
	TCPKeepAlive time.Duration
	// ClientQueryBufferLimit disconnects a client whose unprocessed input
	// grows past it (client-query-buffer-limit); default 1 GiB.
	ClientQueryBufferLimit int64
	// ClientOutputBufferLimit is client-output-buffer-limit in Redis's
	// syntax ("pubsub 32mb 8mb 60"); classes not named keep Redis's defaults.
	ClientOutputBufferLimit string
}

// Server is a RESP server in front of a Store.
type Server struct {
	cfg   Config
	store Store
	log   hclog.Logger
	table command.Table
	subs  map[*command.Spec]map[string]*command.Spec
	docs  *commandDocs

	ctx    context.Context // cancelled by Close: store calls give up
	cancel context.CancelFunc

	pubsub     registry // node-local channels (pubsub.go)
	acl        aclState // acl.go
	auth       atomic.Pointer[authConfig]
	maxBulk    atomic.Int64
	maxClients atomic.Int64
	now        atomic.Int64 // coarse clock (Unix ns), updated every 100ms

	lim limits // limits.go

	trk   tracker    // CLIENT TRACKING (tracking.go)
	mon   monitors   // MONITOR (monitor.go)
	pause pauseState // CLIENT PAUSE (monitor.go)

	cfgMu    sync.RWMutex
	params   map[string]param
	logLevel string

	mu       sync.Mutex
	ln       net.Listener
	rs       *loopServer
	serving  bool
	closed   bool
	done     chan struct{} // closed when Serve returns
	tickStop chan struct{}
	tickDone chan struct{}
	clients  map[int64]*client
	conns    sync.WaitGroup

	nextID  atomic.Int64
	started time.Time
	runID   string
	stats   stats
	obs     observe // observe.go: commandstats, SLOWLOG, LATENCY
}

// authConfig is the requirepass directive as set, for CONFIG GET; the
// users apply it (acl.go).
type authConfig struct {
	pass string
}

// stats are the counters INFO reports.
type stats struct {
	connections atomic.Int64 // total_connections_received
	rejected    atomic.Int64 // rejected_connections
	commands    atomic.Int64 // total_commands_processed
	errors      atomic.Int64 // total_error_replies
	netIn       atomic.Int64 // bytes of closed connections
	netOut      atomic.Int64
	reads       atomic.Int64 // total_reads_processed (batches)
	opsPerSec   atomic.Int64
	samples     [16]int64 // ops per second, one per tick (ticker goroutine only)
	sampleIdx   int
	lastCount   int64
	lastTick    time.Time
}

// NewServer returns a server for store. It does not listen yet.
func NewServer(cfg Config, store Store) *Server {
	if cfg.Addr == "" {
		cfg.Addr = ":6379"
	}
	if cfg.ProtoMaxBulkLen <= 0 {
		cfg.ProtoMaxBulkLen = DefaultProtoMaxBulkLen
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 10000
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.Default()
	}
	if cfg.RedisVersion == "" {
		cfg.RedisVersion = "7.2.0"
	}
	if cfg.Mode == "" {
		cfg.Mode = "standalone"
	}
	if cfg.Commands == nil {
		cfg.Commands = command.Commands()
	}
	s := &Server{
		cfg:     cfg,
		store:   store,
		log:     cfg.Logger,
		table:   cfg.Commands,
		params:  make(map[string]param),
		clients: make(map[int64]*client),
		started: time.Now(),
		runID:   newRunID(),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.initACL()
	s.maxBulk.Store(cfg.ProtoMaxBulkLen)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.initLimits()
	s.now.Store(s.started.UnixNano())
	s.subs = make(map[*command.Spec]map[string]*command.Spec)
	for _, spec := range s.table {
		if len(spec.Subs) == 0 {
			continue
		}
		m := make(map[string]*command.Spec, len(spec.Subs))
		for _, sub := range spec.Subs {
			m[sub.Name[len(spec.Name)+1:]] = sub
		}
		s.subs[spec] = m
	}
	s.docs = newCommandDocs(s.table)
	s.registerBuiltinConfig()
	s.registerLimitConfig()
	s.initObserve()
	return s
}

func newRunID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) setPass(p string) {
	s.auth.Store(&authConfig{pass: p})
	s.acl.users.SetRequirePass(p)
}

// authRequired reports whether new connections must authenticate: the
// default user has a password (requirepass or ACL) or is off.
func (s *Server) authRequired() bool { return !s.acl.users.DefaultNoPass() }

// ListenAndServe listens on cfg.Addr and serves until Close.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve serves connections accepted on ln until Close. It returns
// ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	if s.serving {
		s.mu.Unlock()
		return errors.New("resp: already serving")
	}
	s.serving = true
	fl := &frameListener{Listener: ln, s: s}
	rs := newLoopServer(s.serveRESP, s.accept, s.closedConn)
	rs.acceptError = s.acceptError
	if s.cfg.IdleTimeout > 0 {
		rs.SetIdleClose(s.cfg.IdleTimeout)
	}
	s.ln, s.rs = fl, rs
	s.done = make(chan struct{})
	s.tickStop, s.tickDone = make(chan struct{}), make(chan struct{})
	go s.tick()
	s.mu.Unlock()

	err := rs.serve(fl)
	close(s.done)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServerClosed
	}
	return err
}

// acceptError backs off on accept errors such as EMFILE (the loop retries at
// once, in a loop).
func (s *Server) acceptError(err error) {
	s.log.Warn("accept failed", "error", err)
	select {
	case <-s.ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}

// Addr returns the address the server listens on, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops listening, closes every connection, cancels the store calls
// in flight, and returns once every goroutine the server started has ended.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln, done, tickStop, tickDone := s.ln, s.done, s.tickStop, s.tickDone
	s.mu.Unlock()

	s.cancel()
	var err error
	if ln != nil {
		err = ln.Close()
		<-done // the accept loop ended and closed every connection
	}
	s.conns.Wait() // every connection goroutine returned
	if tickStop != nil {
		close(tickStop)
		<-tickDone
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// accept is the accept callback (loop.go), run on the accepting goroutine.
func (s *Server) accept(rc redcon.Conn) bool {
	s.stats.connections.Add(1)
	fc, _ := rc.NetConn().(*frameConn)
	s.mu.Lock()
	full := int64(len(s.clients)) >= s.maxClients.Load()
	s.mu.Unlock()
	if full || fc == nil {
		s.stats.rejected.Add(1)
		rc.WriteError("ERR max number of clients reached")
		return false
	}
	guarded, refuse := s.protectedCheck(fc.RemoteAddr())
	if refuse {
		s.stats.rejected.Add(1)
		rc.WriteRaw(deniedProtected)
		return false
	}
	c := newClient(s, rc, fc)
	c.guarded = guarded
	s.mu.Lock()
	s.clients[c.id] = c
	s.mu.Unlock()
	rc.SetContext(c)
	s.conns.Add(1)
	return true
}

// closedConn is the closed callback (loop.go), run when a connection's goroutine
// ends (with the loop's lock held).
func (s *Server) closedConn(rc redcon.Conn, err error) {
	c, _ := rc.Context().(*client)
	if c == nil {
		return
	}
	s.stats.netIn.Add(c.fc.in.Load())
	s.stats.netOut.Add(c.fc.out.Load())
	s.mu.Lock()
	delete(s.clients, c.id)
	s.mu.Unlock()
	c.leavePubsub()
	c.trackingOff()
	c.leaveMonitor()
	if err != nil && !errors.Is(err, errRefused) && s.ctx.Err() == nil {
		s.log.Debug("connection closed", "addr", c.addr, "error", err)
	}
	s.conns.Done()
}

// tick keeps the coarse clock and the instantaneous ops/sec, as Redis's
// serverCron samples them (16 samples, 100ms apart).
func (s *Server) tick() {
	defer close(s.tickDone)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	st := &s.stats
	st.lastTick = time.Now()
	for {
		select {
		case <-s.tickStop:
			return
		case now := <-t.C:
			s.now.Store(now.UnixNano())
			s.dropDeletedUsers()
			total := st.commands.Load()
			if el := now.Sub(st.lastTick); el > 0 {
				st.samples[st.sampleIdx] = (total - st.lastCount) * int64(time.Second) / int64(el)
				st.sampleIdx = (st.sampleIdx + 1) % len(st.samples)
			}
			st.lastCount, st.lastTick = total, now
			var sum int64
			for _, v := range st.samples {
				sum += v
			}
			st.opsPerSec.Store(sum / int64(len(st.samples)))
		}
	}
}

// resetStats implements CONFIG RESETSTAT.
func (s *Server) resetStats() {
	st := &s.stats
	st.connections.Store(0)
	st.rejected.Store(0)
	st.commands.Store(0)
	st.errors.Store(0)
	st.netIn.Store(0)
	st.netOut.Store(0)
	st.reads.Store(0)
	s.lim.authDenied.Store(0)
	s.lim.qbufDrops.Store(0)
	s.lim.obufDrops.Store(0)
	s.resetObserve()
	s.mu.Lock()
	for _, c := range s.clients {
		c.fc.in.Store(0)
		c.fc.out.Store(0)
	}
	s.mu.Unlock()
}

// port returns the listening port, or 0.
func (s *Server) port() string {
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		return itoa(int64(a.Port))
	}
	if a := s.Addr(); a != nil {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	if _, p, err := net.SplitHostPort(s.cfg.Addr); err == nil {
		return p
	}
	return "0"
}

// sub finds a container's subcommand by name in any case, without
// allocating.
func (s *Server) sub(parent *command.Spec, name []byte) *command.Spec {
	sub, _ := command.LookupFold(s.subs[parent], name)
	return sub
}

// role returns "master" or "replica" from the store's replication section.
func (s *Server) role() string {
	for _, sec := range s.store.Info() {
		if !strings.EqualFold(sec.Name, "replication") {
			continue
		}
		for _, f := range sec.Fields {
			if f[0] == "role" {
				if f[1] == "slave" || f[1] == "replica" || f[1] == "follower" {
					return "replica"
				}
				return "master"
			}
		}
	}
	return "master"
}
