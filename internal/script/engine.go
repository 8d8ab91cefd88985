package script

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"raftset/internal/command"
)

// DefaultBudget is the number of Lua VM instructions a script may execute.
// It is a constant, not a setting, because every replica must stop a script
// at the same instruction: a script over budget fails with the same error on
// every node, after the same commands. Fifty million instructions take about
// 0.35 s on one core of the project's test machines (BenchmarkLoop), which
// bounds how long one entry holds the state machine; Redis's busy-script
// time is five seconds, after which it only starts answering -BUSY.
const DefaultBudget = 50_000_000

// chunkName is the name Redis 7 gives a script's chunk: error positions read
// "user_script:3:" and error replies "on @user_script:3.".
const chunkName = "user_script"

// Host is what a script runs against.
type Host struct {
	// Call runs one command (args[0] is its name, in any case) and returns
	// its complete RESP2 reply. It is where commands a script may not run are
	// refused, with Redis's error replies (see the Err* constants).
	Call func(args [][]byte) []byte
	// Log receives redis.log's lines (level 0-3: debug, verbose, notice,
	// warning); nil drops them.
	Log func(level int, msg string)
}

// The error replies a Host gives, as Redis 7 words them.
const (
	ErrUnknownCommand = "ERR Unknown Redis command called from script"
	ErrNotAllowed     = "ERR This Redis command is not allowed from script"
	ErrArity          = "ERR Wrong number of args calling Redis command from script"
	ErrWriteInRO      = "ERR Write commands are not allowed from read-only scripts."
	ErrNoScript       = "NOSCRIPT No matching script. Please use EVAL."
)

// Script is a compiled script. It is immutable and may be shared by engines
// running in different goroutines.
type Script struct {
	SHA   string // lower-case hex SHA1 of Body
	Body  []byte
	Flags command.ScriptFlags
	proto *lua.FunctionProto
}

// SHA1Hex is the lower-case hex SHA1 of body, the name EVALSHA uses.
func SHA1Hex(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// Compile parses body into a script. The error is the reply text Redis
// gives for a script that does not compile (or whose shebang is invalid).
func Compile(body []byte) (*Script, string) {
	flags, code, msg := command.ParseShebang(body)
	if msg != "" {
		return nil, msg
	}
	chunk, err := parse.Parse(strings.NewReader(string(code)), chunkName)
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + compileError(err, code)
	}
	proto, err := lua.Compile(chunk, chunkName)
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + compileError(err, code)
	}
	// The chunk is a vararg function; Lua 5.0's implicit "arg" table for it
	// would cost a table per run, and no script reads it.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	return &Script{SHA: SHA1Hex(body), Body: body, Flags: flags, proto: proto}, ""
}

// compileError words a parse error as Lua does ("user_script:1: msg near
// 'tok'"), one line.
func compileError(err error, code []byte) string {
	var pe *parse.Error
	if errors.As(err, &pe) {
		if pe.Pos.Line == parse.EOF {
			return fmt.Sprintf("%s:%d: %s near '<eof>'", chunkName, bytes.Count(code, []byte("\n"))+1, pe.Message)
		}
		return fmt.Sprintf("%s:%d: %s near '%s'", chunkName, pe.Pos.Line, pe.Message, pe.Token)
	}
	return strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n", " "))
}

// Engine is one Lua interpreter with Redis's environment. It runs one
// script at a time: callers keep one per goroutine (the state machine has
// one for Apply and a pool for reads). Nothing a script does outlives it:
// globals and libraries are read-only, and KEYS, ARGV, the random
// generator and the names tostring gives are reset for each run.
type Engine struct {
	L       *lua.LState
	version string // redis.REDIS_VERSION

	budget  budget
	resp    int // the script's protocol: redis.setresp's, 2 at the start
	host    *Host
	script  *Script
	rand    rand48
	names   map[lua.LValue]int
	globals *lua.LTable                 // the real globals behind _G's proxy
	real    map[*lua.LTable]*lua.LTable // read-only proxy → the table it shows
	errH    *lua.LFunction
	null    *lua.LUserData // cjson.null
	strMeta *lua.LTable    // proxy of the string metatable
}

// New returns an engine whose redis.REDIS_VERSION is version (x.y.z).
func New(version string) *Engine {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 200, RegistrySize: 1024 * 4})
	e := &Engine{L: L, version: version, names: map[lua.LValue]int{}, real: map[*lua.LTable]*lua.LTable{}}
	e.budget.closed = make(chan struct{})
	close(e.budget.closed)
	e.open()
	L.SetContext(&e.budget)
	return e
}

// Close releases the interpreter.
func (e *Engine) Close() { e.L.Close() }

