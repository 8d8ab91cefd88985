package script

import (
	"math"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// removed are the globals Redis 7 does not give scripts (files, modules,
// environments, printing), and gopher-lua's own additions.
var removed = []string{"print", "dofile", "loadfile", "getfenv", "setfenv", "module", "require",
	"newproxy", "_GOPHER_LUA_VERSION", "_printregs"}

// open builds the environment: the base, table, string and math libraries,
// redis, cjson and bit, behind read-only proxies.
func (e *Engine) open() {
	L := e.L
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{"", lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	e.globals = g
	for _, name := range removed {
		g.RawSetString(name, lua.LNil)
	}
	e.errH = L.NewFunction(e.errorHandler)
	set := func(t *lua.LTable, name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }

	set(g, "tostring", func(L *lua.LState) int {
		L.Push(lua.LString(e.tostring(L.CheckAny(1))))
		return 1
	})
	set(g, "pcall", e.pcall)
	// error is Lua 5.1's: error() raises nil, and gopher-lua's wants a value.
	set(g, "error", func(L *lua.LState) int {
		v := L.Get(1)
		level := L.OptInt(2, 1)
		switch v.(type) {
		case lua.LString, lua.LNumber:
			if level > 0 {
				v = lua.LString(L.Where(level) + " " + e.luaString(v))
			}
		}
		L.Error(v, 0)
		return 0
	})
	set(g, "next", e.next)
	next := g.RawGetString("next")
	set(g, "pairs", func(L *lua.LState) int {
		t := L.CheckTable(1)
		L.Push(next)
		L.Push(t)
		L.Push(lua.LNil)
		return 3
	})
	ipairsAux := L.NewFunction(func(L *lua.LState) int {
		t := e.shown(L.CheckTable(1))
		i := L.CheckInt(2) + 1
		v := t.RawGetInt(i)
		if v == lua.LNil {
			return 0
		}
		L.Push(lua.LNumber(i))
		L.Push(v)
		return 2
	})
	set(g, "ipairs", func(L *lua.LState) int {
		t := L.CheckTable(1)
		L.Push(ipairsAux)
		L.Push(t)
		L.Push(lua.LNumber(0))
		return 3
	})
	set(g, "rawget", func(L *lua.LState) int {
		L.Push(e.shown(L.CheckTable(1)).RawGet(L.CheckAny(2)))
		return 1
	})
	set(g, "rawset", func(L *lua.LState) int {
		t := L.CheckTable(1)
		e.refuseProxy(t)
		L.RawSet(t, L.CheckAny(2), L.CheckAny(3))
		L.SetTop(1)
		return 1
	})
	set(g, "setmetatable", func(L *lua.LState) int {
		t := L.CheckTable(1)
		e.refuseProxy(t)
		mt := L.Get(2)
		if _, ok := mt.(*lua.LTable); !ok && mt != lua.LNil {
			L.ArgError(2, "nil or table expected")
		}
		if old, ok := L.GetMetatable(t).(*lua.LTable); ok && old.RawGetString("__metatable") != lua.LNil {
			L.RaiseError("cannot change a protected metatable")
		}
		L.SetMetatable(t, mt)
		L.SetTop(1)
		return 1
	})
	set(g, "getmetatable", func(L *lua.LState) int {
		v := L.CheckAny(1)
		if t, ok := v.(*lua.LTable); ok && e.real[t] != nil {
			L.Push(lua.LNil)
			return 1
		}
		if _, ok := v.(lua.LString); ok {
			L.Push(e.strMeta)
			return 1
		}
		mt := L.GetMetatable(v)
		if t, ok := mt.(*lua.LTable); ok {
			if p := t.RawGetString("__metatable"); p != lua.LNil {
				mt = p
			}
		}
		L.Push(mt)
		return 1
	})
	// Memory figures differ between replicas: scripts see none.
	set(g, "collectgarbage", func(L *lua.LState) int {
		L.Push(lua.LNumber(0))
		return 1
	})
	set(g, "gcinfo", func(L *lua.LState) int {
		L.Push(lua.LNumber(0))
		return 1
	})

	m := g.RawGetString(lua.MathLibName).(*lua.LTable)
	set(m, "random", e.random)
	set(m, "randomseed", func(L *lua.LState) int {
		e.rand.seed(int32(L.CheckInt(1)))
		return 0
	})

	g.RawSetString("redis", e.redisLib())
	g.RawSetString("cjson", e.cjsonLib())
	g.RawSetString("bit", bitLib(L))
	g.RawSetString("struct", e.structLib())
	g.RawSetString("KEYS", L.NewTable())
	g.RawSetString("ARGV", L.NewTable())

	// gopher-lua registers libraries from Go maps, so their insertion
	// order (which pairs follows) differs between processes: every table a
	// script can iterate is rebuilt in sorted order.
	*g = *sortedCopy(L, g)
	for _, name := range []string{lua.TabLibName, lua.StringLibName, lua.MathLibName, "redis", "cjson", "bit", "struct"} {
		g.RawSetString(name, e.protect(sortedCopy(L, g.RawGetString(name).(*lua.LTable))))
	}
	// String methods ("x"):upper() reach the library through the string
	// metatable; it points at the proxy so that getmetatable("") leads to
	// nothing a script can change.
	if sm, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		sm.RawSetString("__index", g.RawGetString(lua.StringLibName))
		e.strMeta = e.protect(sm)
	}
	// _G: reads of missing globals and every write fail, as in Redis 7.
	gmt := L.NewTable()
	gmt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", lua.LVAsString(L.Get(2)))
		return 0
	}))
	L.SetMetatable(g, gmt)
	gp := e.protect(g)
	g.RawSetString("_G", gp)
	L.Env = gp
}

