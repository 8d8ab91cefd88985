package script

import (
	lua "github.com/yuin/gopher-lua"

	"strconv"
	"strings"
	"testing"
)

// store is a tiny command host: GET, SET, DEL, INCR and PING over a map,
// with Redis's replies, and the script-host refusals for the rest.
type store struct {
	m        map[string]string
	readOnly bool
	calls    int
	logs     []string
}

func (s *store) host() *Host {
	return &Host{Call: s.call, Log: func(level int, msg string) {
		s.logs = append(s.logs, strconv.Itoa(level)+" "+msg)
	}}
}

func (s *store) call(args [][]byte) []byte {
	s.calls++
	name := strings.ToLower(string(args[0]))
	arity := map[string]int{"get": 2, "set": 3, "del": 2, "incr": 2, "ping": 1}
	if name == "eval" || name == "multi" {
		return appendError(nil, ErrNotAllowed)
	}
	n, ok := arity[name]
	if !ok {
		return appendError(nil, ErrUnknownCommand)
	}
	if len(args) != n {
		return appendError(nil, ErrArity)
	}
	write := name == "set" || name == "del" || name == "incr"
	if write && s.readOnly {
		return appendError(nil, ErrWriteInRO)
	}
	switch name {
	case "ping":
		return []byte("+PONG\r\n")
	case "get":
		v, ok := s.m[string(args[1])]
		if !ok {
			return []byte("$-1\r\n")
		}
		return appendBulk(nil, []byte(v))
	case "set":
		s.m[string(args[1])] = string(args[2])
		return []byte("+OK\r\n")
	case "del":
		_, ok := s.m[string(args[1])]
		delete(s.m, string(args[1]))
		if ok {
			return []byte(":1\r\n")
		}
		return []byte(":0\r\n")
	default: // incr
		v, err := strconv.ParseInt(s.m[string(args[1])], 10, 64)
		if err != nil && s.m[string(args[1])] != "" {
			return appendError(nil, "ERR value is not an integer or out of range")
		}
		s.m[string(args[1])] = strconv.FormatInt(v+1, 10)
		return appendInt(nil, ':', v+1)
	}
}

func run(t *testing.T, e *Engine, s *store, body string, keys, argv []string) string {
	t.Helper()
	sc, msg := Compile([]byte(body))
	if msg != "" {
		return "-" + msg + "\r\n"
	}
	return string(e.Run(sc, bs(keys), bs(argv), 0, DefaultBudget, s.host()))
}

func bs(list []string) [][]byte {
	out := make([][]byte, len(list))
	for i, s := range list {
		out[i] = []byte(s)
	}
	return out
}

func sha(body string) string { return SHA1Hex([]byte(body)) }

