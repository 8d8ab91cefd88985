package fsm

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"sync"

	"raftset/internal/command"
	"raftset/internal/script"
)

// Lua scripting (EVAL, EVALSHA, their _RO forms, SCRIPT). A script is one
// command of an entry: Apply runs it on every replica with the entry's
// clock and a random seed drawn from the entry, and its redis.call commands
// run against the same state inside the same Apply, so the script is atomic
// and every replica ends in the same state. A script over its instruction
// budget (script.DefaultBudget) fails with the same error on every replica,
// after the same commands; like Redis, nothing it did is rolled back. With
// the budget a script holds the state machine for a bounded time, so there
// is no -BUSY state and SCRIPT KILL always answers NOTBUSY.
//
// The script cache (sha → body) is replicated state: EVAL and SCRIPT LOAD
// add to it when applied, SCRIPT FLUSH empties it, and snapshots carry it
// (AuxScripts). Compiled scripts are node-local and derived from it.

// scriptVersion is what redis.REDIS_VERSION says: the Redis version
// raftset reports by default.
const scriptVersion = "7.2.0"

// scriptState holds the interpreters and compiled scripts of one FSM.
type scriptState struct {
	mu       sync.Mutex
	compiled map[string]*script.Script // by sha; node-local, derived
	apply    *script.Engine            // used only under f.mu held for writing
	reads    sync.Pool                 // *script.Engine for Read
}

// compile returns the compiled form of body, whose sha is sha.
func (s *scriptState) compile(sha string, body []byte) (*script.Script, string) {
	s.mu.Lock()
	sc := s.compiled[sha]
	s.mu.Unlock()
	if sc != nil {
		return sc, ""
	}
	sc, msg := script.Compile(bytes.Clone(body))
	if msg != "" {
		return nil, msg
	}
	s.mu.Lock()
	if s.compiled == nil {
		s.compiled = map[string]*script.Script{}
	}
	s.compiled[sha] = sc
	s.mu.Unlock()
	return sc, ""
}

func (s *scriptState) flushCompiled() {
	s.mu.Lock()
	s.compiled = nil
	s.mu.Unlock()
}

// engine returns an interpreter for c and a function that gives it back.
func (c *execCtx) engine() (*script.Engine, func()) {
	s := &c.f.scripts
	if c.applying {
		if s.apply == nil {
			s.apply = script.New(scriptVersion)
		}
		return s.apply, func() {}
	}
	e, _ := s.reads.Get().(*script.Engine)
	if e == nil {
		e = script.New(scriptVersion)
	}
	return e, func() { s.reads.Put(e) }
}

// noScript are the commands of the dispatch table a script may not call
// (Redis flags them noscript), besides EVAL and SCRIPT themselves.
var noScript = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true,
	"script": true, "debug": true}

const errROWriteFlag = "ERR Can not execute a script with write flag using *_ro command."

func cmdEval(c *execCtx, args [][]byte)    { c.eval(args, false, false) }
func cmdEvalSHA(c *execCtx, args [][]byte) { c.eval(args, true, false) }
func cmdEvalRO(c *execCtx, args [][]byte)  { c.eval(args, false, true) }
func cmdEvalSHARO(c *execCtx, args [][]byte) {
	c.eval(args, true, true)
}

// prepareEval checks numkeys before a script is proposed.
func prepareEval(args [][]byte, _ int64) ([][]byte, string) {
	if _, msg := evalNumKeys(args); msg != "" {
		return nil, msg
	}
	return args, ""
}

func evalNumKeys(args [][]byte) (int, string) {
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return 0, command.ErrNotInteger
	case n < 0:
		return 0, "ERR Number of keys can't be negative"
	case n > int64(len(args)-3):
		return 0, "ERR Number of keys can't be greater than number of args"
	}
	return int(n), ""
}

// eval runs EVAL (bySHA false) or EVALSHA, or their _RO forms (ro).
func (c *execCtx) eval(args [][]byte, bySHA, ro bool) {
	numKeys, msg := evalNumKeys(args)
	if msg != "" {
		c.err(msg)
		return
	}
	var sha string
	var body []byte
	if bySHA {
		sha = string(bytes.ToLower(args[1]))
		b, ok := c.ks.scripts[sha]
		if !ok {
			c.err(script.ErrNoScript)
			return
		}
		body = b
	} else {
		body = args[1]
		sha = script.SHA1Hex(body)
	}
	sc, msg := c.f.scripts.compile(sha, body)
	if msg != "" {
		c.err(msg)
		return
	}
	if ro && sc.Flags&command.ScriptShebang != 0 && sc.Flags&command.ScriptNoWrites == 0 {
		c.err(errROWriteFlag)
		return
	}
	// Redis caches the body of every script EVAL ran; only a replicated
	// apply may change the cache.
	if !bySHA && c.applying {
		if _, ok := c.ks.scripts[sha]; !ok {
			if c.ks.scripts == nil {
				c.ks.scripts = map[string][]byte{}
			}
			c.ks.scripts[sha] = bytes.Clone(body)
		}
	}
	readOnly := ro || c.readOnly || sc.Flags&command.ScriptNoWrites != 0
	eng, done := c.engine()
	defer done()
	host := &script.Host{
		Call: func(cargs [][]byte) []byte { return c.scriptCall(cargs, readOnly) },
		Log:  c.f.scriptLog,
	}
	seed := int32(c.rng().Uint64())
	out := eng.Run(sc, args[3:3+numKeys], args[3+numKeys:], seed, script.DefaultBudget, host)
	c.raw(out)
}

