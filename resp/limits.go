package resp

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client limits, as Redis has them: protected mode, tcp-keepalive,
// client-query-buffer-limit, client-output-buffer-limit, and the logging of
// failed AUTH attempts. maxclients, timeout and proto-max-bulk-len live
// in config.go with the other built-in parameters.

// deniedProtected is Redis 7's reply to a client refused by protected mode,
// byte for byte (typo included).
var deniedProtected = []byte("-DENIED Redis is running in protected mode because protected mode is enabled " +
	"and no password is set for the default user. In this mode connections are only accepted from the " +
	"loopback interface. If you want to connect from external computers to Redis you may adopt one of " +
	"the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' " +
	"from the loopback interface by connecting to Redis from the same host the server is running, however " +
	"MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this " +
	"change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis " +
	"configuration file, and setting the protected mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
	"4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above " +
	"things in order for the server to start accepting connections from the outside.\r\n")

// Redis's defaults.
const (
	DefaultTCPKeepAlive           = 300 * time.Second
	DefaultClientQueryBufferLimit = 1 << 30
	// DefaultClientOutputBufferLimit is Redis's client-output-buffer-limit.
	DefaultClientOutputBufferLimit = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
)

// limits holds the limits CONFIG SET may change while clients are served.
type limits struct {
	protected atomic.Bool
	keepAlive atomic.Int64 // seconds; 0: off
	qbuf      atomic.Int64
	obuf      atomic.Pointer[OutputLimits]

	authLog authLogger

	authDenied atomic.Int64 // acl_access_denied_auth
	qbufDrops  atomic.Int64 // client_query_buffer_limit_disconnections
	obufDrops  atomic.Int64 // client_output_buffer_limit_disconnections
}

func (s *Server) initLimits() {
	l := &s.lim
	l.protected.Store(!s.cfg.ProtectedModeOff)
	switch ka := s.cfg.TCPKeepAlive; {
	case ka == 0:
		l.keepAlive.Store(int64(DefaultTCPKeepAlive / time.Second))
	case ka > 0:
		l.keepAlive.Store(int64(max(ka/time.Second, 1)))
	}
	if s.cfg.ClientQueryBufferLimit > 0 {
		l.qbuf.Store(s.cfg.ClientQueryBufferLimit)
	} else {
		l.qbuf.Store(DefaultClientQueryBufferLimit)
	}
	ol, err := ParseOutputLimits(DefaultOutputLimits(), s.cfg.ClientOutputBufferLimit)
	if err != nil {
		s.log.Error("client-output-buffer-limit ignored, Redis's defaults apply", "value", s.cfg.ClientOutputBufferLimit, "error", err)
		ol = DefaultOutputLimits()
	}
	l.obuf.Store(&ol)
	l.authLog.log = s.log
}

// IsLoopback reports whether a client at addr counts as local for protected
// mode: an IPv4 address in 127.0.0.0/8, ::1 (or ::ffff:127.x), or a Unix
// socket. Anything unparsable is not local.
func IsLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// protectedCheck decides on a new connection from addr under protected
// mode (on, and no password). refuse: answer -DENIED and close, as Redis
// does at accept. guarded: accept, but only RAFTSET.AUTH may run before the
// connection proved to be another node (with a node secret set, nodes reach
// each other from non-loopback addresses without any client password).
func (s *Server) protectedCheck(addr net.Addr) (guarded, refuse bool) {
	if !s.lim.protected.Load() || s.authRequired() || IsLoopback(addr) {
		return false, false
	}
	if s.cfg.NodeSecret != "" {
		return true, false
	}
	return false, true
}

// deny answers a guarded connection's first command that is not
// RAFTSET.AUTH with protected mode's refusal, and closes it.
func (c *client) deny() {
	c.s.stats.rejected.Add(1)
	c.quit = true
	c.rc.WriteRaw(deniedProtected)
	_ = c.rc.Close()
}

// setKeepAlive applies tcp-keepalive to an accepted connection the way
// Redis's anetKeepAlive does: probes after the period, then every third of
// it, three of them.
func (s *Server) setKeepAlive(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	secs := s.lim.keepAlive.Load()
	if secs <= 0 {
		_ = tc.SetKeepAlive(false)
		return
	}
	period := time.Duration(secs) * time.Second
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable:   true,
		Idle:     period,
		Interval: max(period/3, time.Second),
		Count:    3,
	})
}

// OutputLimit is one client class's output buffer limit: a client whose
// pending output reaches Hard, or stays at or above Soft for more than
// SoftSeconds, is disconnected. Zero turns a limit off.
type OutputLimit struct {
	Hard, Soft  int64
	SoftSeconds int64
}

// OutputLimits are client-output-buffer-limit's classes. Replica is
// accepted and reported for compatibility; raftset has no Redis replicas.
type OutputLimits struct {
	Normal, Replica, Pubsub OutputLimit
}