func sortedCopy(L *lua.LState, t *lua.LTable) *lua.LTable {
	var keys []string
	t.ForEach(func(k, _ lua.LValue) { keys = append(keys, lua.LVAsString(k)) })
	sort.Strings(keys)
	out := L.CreateTable(0, len(keys))
	for _, k := range keys {
		out.RawSetString(k, t.RawGetString(k))
	}
	return out
}

// protect returns an empty table that shows t read-only: reads fall
// through to t, writes fail with Redis 7's "Attempt to modify a readonly
// table".
func (e *Engine) protect(t *lua.LTable) *lua.LTable {
	L := e.L
	p := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	L.SetMetatable(p, mt)
	e.real[p] = t
	return p
}

// shown is the table a proxy shows, or t itself.
func (e *Engine) shown(t *lua.LTable) *lua.LTable {
	if r := e.real[t]; r != nil {
		return r
	}
	return t
}

func (e *Engine) refuseProxy(t *lua.LTable) {
	if e.real[t] != nil {
		e.L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
}

// resetProxies empties proxies a library function (table.insert, which
// writes raw) filled during a run, so nothing passes to the next script.
func (e *Engine) resetProxies() {
	for p := range e.real {
		if k, _ := p.Next(lua.LNil); k != lua.LNil {
			mt := p.Metatable
			*p = *e.L.NewTable()
			p.Metatable = mt
		}
	}
}

func (e *Engine) next(L *lua.LState) int {
	t := e.shown(L.CheckTable(1))
	k, v := t.Next(L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(v)
	return 2
}

// pcall is Lua's, except that an error raised as a table {err=...} (by
// redis.call) is caught as its message, as Redis 7 does.
func (e *Engine) pcall(L *lua.LState) int {
	L.CheckAny(1)
	v := L.Get(1)
	if v.Type() != lua.LTFunction && L.GetMetaField(v, "__call").Type() != lua.LTFunction {
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + v.Type().String() + " value"))
		return 2
	}
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		L.Push(lua.LFalse)
		obj := lua.LValue(lua.LString(err.Error()))
		if ae, ok := err.(*lua.ApiError); ok {
			obj = ae.Object
		}
		if t, ok := obj.(*lua.LTable); ok {
			if s, ok := t.RawGetString("err").(lua.LString); ok {
				obj = s
			}
		}
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// --- math.random ---------------------------------------------------------

// rand48 is Redis's redisLrand48: the 48-bit linear congruential generator
// of POSIX lrand48, so that math.randomseed(n) gives the sequence Redis
// gives.
type rand48 struct{ x uint64 }

func (r *rand48) seed(s int32) { r.x = uint64(uint32(s))<<16 | 0x330E }

func (r *rand48) next() int32 {
	r.x = (0x5DEECE66D*r.x + 0xB) & (1<<48 - 1)
	return int32(r.x >> 17)
}

// random is Redis's redis_math_random (Lua 5.1's math.random over rand48).
func (e *Engine) random(L *lua.LState) int {
	r := float64(e.rand.next()%math.MaxInt32) / float64(math.MaxInt32)
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

// --- the redis library ---------------------------------------------------

func (e *Engine) redisLib() *lua.LTable {
	L := e.L
	t := L.NewTable()
	set := func(name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }
	set("call", e.redisCall(true))
	set("pcall", e.redisCall(false))
	set("error_reply", func(L *lua.LState) int {
		s, ok := L.Get(1).(lua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(errTable(L, "ERR wrong number or type of arguments"))
			return 1
		}
		L.Push(errTable(L, errorCode(string(s))))
		return 1
	})
	set("status_reply", func(L *lua.LState) int {
		s, ok := L.Get(1).(lua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(errTable(L, "ERR wrong number or type of arguments"))
			return 1
		}
		r := L.CreateTable(0, 1)
		r.RawSetString("ok", s)
		L.Push(r)
		return 1
	})
	set("sha1hex", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.RaiseError("wrong number of arguments")
		}
		L.Push(lua.LString(SHA1Hex([]byte(e.luaString(L.Get(1))))))
		return 1
	})
	set("log", func(L *lua.LState) int {
		n := L.GetTop()
		if n < 2 {
			L.Error(errTable(L, "ERR redis.log() requires two arguments or more."), 0)
		}
		lvl, ok := L.Get(1).(lua.LNumber)
		if !ok {
			L.Error(errTable(L, "ERR First argument must be a number (log level)."), 0)
		}
		if lvl < 0 || lvl > 3 {
			L.Error(errTable(L, "ERR Invalid debug level."), 0)
		}
		var parts []string
		for i := 2; i <= n; i++ {
			switch v := L.Get(i).(type) {
			case lua.LString, lua.LNumber:
				parts = append(parts, e.luaString(v))
			}
		}
		if e.host != nil && e.host.Log != nil {
			e.host.Log(int(lvl), strings.Join(parts, " "))
		}
		return 0
	})
	set("setresp", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.Error(errTable(L, "ERR redis.setresp() requires one argument."), 0)
		}
		switch n, _ := L.Get(1).(lua.LNumber); int(n) {
		case 2, 3:
			e.resp = int(n)
		default:
			L.Error(errTable(L, "ERR RESP version must be 2 or 3."), 0)
		}
		return 0
	})
	set("replicate_commands", func(L *lua.LState) int {
		L.Push(lua.LTrue)
		return 1
	})
	// Scripts replicate as themselves in raftset; the REPL_* choice has no
	// effect, as it has none on an effects-replicated Redis 7 script that
	// writes nothing.
	set("set_repl", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.Error(errTable(L, "ERR redis.set_repl() requires one argument."), 0)
		}
		return 0
	})
	set("breakpoint", func(L *lua.LState) int {
		L.Push(lua.LFalse)
		return 1
	})
	set("debug", func(L *lua.LState) int { return 0 })
	set("acl_check_cmd", func(L *lua.LState) int {
		if L.GetTop() < 1 {
			L.Error(errTable(L, "ERR Please specify at least one argument for this redis lib call"), 0)
		}
		L.Push(lua.LTrue)
		return 1
	})
	for _, c := range []struct {
		name string
		v    int
	}{{"LOG_DEBUG", 0}, {"LOG_VERBOSE", 1}, {"LOG_NOTICE", 2}, {"LOG_WARNING", 3},
		{"REPL_NONE", 0}, {"REPL_AOF", 1}, {"REPL_SLAVE", 2}, {"REPL_REPLICA", 2}, {"REPL_ALL", 3}} {
		t.RawSetString(c.name, lua.LNumber(c.v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(e.version))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum(e.version)))
	return t
}