// scriptCall runs one redis.call of a script against the same state and
// returns its reply, refusing what Redis refuses to scripts.
func (c *execCtx) scriptCall(args [][]byte, readOnly bool) []byte {
	def := c.f.lookupCmd(args[0])
	if def == nil {
		if eqFold(args[0], "time") {
			return c.scriptTime()
		}
		if command.Commands().Lookup(args[0]) != nil {
			return command.Error(script.ErrNotAllowed)
		}
		return command.Error(script.ErrUnknownCommand)
	}
	if noScript[def.name] {
		return command.Error(script.ErrNotAllowed)
	}
	if !arityOK(def.arity, len(args)) {
		return command.Error(script.ErrArity)
	}
	if def.write && readOnly {
		return command.Error(script.ErrWriteInRO)
	}
	saved := c.out
	c.out = nil
	c.exec(args)
	reply := c.out
	c.out = saved
	return reply
}

// scriptTime answers TIME inside a script from the entry's clock: the same
// on every replica, frozen for the script's run as Redis freezes it.
func (c *execCtx) scriptTime() []byte {
	b := command.AppendArray(nil, 2)
	b = command.AppendBulkString(b, strconv.FormatInt(c.now/1000, 10))
	return command.AppendBulkString(b, strconv.FormatInt(c.now%1000*1000, 10))
}

func (f *FSM) scriptLog(level int, msg string) {
	switch level {
	case 0:
		f.log.Debug("script", "msg", msg)
	case 1:
		f.log.Trace("script", "msg", msg)
	case 2:
		f.log.Info("script", "msg", msg)
	default:
		f.log.Warn("script", "msg", msg)
	}
}

var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Prints this help.",
}

// prepareScript refuses a bad SCRIPT FLUSH option and a script that does
// not compile before they reach the log.
func prepareScript(args [][]byte, _ int64) ([][]byte, string) {
	switch {
	case eqFold(args[1], "flush"):
		if msg := checkScriptFlush(args); msg != "" {
			return nil, msg
		}
	case eqFold(args[1], "load") && len(args) == 3:
		if _, msg := script.Compile(args[2]); msg != "" {
			return nil, msg
		}
	}
	return args, ""
}

func checkScriptFlush(args [][]byte) string {
	if len(args) > 3 || (len(args) == 3 && !eqFold(args[2], "async") && !eqFold(args[2], "sync")) {
		return "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
	}
	return ""
}

func cmdScript(c *execCtx, args [][]byte) {
	sub := args[1]
	switch {
	case eqFold(sub, "load") && len(args) == 3:
		if c.readOnly {
			c.err(errWriteInRead)
			return
		}
		sha := script.SHA1Hex(args[2])
		if _, msg := c.f.scripts.compile(sha, args[2]); msg != "" {
			c.err(msg)
			return
		}
		if _, ok := c.ks.scripts[sha]; !ok {
			if c.ks.scripts == nil {
				c.ks.scripts = map[string][]byte{}
			}
			c.ks.scripts[sha] = bytes.Clone(args[2])
		}
		c.bulkStr(sha)
	case eqFold(sub, "exists") && len(args) >= 3:
		c.array(len(args) - 2)
		for _, sha := range args[2:] {
			_, ok := c.ks.scripts[string(bytes.ToLower(sha))]
			c.bool(ok)
		}
	case eqFold(sub, "flush") && len(args) >= 2:
		if c.readOnly {
			c.err(errWriteInRead)
			return
		}
		if msg := checkScriptFlush(args); msg != "" {
			c.err(msg)
			return
		}
		c.ks.scripts = nil
		c.f.scripts.flushCompiled()
		c.ok()
	case eqFold(sub, "kill") && len(args) == 2:
		c.err("NOTBUSY No scripts in execution right now.")
	case eqFold(sub, "help") && len(args) == 2:
		c.array(len(scriptHelp))
		for _, line := range scriptHelp {
			c.simple(line)
		}
	default:
		for _, name := range []string{"load", "exists", "flush", "kill", "help"} {
			if eqFold(sub, name) {
				c.err(command.ErrArity("script|" + name))
				return
			}
		}
		c.err("ERR unknown subcommand '" + string(sub) + "'. Try SCRIPT HELP.")
	}
}

// AuxScripts is the snapshot AUX field holding the script cache: each body
// as <uvarint length><bytes>, in SHA order so that replicas write the same
// bytes. Redis 7 keeps scripts out of its RDB files and ignores unknown AUX
// fields, so a raftset snapshot still loads into Redis.
const AuxScripts = "raftset-scripts"

func formatScripts(m map[string][]byte) string {
	shas := slices.Sorted(maps.Keys(m))
	var b []byte
	for _, sha := range shas {
		b = binary.AppendUvarint(b, uint64(len(m[sha])))
		b = append(b, m[sha]...)
	}
	return string(b)
}

func parseScripts(v string) (map[string][]byte, bool) {
	b := []byte(v)
	m := map[string][]byte{}
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		body := bytes.Clone(b[w : w+int(n)])
		m[script.SHA1Hex(body)] = body
		b = b[w+int(n):]
	}
	return m, true
}