// DefaultOutputLimits returns Redis's defaults.
func DefaultOutputLimits() OutputLimits {
	return OutputLimits{
		Replica: OutputLimit{Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
		Pubsub:  OutputLimit{Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
	}
}

// String is the CONFIG GET form.
func (l OutputLimits) String() string {
	var b strings.Builder
	for i, c := range []struct {
		name string
		l    OutputLimit
	}{{"normal", l.Normal}, {"slave", l.Replica}, {"pubsub", l.Pubsub}} {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c.name + " " + itoa(c.l.Hard) + " " + itoa(c.l.Soft) + " " + itoa(c.l.SoftSeconds))
	}
	return b.String()
}

// ParseOutputLimits applies v, "class hard soft seconds" repeated (Redis's
// redis.conf and CONFIG SET syntax), to base. Either every class in v is
// valid and applied, or none is; the errors are Redis's words. An empty v
// returns base.
func ParseOutputLimits(base OutputLimits, v string) (OutputLimits, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return base, nil
	}
	if len(f)%4 != 0 {
		return base, errors.New("Wrong number of arguments in buffer limit configuration.")
	}
	out := base
	for i := 0; i < len(f); i += 4 {
		var dst *OutputLimit
		switch strings.ToLower(f[i]) {
		case "normal":
			dst = &out.Normal
		case "slave", "replica":
			dst = &out.Replica
		case "pubsub":
			dst = &out.Pubsub
		default:
			return base, errors.New("Invalid client class specified in buffer limit configuration.")
		}
		hard, herr := ParseMemory(f[i+1])
		soft, serr := ParseMemory(f[i+2])
		secs, err := strconv.ParseInt(f[i+3], 10, 64)
		if herr != nil || serr != nil || err != nil || secs < 0 {
			return base, errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
		}
		*dst = OutputLimit{Hard: hard, Soft: soft, SoftSeconds: secs}
	}
	return out, nil
}

// over applies Redis's checkClientOutputBufferLimits to a client with used
// bytes pending: the hard limit at once, the soft one once it has been
// reached continuously for more than SoftSeconds. since is when the soft
// limit was first seen reached (0: it is not); now is Unix ns.
func (l OutputLimit) over(used int64, since *int64, now int64) bool {
	if l.Hard > 0 && used >= l.Hard {
		return true
	}
	if l.Soft <= 0 || used < l.Soft {
		*since = 0
		return false
	}
	if *since == 0 {
		*since = now
		return false
	}
	return (now-*since)/int64(time.Second) > l.SoftSeconds
}

// registerLimitConfig serves the limits to CONFIG GET and CONFIG SET, with
// Redis's bounds and error texts.
func (s *Server) registerLimitConfig() {
	l := &s.lim
	s.RegisterConfig("protected-mode", func() string {
		if l.protected.Load() {
			return "yes"
		}
		return "no"
	}, func(v string) error {
		switch strings.ToLower(v) {
		case "yes":
			l.protected.Store(true)
		case "no":
			l.protected.Store(false)
		default:
			return errors.New("argument must be 'yes' or 'no'")
		}
		return nil
	})
	s.RegisterConfig("tcp-keepalive", func() string { return itoa(l.keepAlive.Load()) },
		func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("argument couldn't be parsed into an integer")
			}
			if n < 0 || n > 1<<31-1 {
				return errors.New("argument must be between 0 and 2147483647 inclusive")
			}
			l.keepAlive.Store(n) // applies to new connections, as in Redis
			return nil
		})
	s.RegisterConfig("client-query-buffer-limit", func() string { return itoa(l.qbuf.Load()) },
		func(v string) error {
			n, err := ParseMemory(v)
			if err != nil {
				return err
			}
			if n < 1<<20 {
				return errors.New("argument must be between 1048576 and 9223372036854775807 inclusive")
			}
			l.qbuf.Store(n)
			return nil
		})
	s.RegisterConfig("client-output-buffer-limit", func() string { return l.obuf.Load().String() },
		func(v string) error {
			ol, err := ParseOutputLimits(*l.obuf.Load(), v)
			if err != nil {
				return err
			}
			l.obuf.Store(&ol)
			return nil
		})
}

// authLogger logs failed AUTH attempts at warning level, at most one line a
// second: a password guesser must not flood the log, and the line after a
// quiet spell says how many were left out.
type authLogger struct {
	mu         sync.Mutex
	log        interface{ Warn(string, ...any) }
	last       time.Time
	suppressed int64
}

func (a *authLogger) failed(addr, user, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if !a.last.IsZero() && now.Sub(a.last) < time.Second {
		a.suppressed++
		return
	}
	args := []any{"addr", addr, "user", user, "reason", reason}
	if a.suppressed > 0 {
		args = append(args, "suppressed", a.suppressed)
	}
	a.last, a.suppressed = now, 0
	a.log.Warn("AUTH failed", args...)
}

// authFailed counts and logs a failed AUTH or HELLO AUTH.
func (c *client) authFailed(user []byte, reason string) {
	c.s.lim.authDenied.Add(1)
	if len(user) > 64 {
		user = user[:64] // the client chose it: keep the line short
	}
	c.s.lim.authLog.failed(c.addr, strconv.Quote(string(user)), reason)
}

// outputLimitReached logs a client dropped for its output buffer, in
// Redis's words.
func (s *Server) outputLimitReached(c *client) {
	s.lim.obufDrops.Add(1)
	var info []byte
	if c != nil {
		info = c.infoLine(nil)
	}
	s.log.Warn("Client " + string(info) + " scheduled to be closed ASAP for overcoming of output buffer limits.")
}

// checkOutputLimit applies client-output-buffer-limit's normal class to the
// replies of the batch being answered: past it, the connection is closed
// without them, and the rest of the batch is not run.
func (c *client) checkOutputLimit() {
	l := c.s.lim.obuf.Load().Normal
	if (l.Hard == 0 && l.Soft == 0) || !l.over(c.obuf, &c.obufSince, c.s.now.Load()) {
		return
	}
	c.dropped, c.quit = true, true
	c.s.outputLimitReached(c)
	_ = c.fc.Conn.Close() // redcon's flush fails and the connection ends
}