// redisCall is redis.call (raise) and redis.pcall: an error reply is raised
// as a table {err=...} by the first and returned by the second.
func (e *Engine) redisCall(raise bool) lua.LGFunction {
	return func(L *lua.LState) int {
		n := L.GetTop()
		if n == 0 {
			return e.fail(L, raise, "ERR Please specify at least one argument for this redis lib call")
		}
		args := make([][]byte, n)
		for i := 1; i <= n; i++ {
			switch v := L.Get(i).(type) {
			case lua.LString:
				args[i-1] = []byte(v)
			case lua.LNumber:
				args[i-1] = []byte(formatArg(float64(v)))
			default:
				return e.fail(L, raise, "ERR Lua redis lib command arguments must be strings or integers")
			}
		}
		if e.host == nil || e.host.Call == nil {
			return e.fail(L, raise, ErrUnknownCommand)
		}
		reply := e.host.Call(args)
		var v lua.LValue
		if e.resp == 3 {
			v = fromRESP3(L, reply, string(args[0]))
		} else {
			v, _ = fromRESP(L, reply)
		}
		if raise && len(reply) > 0 && reply[0] == '-' {
			L.Error(v, 0)
		}
		L.Push(v)
		return 1
	}
}

func (e *Engine) fail(L *lua.LState, raise bool, msg string) int {
	t := errTable(L, msg)
	if raise {
		L.Error(t, 0)
	}
	L.Push(t)
	return 1
}

func errTable(L *lua.LState, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	return t
}

// errorCode is what redis.error_reply makes of its argument: a leading "-"
// goes, and a message of one word gets the code ERR.
func errorCode(s string) string {
	s = strings.TrimPrefix(s, "-")
	if !strings.Contains(s, " ") {
		return "ERR " + s
	}
	return s
}

// luaString is lua_tolstring: strings as they are, numbers as tostring.
func (e *Engine) luaString(v lua.LValue) string {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return formatNumber(float64(x))
	}
	return ""
}

func versionNum(v string) int {
	n := 0
	for i, part := range strings.SplitN(v, ".", 3) {
		p, _ := strconv.Atoi(part)
		n |= p << (16 - 8*i)
	}
	return n
}