// Run executes s with KEYS and ARGV, seeding math.random with seed, against
// host, for at most budget instructions, and returns the RESP2 reply: the
// script's value converted as Redis converts it, or an error reply. State
// changes made through host before an error stay, as in Redis.
func (e *Engine) Run(s *Script, keys, argv [][]byte, seed int32, budget int64, host *Host) []byte {
	L := e.L
	e.host, e.script, e.resp = host, s, 2
	e.budget.left, e.budget.limit, e.budget.over = budget, budget, false
	e.rand.seed(seed)
	clear(e.names)
	e.globals.RawSetString("KEYS", e.strings(keys))
	e.globals.RawSetString("ARGV", e.strings(argv))
	defer func() {
		// No script sees these: the next run sets its own.
		e.globals.RawSetString("KEYS", lua.LNil)
		e.globals.RawSetString("ARGV", lua.LNil)
		e.host, e.script = nil, nil
		e.resetProxies()
		L.SetTop(0)
	}()
	L.Push(L.NewFunctionFromProto(s.proto))
	if err := L.PCall(0, 1, e.errH); err != nil {
		return e.errorReply(err)
	}
	return e.toReply(nil, L.Get(-1), 0)
}

func (e *Engine) strings(list [][]byte) *lua.LTable {
	t := e.L.CreateTable(len(list), 0)
	for i, b := range list {
		t.RawSetInt(i+1, lua.LString(b))
	}
	return t
}

// errorReply turns the error a script ended with into Redis 7's reply:
// "<error> script: <sha>, on @user_script:<line>.".
func (e *Engine) errorReply(err error) []byte {
	var msg, source, line string
	if ae, ok := err.(*lua.ApiError); ok {
		if t, ok := ae.Object.(*lua.LTable); ok {
			if s, ok := t.RawGetString("err").(lua.LString); ok {
				msg = string(s)
			}
			source = lua.LVAsString(t.RawGetString("source"))
			if n, ok := t.RawGetString("line").(lua.LNumber); ok {
				line = strconv.Itoa(int(n))
			}
		} else {
			msg = "ERR " + e.tostring(ae.Object)
		}
	}
	if msg == "" {
		msg = "ERR " + err.Error()
	}
	if source == "" {
		source = "@" + chunkName
	}
	if line == "" {
		line = "0"
	}
	return appendError(nil, msg+" script: "+e.script.SHA+", on "+source+":"+line+".")
}

// errorHandler is the message handler of the script's call, as Redis 7's
// __redis__err__handler: it makes the error a table {err=...} (string
// errors get "ERR "), names the line that raised it, and replaces an error
// caused by the budget with the budget's own.
func (e *Engine) errorHandler(L *lua.LState) int {
	v := L.Get(1)
	var msg string
	if t, ok := v.(*lua.LTable); ok {
		if s, ok := t.RawGetString("err").(lua.LString); ok {
			msg = string(s)
		}
	}
	if msg == "" {
		msg = "ERR " + e.tostring(v)
	}
	if e.budget.over {
		msg = fmt.Sprintf("ERR Script killed: it exceeded raftset's budget of %d Lua instructions", e.budget.limit)
	}
	out := L.NewTable()
	out.RawSetString("err", lua.LString(msg))
	for level := 1; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.CurrentLine <= 0 {
			continue
		}
		out.RawSetString("source", lua.LString("@"+dbg.Source))
		out.RawSetString("line", lua.LNumber(dbg.CurrentLine))
		break
	}
	L.Push(out)
	return 1
}

// budget is the interpreter's context: gopher-lua asks for Done before
// every VM instruction, so counting those calls counts instructions, the
// same on every replica. Over budget, Done is closed and every following
// instruction raises, so a script cannot catch the error with pcall and go
// on. Err is only read once Done is closed.
type budget struct {
	left   int64
	limit  int64
	over   bool
	closed chan struct{}
}

var errBudget = errors.New("script over its instruction budget")

func (b *budget) Deadline() (time.Time, bool) { return time.Time{}, false }
func (b *budget) Err() error                  { return errBudget }
func (b *budget) Value(any) any               { return nil }
func (b *budget) Done() <-chan struct{} {
	b.left--
	if b.left < 0 {
		b.over = true
		return b.closed
	}
	return nil
}

var _ context.Context = (*budget)(nil)

// --- Lua → RESP ----------------------------------------------------------

// maxDepth bounds the nesting of a converted reply, as Lua's C stack bounds
// Redis's conversion.
const maxDepth = 1000

