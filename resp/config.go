package resp

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/command"
	"raftset/internal/glob"
	"raftset/internal/respwire"
)

// param is a runtime parameter served by CONFIG GET/SET on this node.
type param struct {
	get   func() string
	set   func(string) error // nil: immutable
	apply *ConfigApply       // nil: set takes effect alone
}

// ConfigApply takes effect, once per CONFIG SET, the parameters registered
// with it after all of them were set (Redis's apply functions): a
// certificate and its key are only checked together. When it fails, they
// get their previous values back and the CONFIG SET fails with its error.
type ConfigApply struct{ Apply func() error }

// RegisterConfigApplied is RegisterConfig for a parameter that apply makes
// take effect; set only records the value.
func (s *Server) RegisterConfigApplied(name string, get func() string, set func(string) error, apply *ConfigApply) {
	s.cfgMu.Lock()
	s.params[strings.ToLower(name)] = param{get: get, set: set, apply: apply}
	s.cfgMu.Unlock()
}

// RegisterConfig adds (or replaces) a node-local parameter served by CONFIG
// GET and CONFIG SET. set may be nil for a read-only parameter; an error
// from set is reported as Redis does ("CONFIG SET failed (possibly related
// to argument 'name') - <error>"). Parameters not registered here are passed
// to Store.Admin, which owns the replicated ones (set-max-*, snapshot-*).
func (s *Server) RegisterConfig(name string, get func() string, set func(string) error) {
	s.cfgMu.Lock()
	s.params[strings.ToLower(name)] = param{get: get, set: set}
	s.cfgMu.Unlock()
}

var errImmutable = errors.New("can't set immutable config")

// RunningConfig returns the running value of a parameter CONFIG SET can
// change, whether this server or the store owns it (CONFIG REWRITE writes
// these back); ok is false for one it cannot change or does not know.
func (s *Server) RunningConfig(name string) (value string, ok bool) {
	name = strings.ToLower(name)
	s.cfgMu.RLock()
	p, local := s.params[name]
	s.cfgMu.RUnlock()
	if local {
		if p.set == nil {
			return "", false
		}
		return p.get(), true
	}
	items, isArray := bulkStrings(s.store.Admin(s.ctx, [][]byte{[]byte("config"), []byte("get"), []byte(name)}))
	if !isArray || len(items) != 2 || !strings.EqualFold(items[0], name) {
		return "", false
	}
	return items[1], true
}

func (s *Server) registerBuiltinConfig() {
	s.logLevel = "notice"
	s.RegisterConfig("requirepass", func() string { return s.auth.Load().pass },
		func(v string) error { s.setPass(v); return nil })
	s.RegisterConfig("port", s.configPort, nil)
	s.RegisterConfig("tls-port", s.configTLSPort, nil)
	s.RegisterConfig("bind", func() string {
		host, _, _ := strings.Cut(s.cfg.Addr, ":")
		if a := s.Addr(); a != nil {
			host = a.String()
			if i := strings.LastIndexByte(host, ':'); i >= 0 {
				host = host[:i]
			}
		}
		if host == "" || host == "[::]" || host == "0.0.0.0" {
			return "*"
		}
		return strings.Trim(host, "[]")
	}, nil)
	s.RegisterConfig("databases", func() string { return "1" }, nil)
	s.RegisterConfig("proto-max-bulk-len", func() string { return itoa(s.maxBulk.Load()) },
		func(v string) error {
			n, err := ParseMemory(v)
			if err != nil {
				return err
			}
			if n < 1<<20 || n > 1<<40 {
				return errors.New("argument must be between 1048576 and 1099511627776 inclusive")
			}
			s.maxBulk.Store(n)
			return nil
		})
	s.RegisterConfig("maxclients", func() string { return itoa(s.maxClients.Load()) },
		func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("argument couldn't be parsed into an integer")
			}
			if n < 1 {
				return errors.New("argument must be between 1 and 4294967295 inclusive")
			}
			s.maxClients.Store(n)
			return nil
		})
	s.RegisterConfig("timeout", func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return itoa(int64(s.cfg.IdleTimeout / time.Second))
	}, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("argument couldn't be parsed into an integer")
		}
		if n < 0 || n > 1<<31-1 {
			return errors.New("argument must be between 0 and 2147483647 inclusive")
		}
		s.mu.Lock()
		s.cfg.IdleTimeout = time.Duration(n) * time.Second
		rs := s.rs
		s.mu.Unlock()
		if rs != nil {
			rs.SetIdleClose(time.Duration(n) * time.Second) // applies to new connections
		}
		return nil
	})
	s.RegisterConfig("loglevel", func() string {
		s.cfgMu.RLock()
		defer s.cfgMu.RUnlock()
		return s.logLevel
	}, func(v string) error {
		levels := map[string]hclog.Level{"debug": hclog.Debug, "verbose": hclog.Info,
			"notice": hclog.Info, "warning": hclog.Warn, "nothing": hclog.Off}
		lv, ok := levels[strings.ToLower(v)]
		if !ok {
			return errors.New("argument(s) must be one of the following: debug, verbose, notice, warning, nothing")
		}
		s.log.SetLevel(lv)
		s.cfgMu.Lock()
		s.logLevel = strings.ToLower(v)
		s.cfgMu.Unlock()
		return nil
	})
}

