package fsm

import "raftset/internal/command"

// Internal commands: write ops that only raftset itself proposes. The front
// end forwards only names of the command table, and "config" there is an
// admin command that the node turns into "config set" entries itself.
const (
	// CmdExpire is "raftset.expire key [key ...]": the leader's active
	// expiry. Each key is deleted only if still expired at the entry's time.
	CmdExpire = "raftset.expire"
	// CmdConfig is "config set <param> <value> [...]" for the replicated
	// set-max-intset-entries, set-max-listpack-entries and
	// set-max-listpack-value.
	CmdConfig = "config"
)

// newCommandTable builds the dispatch table. Arity and the write flag come
// from command.Commands(), so the front end, the proposer and the state
// machine agree on them; internal commands declare their own. A command of
// the table flagged Write or ReadOnly needs an entry here, and an entry needs
// such a command: TestCommandTable checks both.
func newCommandTable() map[string]*cmdDef {
	specs := command.Commands()
	t := make(map[string]*cmdDef, 64)
	type prep = func([][]byte, int64) ([][]byte, string)
	add := func(name string, run func(*execCtx, [][]byte), prepare prep) {
		s := specs[name]
		if s == nil {
			panic("fsm: " + name + " is not in the command table")
		}
		t[name] = &cmdDef{name: name, arity: s.Arity, write: s.Has(command.Write), run: run, prepare: prepare,
			keys: keysBySpec(s)}
	}
	internal := func(name string, arity int, run func(*execCtx, [][]byte), prepare prep) {
		t[name] = &cmdDef{name: name, arity: arity, write: true, run: run, prepare: prepare}
	}

	// Sets.
	add("sadd", cmdSAdd, nil)
	add("srem", cmdSRem, nil)
	add("scard", cmdSCard, nil)
	add("sismember", cmdSIsMember, nil)
	add("smismember", cmdSMIsMember, nil)
	add("smembers", cmdSMembers, nil)
	add("spop", cmdSPop, prepareSPop)
	add("srandmember", cmdSRandMember, nil)
	add("smove", cmdSMove, nil)
	add("sinter", cmdSInter, nil)
	add("sintercard", cmdSInterCard, nil)
	add("sinterstore", cmdSInterStore, nil)
	add("sunion", cmdSUnion, nil)
	add("sunionstore", cmdSUnionStore, nil)
	add("sdiff", cmdSDiff, nil)
	add("sdiffstore", cmdSDiffStore, nil)
	add("sscan", cmdSScan, nil)
	// Keys.
	add("del", cmdDel, nil)
	add("unlink", cmdDel, nil)
	add("exists", cmdExists, nil)
	add("touch", cmdTouch, nil)
	add("type", cmdType, nil)
	add("rename", cmdRename, nil)
	add("renamenx", cmdRenameNX, nil)
	add("keys", cmdKeys, nil)
	add("scan", cmdScan, nil)
	add("randomkey", cmdRandomKey, nil)
	add("object", cmdObject, nil)
	add("memory", cmdMemory, nil)
	add("dbsize", cmdDBSize, nil)
	add("flushall", cmdFlush, prepareFlush)
	add("flushdb", cmdFlush, prepareFlush)
	// Expiry.
	add("expire", cmdExpire, prepareExpire)
	add("pexpire", cmdExpire, prepareExpire)
	add("expireat", cmdExpire, prepareExpire)
	add("pexpireat", cmdExpire, prepareExpire)
	add("ttl", cmdTTL, nil)
	add("pttl", cmdPTTL, nil)
	add("expiretime", cmdExpireTime, nil)
	add("pexpiretime", cmdPExpireTime, nil)
	add("persist", cmdPersist, nil)
	// Strings.
	add("get", cmdGet, nil)
	add("set", cmdSet, prepareSet)
	add("setex", cmdSetEx, prepareSetEx)
	add("psetex", cmdSetEx, prepareSetEx)
	add("setnx", cmdSetNX, nil)
	add("getdel", cmdGetDel, nil)
	add("getex", cmdGetEx, prepareGetEx)
	add("mget", cmdMGet, nil)
	add("mset", cmdMSet, prepareMSet)
	add("incr", cmdIncr, nil)
	add("decr", cmdDecr, nil)
	add("incrby", cmdIncrBy, checkedBy(parseIncrBy))
	add("decrby", cmdIncrBy, checkedBy(parseIncrBy))
	// Scripting (cmd_script.go).
	add("eval", cmdEval, prepareEval)
	add("evalsha", cmdEvalSHA, prepareEval)
	add("eval_ro", cmdEvalRO, nil)
	add("evalsha_ro", cmdEvalSHARO, nil)
	add("script", cmdScript, prepareScript)
	t["eval"].readOK = true
	add("strlen", cmdStrlen, nil)
	add("append", cmdAppend, nil)
	add("getrange", cmdGetRange, nil)
	add("substr", cmdGetRange, nil)
	add("setrange", cmdSetRange, checkedBy(parseSetRange))
	add("incrbyfloat", cmdIncrByFloat, nil)
	add("getset", cmdGetSet, nil)
	add("msetnx", cmdMSetNX, prepareMSetNX)
	add("lcs", cmdLCS, nil)
	// Copy, serialization, sorting.
	add("copy", cmdCopy, nil)
	add("dump", cmdDump, nil)
	add("restore", cmdRestore, nil)
	add("sort", cmdSort, nil)
	add("sort_ro", cmdSort, nil)
	t["sort"].keys = sortKeys
	// Server and connection commands the state machine answers: DEBUG
	// DIGEST(-VALUE) reads state; PING and ECHO may sit in a transaction.
	add("debug", cmdDebug, nil)
	add("ping", cmdPing, nil)
	add("echo", cmdEcho, nil)
	internal(CmdExpire, -2, cmdRaftsetExpire, nil)
	internal(CmdEvict, -3, cmdRaftsetEvict, nil)
	internal(CmdConfig, -4, cmdConfig, prepareConfig)
	// ACL SETUSER, DELUSER, LOAD (acl.go); Prepare checks them with the users.
	internal("acl", -2, cmdACL, nil)
	return t
}

// checkedBy is the prepare step of a command whose arguments only need the
// check its own parser makes when it runs: a refused entry is never
// proposed, and the entry carries the arguments unchanged.
func checkedBy[T any](parse func([][]byte) (T, string)) func([][]byte, int64) ([][]byte, string) {
	return func(args [][]byte, _ int64) ([][]byte, string) {
		if _, msg := parse(args); msg != "" {
			return nil, msg
		}
		return args, ""
	}
}