// toReply appends the reply of a script's value, as Redis converts it:
// strings are bulk strings, numbers integers (truncated), true is 1, false
// and nil the null bulk string (after setresp(3) booleans are RESP3's), a
// table with a string err field an error, one with ok a status, one with a
// RESP3 field that type (resp3.go), any other table an array up to its
// first nil.
func (e *Engine) toReply(dst []byte, v lua.LValue, depth int) []byte {
	switch v := v.(type) {
	case lua.LString:
		return appendBulk(dst, []byte(v))
	case lua.LNumber:
		return appendInt(dst, ':', luaInt(float64(v)))
	case lua.LBool:
		if e.resp == 3 {
			if v {
				return append(dst, "#t\r\n"...)
			}
			return append(dst, "#f\r\n"...)
		}
		if v {
			return append(dst, ":1\r\n"...)
		}
		return append(dst, "$-1\r\n"...)
	case *lua.LTable:
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return appendError(dst, string(s))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return append(append(append(dst, '+'), oneLine(string(s))...), "\r\n"...)
		}
		if depth >= maxDepth {
			return appendError(dst, "ERR reached lua stack limit")
		}
		if out, ok := e.resp3Table(dst, v, depth); ok {
			return out
		}
		n := 0
		for v.RawGetInt(n+1) != lua.LNil {
			n++
		}
		dst = appendInt(dst, '*', int64(n))
		for i := 1; i <= n; i++ {
			dst = e.toReply(dst, v.RawGetInt(i), depth+1)
		}
		return dst
	default:
		return append(dst, "$-1\r\n"...)
	}
}

// luaInt converts a Lua number to an integer as C's (long long) cast does
// on x86-64: truncation, and the minimum for NaN and out of range values,
// so that every platform answers the same.
func luaInt(f float64) int64 {
	if math.IsNaN(f) || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(f)
}

func appendBulk(dst, b []byte) []byte {
	dst = appendInt(dst, '$', int64(len(b)))
	return append(append(dst, b...), "\r\n"...)
}

func appendInt(dst []byte, prefix byte, n int64) []byte {
	dst = strconv.AppendInt(append(dst, prefix), n, 10)
	return append(dst, "\r\n"...)
}

func appendError(dst []byte, msg string) []byte {
	return append(append(append(dst, '-'), oneLine(msg)...), "\r\n"...)
}

// oneLine replaces CR and LF with spaces, as Redis does for status and
// error replies, which cannot contain them.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// --- RESP → Lua ----------------------------------------------------------

// fromRESP converts one RESP2 reply to the value redis.call returns:
// integers are numbers, bulk strings strings, the null bulk string and the
// null array false, arrays tables, a status {ok=...} and an error
// {err=...}. It returns the value and the rest of b.
func fromRESP(L *lua.LState, b []byte) (lua.LValue, []byte) {
	if len(b) < 3 {
		return lua.LFalse, nil
	}
	end := indexCRLF(b)
	if end < 0 {
		return lua.LFalse, nil
	}
	line, rest := b[1:end], b[end+2:]
	switch b[0] {
	case '+':
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(line))
		return t, rest
	case '-':
		t := L.CreateTable(0, 1)
		t.RawSetString("err", lua.LString(line))
		return t, rest
	case ':':
		n, _ := strconv.ParseInt(string(line), 10, 64)
		return lua.LNumber(n), rest
	case '$':
		n, _ := strconv.Atoi(string(line))
		if n < 0 || n+2 > len(rest) {
			return lua.LFalse, rest
		}
		return lua.LString(rest[:n]), rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(string(line))
		if n < 0 {
			return lua.LFalse, rest
		}
		t := L.CreateTable(n, 0)
		for i := 1; i <= n; i++ {
			var v lua.LValue
			v, rest = fromRESP(L, rest)
			t.RawSetInt(i, v)
		}
		return t, rest
	}
	return lua.LFalse, nil
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}

// --- numbers and names ---------------------------------------------------

// formatNumber formats n as Lua 5.1's tostring does ("%.14g").
func formatNumber(n float64) string { return formatG(n, 14) }

// formatArg formats a number argument of redis.call as Redis 7 does
// ("%.17g"): 0.1 becomes "0.10000000000000001".
func formatArg(n float64) string { return formatG(n, 17) }

func formatG(n float64, prec int) string {
	switch {
	case math.IsInf(n, 1):
		return "inf"
	case math.IsInf(n, -1):
		return "-inf"
	case math.IsNaN(n):
		if math.Signbit(n) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(n, 'g', prec, 64)
}

// tostring is Lua's tostring with deterministic names: a table, function
// or userdata is named by the order in which this run first named it, not
// by its address, which differs between replicas.
func (e *Engine) tostring(v lua.LValue) string {
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return formatNumber(float64(x))
	case *lua.LNilType, lua.LBool:
		return v.String()
	}
	if mt, ok := e.L.GetMetaField(v, "__tostring").(*lua.LFunction); ok {
		e.L.Push(mt)
		e.L.Push(v)
		e.L.Call(1, 1)
		r := e.L.Get(-1)
		e.L.Pop(1)
		return lua.LVAsString(r)
	}
	if v == e.null {
		return "userdata: (nil)"
	}
	id, ok := e.names[v]
	if !ok {
		id = len(e.names) + 1
		e.names[v] = id
	}
	return fmt.Sprintf("%s: 0x%08x", v.Type().String(), id)
}