// ParseMemory parses a Redis memory value (redis.conf and CONFIG SET): bytes, or a number with one of
// the units k, kb, m, mb, g, gb (case-insensitive).
func ParseMemory(v string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}}
	lv := strings.ToLower(v)
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(lv, u.suffix) {
			lv, mul = strings.TrimSuffix(lv, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(lv, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, errors.New("argument must be a memory value")
	}
	return n * mul, nil
}

// cmdConfigGet answers CONFIG GET pattern [pattern ...] with the local
// parameters that match, merged with what the store answers for the same
// patterns. A name both define is the local one.
func (c *client) cmdConfigGet(dst []byte, patterns [][]byte) []byte {
	s := c.s
	s.cfgMu.RLock()
	names := make([]string, 0, len(s.params))
	for name := range s.params {
		names = append(names, name)
	}
	s.cfgMu.RUnlock()
	slices.Sort(names)

	var pairs [][2]string
	seen := make(map[string]bool)
	for _, name := range names {
		for _, p := range patterns {
			if glob.Match(p, []byte(name), true) {
				s.cfgMu.RLock()
				pm := s.params[name]
				s.cfgMu.RUnlock()
				pairs = append(pairs, [2]string{name, pm.get()})
				seen[name] = true
				break
			}
		}
	}
	// Ask the store unless every pattern is the exact name of a local one.
	askStore := false
	for _, p := range patterns {
		if bytes.ContainsAny(p, "*?[\\") || !seen[strings.ToLower(string(p))] {
			askStore = true
		}
	}
	if askStore {
		args := make([][]byte, 0, len(patterns)+2)
		args = append(args, []byte("config"), []byte("get"))
		args = append(args, patterns...)
		reply := s.store.Admin(s.ctx, args)
		if items, ok := bulkStrings(reply); ok {
			for i := 0; i+1 < len(items); i += 2 {
				name := strings.ToLower(items[i])
				if !seen[name] {
					seen[name] = true
					pairs = append(pairs, [2]string{name, items[i+1]})
				}
			}
		} else if command.IsError(reply) {
			s.log.Debug("store refused CONFIG GET", "reply", strings.TrimSpace(string(reply)))
		}
	}
	dst = command.AppendArray(dst, 2*len(pairs))
	for _, p := range pairs {
		dst = command.AppendBulkString(dst, p[0])
		dst = command.AppendBulkString(dst, p[1])
	}
	return dst
}

// setting is one name value pair of a CONFIG SET.
type setting struct {
	name, value string
	p           param
}

// cmdConfigSet answers CONFIG SET name value [name value ...]. Store-owned
// parameters are set first (through Store.Admin, in one call); local ones
// after, once the store accepted its part.
func (c *client) cmdConfigSet(dst []byte, args [][]byte) []byte {
	s := c.s
	if (len(args)-2)%2 != 0 {
		return command.AppendError(dst, command.ErrArity("config|set"))
	}
	var local []setting
	var remote [][]byte
	seen := make(map[string]bool)
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		if seen[name] {
			return command.AppendError(dst, "ERR CONFIG SET failed (possibly related to argument '"+
				string(args[i])+"') - duplicate parameter")
		}
		seen[name] = true
		s.cfgMu.RLock()
		p, ok := s.params[name]
		s.cfgMu.RUnlock()
		if !ok {
			remote = append(remote, args[i], args[i+1])
			continue
		}
		if p.set == nil {
			return command.AppendError(dst, "ERR CONFIG SET failed (possibly related to argument '"+
				string(args[i])+"') - "+errImmutable.Error())
		}
		local = append(local, setting{name: string(args[i]), value: string(args[i+1]), p: p})
	}
	if len(remote) > 0 {
		reply := s.store.Admin(s.ctx, append([][]byte{[]byte("config"), []byte("set")}, remote...))
		if command.IsError(reply) {
			return append(dst, reply...)
		}
	}
	old := make([]string, len(local))
	for i, st := range local {
		if st.p.apply != nil {
			old[i] = st.p.get()
		}
	}
	for i, st := range local {
		if err := st.p.set(st.value); err != nil {
			restoreApplied(local[:i], old)
			return command.AppendError(dst, "ERR CONFIG SET failed (possibly related to argument '"+
				st.name+"') - "+err.Error())
		}
	}
	var applied []*ConfigApply
	for _, st := range local {
		if st.p.apply == nil || slices.Contains(applied, st.p.apply) {
			continue
		}
		applied = append(applied, st.p.apply)
		if err := st.p.apply.Apply(); err != nil {
			restoreApplied(local, old)
			for _, a := range applied {
				_ = a.Apply() // the previous values took effect before
			}
			return command.AppendError(dst, "ERR CONFIG SET failed (possibly related to argument '"+
				st.name+"') - "+err.Error())
		}
	}
	return append(dst, command.OK...)
}

// restoreApplied gives the parameters that have an apply function their
// old values back (the others took effect when set, as before).
func restoreApplied(set []setting, old []string) {
	for i := len(set) - 1; i >= 0; i-- {
		if set[i].p.apply != nil {
			_ = set[i].p.set(old[i])
		}
	}
}

// bulkStrings returns the texts of an array reply of bulk strings (the
// store's CONFIG GET reply), or false for any other reply.
func bulkStrings(reply []byte) ([]string, bool) {
	r, err := respwire.Parse(reply)
	if err != nil || r.Kind != '*' || r.Null {
		return nil, false
	}
	for _, e := range r.Elems {
		if e.Kind != '$' || e.Null {
			return nil, false
		}
	}
	return r.Strings(), true
}