// TestReplies checks replies byte for byte against what Redis 7.0's
// redis-server answers for the same scripts (recorded from Debian's 7.0.15).
func TestReplies(t *testing.T) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	suffix := func(body string, line int) string {
		return " script: " + sha(body) + ", on @user_script:" + strconv.Itoa(line) + ".\r\n"
	}
	cases := []struct {
		body       string
		keys, argv []string
		want       string // "~" at the end: append the error suffix for line 1
	}{
		// Lua → RESP.
		{body: "return {1,2,3,'ciao',{1,2}}", want: "*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n"},
		{body: "return {1,{err='x'},3}", want: "*3\r\n:1\r\n-x\r\n:3\r\n"},
		{body: "return {1,{ok='x'},3}", want: "*3\r\n:1\r\n+x\r\n:3\r\n"},
		{body: "return 3.99", want: ":3\r\n"},
		{body: "return -3.99", want: ":-3\r\n"},
		{body: "return 1e20", want: ":-9223372036854775808\r\n"},
		{body: "return 0/0", want: ":-9223372036854775808\r\n"},
		{body: "return nil", want: "$-1\r\n"},
		{body: "return true", want: ":1\r\n"},
		{body: "return false", want: "$-1\r\n"},
		{body: "return {}", want: "*0\r\n"},
		{body: "return {a=1}", want: "*0\r\n"},
		{body: "return {ok=5}", want: "*0\r\n"},
		{body: "return {err=5}", want: "*0\r\n"},
		{body: "return {1,2,3,nil,5}", want: "*3\r\n:1\r\n:2\r\n:3\r\n"},
		{body: "return {true,false,1}", want: "*3\r\n:1\r\n$-1\r\n:1\r\n"},
		{body: "return {1.5, 'x'}", want: "*2\r\n:1\r\n$1\r\nx\r\n"},
		{body: "return {err='x y'}", want: "-x y\r\n"},
		{body: "return redis.error_reply('My Error')", want: "-My Error\r\n"},
		{body: "return redis.error_reply('-My Error')", want: "-My Error\r\n"},
		{body: "return redis.error_reply('a')['err']", want: "$5\r\nERR a\r\n"},
		{body: "return redis.error_reply()", want: "-ERR wrong number or type of arguments\r\n"},
		{body: "return redis.status_reply('FINE')", want: "+FINE\r\n"},
		{body: "return redis.status_reply(5)", want: "-ERR wrong number or type of arguments\r\n"},
		{body: "return redis.sha1hex('')", want: "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"},
		{body: "return redis.sha1hex(1)", want: "$40\r\n356a192b7913b04c54574d18c28d46e6395428ab\r\n"},
		{body: "return redis.REDIS_VERSION_NUM", want: ":459268\r\n"},
		// RESP → Lua.
		{body: "return redis.call('get','nokey')", want: "$-1\r\n"},
		{body: "return type(redis.call('get','nokey'))", want: "$7\r\nboolean\r\n"},
		{body: "return redis.call('set','a','b')", want: "+OK\r\n"},
		{body: "return type(redis.call('set','a','b'))", want: "$5\r\ntable\r\n"},
		{body: "return redis.call('set','a','b')['ok']", want: "$2\r\nOK\r\n"},
		{body: "return type(redis.call('del','a'))", want: "$6\r\nnumber\r\n"},
		{body: "return redis.call('ping')", want: "+PONG\r\n"},
		{body: "redis.call('set','k',3.5) return redis.call('get','k')", want: "$3\r\n3.5\r\n"},
		{body: "redis.call('set','k',0.1) return redis.call('get','k')", want: "$19\r\n0.10000000000000001\r\n"},
		{body: "redis.call('set','k',1e20) return redis.call('get','k')", want: "$5\r\n1e+20\r\n"},
		{body: "return {KEYS[1],ARGV[1]}", keys: []string{"k"}, argv: []string{"x"}, want: "*2\r\n$1\r\nk\r\n$1\r\nx\r\n"},
		{body: "return #KEYS", keys: []string{"k"}, want: ":1\r\n"},
		// Errors.
		{body: "return redis.call('nosuch')", want: "-ERR Unknown Redis command called from script~"},
		{body: "return redis.pcall('nosuch')", want: "-ERR Unknown Redis command called from script\r\n"},
		{body: "local t = redis.pcall('nosuch'); return t['err']", want: "$44\r\nERR Unknown Redis command called from script\r\n"},
		{body: "return redis.call('get')", want: "-ERR Wrong number of args calling Redis command from script~"},
		{body: "return redis.call('eval','return 1', 0)", want: "-ERR This Redis command is not allowed from script~"},
		{body: "return redis.call('set','k',{})", want: "-ERR Lua redis lib command arguments must be strings or integers~"},
		{body: "return redis.call('set','a',true)", want: "-ERR Lua redis lib command arguments must be strings or integers~"},
		{body: "return redis.call()", want: "-ERR Please specify at least one argument for this redis lib call~"},
		{body: "return redis.call(1)", want: "-ERR Unknown Redis command called from script~"},
		{body: "redis.call('set','strkey','abc') return redis.call('incr', KEYS[1])", keys: []string{"strkey"}, want: "-ERR value is not an integer or out of range~"},
		{body: "return redis.pcall('incr', 'strkey')", want: "-ERR value is not an integer or out of range\r\n"},
		{body: "error('x')", want: "-ERR user_script:1: x~"},
		{body: "error()", want: "-ERR nil~"},
		{body: "error(12)", want: "-ERR user_script:1: 12~"},
		{body: "error({err='boom'})", want: "-boom~"},
		{body: "error({err='ERR boom'})", want: "-ERR boom~"},
		{body: "x=1", want: "-ERR user_script:1: Attempt to modify a readonly table~"},
		{body: "return y", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'y'~"},
		{body: "return print", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'print'~"},
		{body: "return os", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'os'~"},
		{body: "string.foo = 1", want: "-ERR user_script:1: Attempt to modify a readonly table~"},
		{body: "KEYS = 1", want: "-ERR user_script:1: Attempt to modify a readonly table~"},
		{body: "redis = 1", want: "-ERR user_script:1: Attempt to modify a readonly table~"},
		{body: "getmetatable('').__index = {}", want: "-ERR user_script:1: Attempt to modify a readonly table~"},
		{body: "rawset(_G, 'x', 1)", want: "-ERR Attempt to modify a readonly table~"},
		{body: "rawset(string, 'x', 1)", want: "-ERR Attempt to modify a readonly table~"},
		{body: "setmetatable(_G, nil)", want: "-ERR Attempt to modify a readonly table~"},
		{body: "return redis.log(5, 'hi')", want: "-ERR Invalid debug level.~"},
		{body: "return redis.log()", want: "-ERR redis.log() requires two arguments or more.~"},
		{body: "return redis.sha1hex()", want: "-ERR user_script:1: wrong number of arguments~"},
		{body: "return redis.setresp()", want: "-ERR redis.setresp() requires one argument.~"},
		{body: "return redis.setresp(4)", want: "-ERR RESP version must be 2 or 3.~"},
		{body: "return redis.setresp(2)", want: "$-1\r\n"},
		{body: "return 'x' .. ", want: "-ERR Error compiling script (new function): user_script:1: *"},
		// pcall catches redis.call's error as its message.
		{body: "local ok, e = pcall(function() redis.call('nosuch') end) return {tostring(ok), e}", want: "*2\r\n$5\r\nfalse\r\n$44\r\nERR Unknown Redis command called from script\r\n"},
		{body: "local ok, e = pcall(function() error({err='x'}) end) return e", want: "$1\r\nx\r\n"},
		{body: "local ok, e = pcall(function() error('x') end) return e", want: "$16\r\nuser_script:1: x\r\n"},
		{body: "local ok, e = xpcall(function() redis.call('nosuch') end, function(x) return type(x) end) return e", want: "$5\r\ntable\r\n"},
		// Libraries.
		{body: "return cjson.encode({1,2,{a=1}})", want: "$13\r\n[1,2,{\"a\":1}]\r\n"},
		{body: "return cjson.decode('[1,2,{\"a\":1.5}]')[3].a", want: ":1\r\n"},
		{body: "return tostring(cjson.decode('{\"a\":null}').a)", want: "$15\r\nuserdata: (nil)\r\n"},
		{body: "return cjson.encode({})", want: "$2\r\n{}\r\n"},
		{body: "return cjson.encode(0.1)", want: "$3\r\n0.1\r\n"},
		{body: "return cjson.encode(1e20)", want: "$5\r\n1e+20\r\n"},
		{body: "return cjson.encode('a/\"b')", want: "$8\r\n\"a\\/\\\"b\"\r\n"},
		{body: "return cjson.encode({[1]=1,[3]=3})", want: "$10\r\n[1,null,3]\r\n"},
		{body: "return cjson.encode(cjson.decode('{\"a\":[1,2,{\"b\":null}]}'))", want: "$22\r\n{\"a\":[1,2,{\"b\":null}]}\r\n"},
		{body: "return cjson.encode('\\1\\31\\127é')", want: "$22\r\n\"\\u0001\\u001f\\u007f\xc3\xa9\"\r\n"},
		{body: "return cjson.encode(123456789012)", want: "$12\r\n123456789012\r\n"},
		{body: "return cjson.encode(-1.5e-7)", want: "$8\r\n-1.5e-07\r\n"},
		{body: "return bit.band(7,3)", want: ":3\r\n"},
		{body: "return bit.tohex(255)", want: "$8\r\n000000ff\r\n"},
		{body: "return tostring(1e15)", want: "$5\r\n1e+15\r\n"},
		{body: "return tostring(2^53)", want: "$18\r\n9.007199254741e+15\r\n"},
		{body: "return tostring(-0.0)", want: "$2\r\n-0\r\n"},
		{body: "return tostring(1/0)", want: "$3\r\ninf\r\n"},
		{body: "return string.format('%d %s %5.2f', 3, 'x', 1.5)", want: "$9\r\n3 x  1.50\r\n"},
		{body: "math.randomseed(0) return {tostring(math.random()), math.random(100), math.random(1,6)}", want: "*3\r\n$16\r\n0.17082803611217\r\n:75\r\n:1\r\n"},
		{body: "math.randomseed(-5) return tostring(math.random())", want: "$15\r\n0.8168164928522\r\n"},
		{body: "math.randomseed(123456789) return tostring(math.random())", want: "$17\r\n0.052468466596896\r\n"},
		{body: "local t = {} for k,v in pairs(redis) do t[#t+1]=k end table.sort(t) return #t", want: ":23\r\n"},
		{body: "return type(coroutine)", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'coroutine'~"},
		// Shebangs.
		{body: "#!lua flags=foo\nreturn 1", want: "-ERR Unexpected flag in script shebang: foo\r\n"},
		{body: "#!foo\nreturn 1", want: "-ERR Unexpected engine in script shebang: #!foo\r\n"},
		{body: "#!lua name=x\nreturn 1", want: "-ERR Unknown lua shebang option: name=x\r\n"},
		{body: "#!lua", want: "-ERR Invalid script shebang\r\n"},
		{body: "#!lua flags=no-writes,allow-stale\nreturn 1", want: ":1\r\n"},
		{body: "#!lua\nerror('x')", want: "-ERR user_script:2: x script: " + sha("#!lua\nerror('x')") + ", on @user_script:2.\r\n"},
		{body: "local function f() redis.call('nosuch') end\n\nf()", want: "-ERR Unknown Redis command called from script~"},
	}
	for _, c := range cases {
		want := c.want
		if strings.HasSuffix(want, "~") {
			want = strings.TrimSuffix(want, "~") + suffix(c.body, 1)
		}
		got := run(t, e, s, c.body, c.keys, c.argv)
		// gopher-lua words syntax errors its own way: the prefix is Redis's.
		if prefix, ok := strings.CutSuffix(want, "*"); ok && strings.HasPrefix(got, prefix) {
			continue
		}
		if got != want {
			t.Errorf("%s\n got %q\nwant %q", c.body, got, want)
		}
	}
}

// TestBudget: a script that never ends stops after the budget, with the
// same reply every time, even when it tries to catch the error, and the
// writes it made before stay.
func TestBudget(t *testing.T) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	for _, body := range []string{
		"redis.call('incr','n') while true do end",
		"redis.call('incr','n') while true do pcall(function() while true do end end) end",
		"redis.call('incr','n') local i = 0 while true do i = i + 1 if i % 1000 == 0 then redis.call('get','n') end end",
	} {
		sc, msg := Compile([]byte(body))
		if msg != "" {
			t.Fatal(msg)
		}
		var first string
		for i := range 2 {
			got := string(e.Run(sc, nil, nil, 0, 100_000, s.host()))
			want := "-ERR Script killed: it exceeded raftset's budget of 100000 Lua instructions script: " + sc.SHA + ", on @user_script:"
			if !strings.HasPrefix(got, want) {
				t.Fatalf("%s: got %q", body, got)
			}
			if i == 0 {
				first = got
			} else if got != first {
				t.Fatalf("%s: second run %q, first %q", body, got, first)
			}
		}
	}
	if s.m["n"] != "6" {
		t.Fatalf("n = %q: the writes before the budget ran out must stay", s.m["n"])
	}
	// The engine is usable after a script ran out.
	if got := run(t, e, s, "return 1", nil, nil); got != ":1\r\n" {
		t.Fatalf("after budget: %q", got)
	}
}

// TestNothingLeaks: what one script does to the environment does not reach
// the next one run on the same engine.
func TestNothingLeaks(t *testing.T) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	for _, body := range []string{
		"table.insert(string, 'x')",
		"table.insert(_G, 'x')",
		"KEYS[5] = 'x'",
		"math.randomseed(7) math.random()",
		"local t = {} return tostring(t)",
	} {
		run(t, e, s, body, nil, nil)
	}
	for body, want := range map[string]string{
		"return #KEYS":             ":0\r\n",
		"return rawget(string, 1)": "$-1\r\n",
		"return rawget(_G, 1)":     "$-1\r\n",
		"local n = 0 for _ in pairs(string) do n = n + 1 end return n": ":" + strconv.Itoa(countPairs(e, "string")) + "\r\n",
		"return tostring({})": "$17\r\ntable: 0x00000001\r\n",
	} {
		if got := run(t, e, s, body, nil, nil); got != want {
			t.Errorf("%s: got %q want %q", body, got, want)
		}
	}
	// Random numbers depend only on the seed of the run.
	sc, _ := Compile([]byte("return {math.random(1000000), math.random(1000000)}"))
	a := string(e.Run(sc, nil, nil, 42, DefaultBudget, s.host()))
	run(t, e, s, "math.random() math.random()", nil, nil)
	if b := string(e.Run(sc, nil, nil, 42, DefaultBudget, s.host())); a != b {
		t.Errorf("same seed, different numbers: %q then %q", a, b)
	}
	if c := string(New("7.2.4").Run(sc, nil, nil, 42, DefaultBudget, s.host())); a != c {
		t.Errorf("another engine, different numbers: %q then %q", a, c)
	}
}

func countPairs(e *Engine, lib string) int {
	n := 0
	e.shown(e.globals.RawGetString(lib).(*lua.LTable)).ForEach(func(_, _ lua.LValue) { n++ })
	return n
}

// TestSameOrderInEveryEngine: pairs over the libraries and _G goes in the
// same order in every engine (gopher-lua fills them from Go maps).
func TestSameOrderInEveryEngine(t *testing.T) {
	body := "local t = {} for _, lib in ipairs({_G, string, math, table, redis, cjson, bit}) do " +
		"for k in pairs(lib) do t[#t+1] = tostring(k) end end return t"
	first := ""
	for i := range 5 {
		e := New("7.2.4")
		got := run(t, e, &store{m: map[string]string{}}, body, nil, nil)
		e.Close()
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("engine %d iterates differently:\n%q\n%q", i, got, first)
		}
	}
}
