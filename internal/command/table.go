package command

import "strings"

// Flags say how a command is routed and described.
type Flags uint16

const (
	// Write commands change the keyspace: they go through the Raft log.
	Write Flags = 1 << iota
	// ReadOnly commands read the keyspace: they pass the read barrier.
	ReadOnly
	// Admin commands act on the node or cluster (snapshots, configuration).
	Admin
	// Conn commands act on the connection and never leave the front end.
	Conn
	// NoAuth commands are allowed before AUTH when requirepass is set.
	NoAuth
	// Fast commands run in O(1) or O(log N) (reported by COMMAND).
	Fast
	// NoMulti commands are refused inside MULTI (answered, not queued).
	NoMulti
	// Random commands have a nondeterministic reply (SRANDMEMBER, RANDOMKEY).
	Random
	// MovableKeys commands find their keys by parsing (SINTERCARD).
	MovableKeys
	// DenyOOM commands may grow memory (reported by COMMAND).
	DenyOOM
	// Internal commands are sent between raftset nodes (forwarding, read
	// index, node metadata); COMMAND does not list them.
	Internal
)

// Spec describes one command. Arity counts the name; negative means at
// least -Arity. FirstKey, LastKey and Step are Redis's key specification
// (LastKey -1 = the last argument).
type Spec struct {
	Name     string
	Arity    int
	Flags    Flags
	FirstKey int
	LastKey  int
	Step     int
	Group    string // COMMAND DOCS group: set, string, generic, ...
	Summary  string
	Since    string
	Subs     []*Spec // subcommands: Name is "parent|sub"
	// Args and KeySpecs are the command's syntax for COMMAND DOCS and
	// COMMAND INFO, set by the table entry's syntax line.
	Args     []*Arg
	KeySpecs []KeySpec
	// ID is the spec's dense index in its table (subcommands included), set
	// by Commands, so per-command statistics are a slice, not a map.
	ID int
	// DeprecatedSince and ReplacedBy are COMMAND DOCS's fields of a
	// deprecated command (GETSET, SUBSTR).
	DeprecatedSince, ReplacedBy string
}

// deprecated marks the spec as deprecated since a version, replaced by
// what Redis's COMMAND DOCS names.
func (s *Spec) deprecated(since, replacedBy string) *Spec {
	s.DeprecatedSince, s.ReplacedBy = since, replacedBy
	return s
}

// Has reports whether the spec has all of f.
func (s *Spec) Has(f Flags) bool { return s.Flags&f == f }

// CheckArity reports whether argc (the name included) suits the spec.
func (s *Spec) CheckArity(argc int) bool {
	if s.Arity >= 0 {
		return argc == s.Arity
	}
	return argc >= -s.Arity
}

// Keys returns the positions of the key arguments in argv.
func (s *Spec) Keys(argv [][]byte) []int {
	if s.FirstKey <= 0 {
		return nil
	}
	last := s.LastKey
	if last < 0 {
		last = len(argv) + last
	}
	var out []int
	for i := s.FirstKey; i <= last && i < len(argv); i += s.Step {
		out = append(out, i)
	}
	return out
}

// Sub returns the subcommand spec named by argv[1], or nil.
func (s *Spec) Sub(name string) *Spec {
	full := s.Name + "|" + strings.ToLower(name)
	for _, sub := range s.Subs {
		if sub.Name == full {
			return sub
		}
	}
	return nil
}

// Table is the set of commands raftset serves, by lower-case name.
type Table map[string]*Spec

// Lookup finds the spec for a command name in any case.
func (t Table) Lookup(name []byte) *Spec {
	s, _ := LookupFold(t, name)
	return s
}

// LookupFold looks up a command name in any case without allocating: names
// arrive as client bytes, mostly upper case, on every command.
func LookupFold[V any](m map[string]V, name []byte) (V, bool) {
	if v, ok := m[string(name)]; ok {
		return v, true
	}
	var buf [32]byte
	if len(name) > len(buf) {
		var zero V
		return zero, false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	v, ok := m[string(buf[:len(name)])]
	return v, ok
}

const (
	rw   = Write | DenyOOM
	ro   = ReadOnly
	fast = Fast
)

func spec(name string, arity int, flags Flags, first, last, step int, group, since, summary string, subs ...*Spec) *Spec {
	return &Spec{Name: name, Arity: arity, Flags: flags, FirstKey: first, LastKey: last, Step: step,
		Group: group, Since: since, Summary: summary, Subs: subs}
}

// Commands returns the command table. It is built on each call so that no
// package holds mutable global state; callers keep the result.
func Commands() Table {
	list := []*Spec{
		// Sets.
		spec("sadd", -3, rw|fast, 1, 1, 1, "set", "1.0.0", "Adds one or more members to a set.").
			syntax("key:key{RW,insert} member:string..."),
		spec("srem", -3, Write|fast, 1, 1, 1, "set", "1.0.0", "Removes one or more members from a set.").
			syntax("key:key{RW,delete} member:string..."),
		spec("scard", 2, ro|fast, 1, 1, 1, "set", "1.0.0", "Returns the number of members in a set.").
			syntax("key:key{RO}"),
		spec("sismember", 3, ro|fast, 1, 1, 1, "set", "1.0.0", "Determines whether a member belongs to a set.").
			syntax("key:key{RO} member:string"),
		spec("smismember", -3, ro|fast, 1, 1, 1, "set", "6.2.0", "Determines whether multiple members belong to a set.").
			syntax("key:key{RO,access} member:string..."),
		spec("smembers", 2, ro, 1, 1, 1, "set", "1.0.0", "Returns all members of a set.").
			syntax("key:key{RO,access}"),
		spec("spop", -2, Write|fast|Random, 1, 1, 1, "set", "1.0.0", "Returns one or more random members from a set after removing them.").
			syntax("key:key{RW,access,delete} [count:integer]@3.2.0"),
		spec("srandmember", -2, ro|Random, 1, 1, 1, "set", "1.0.0", "Get one or multiple random members from a set.").
			syntax("key:key{RO,access} [count:integer]@2.6.0"),
		spec("smove", 4, Write|fast, 1, 2, 1, "set", "1.0.0", "Moves a member from one set to another.").
			syntax("source:key{RW,access,delete} destination:key{RW,insert} member:string"),
		spec("sinter", -2, ro, 1, -1, 1, "set", "1.0.0", "Returns the intersect of multiple sets.").
			syntax("key:key{RO,access}..."),
		spec("sintercard", -3, ro|MovableKeys, 0, 0, 0, "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.").
			syntax("numkeys:integer key:key{RO,access}... [LIMIT limit:integer]"),
		spec("sinterstore", -3, rw, 1, -1, 1, "set", "1.0.0", "Stores the intersect of multiple sets in a key.").
			syntax("destination:key{RW,update} key:key{RO,access}..."),
		spec("sunion", -2, ro, 1, -1, 1, "set", "1.0.0", "Returns the union of multiple sets.").
			syntax("key:key{RO,access}..."),
		spec("sunionstore", -3, rw, 1, -1, 1, "set", "1.0.0", "Stores the union of multiple sets in a key.").
			syntax("destination:key{OW,update} key:key{RO,access}..."),
		spec("sdiff", -2, ro, 1, -1, 1, "set", "1.0.0", "Returns the difference of multiple sets.").
			syntax("key:key{RO,access}..."),
		spec("sdiffstore", -3, rw, 1, -1, 1, "set", "1.0.0", "Stores the difference of multiple sets in a key.").
			syntax("destination:key{OW,update} key:key{RO,access}..."),
		spec("sscan", -3, ro|Random, 1, 1, 1, "set", "2.8.0", "Iterates over members of a set.").
			syntax("key:key{RO,access} cursor:integer [MATCH pattern:pattern] [COUNT count:integer]"),
		// Keys.
		spec("del", -2, Write, 1, -1, 1, "generic", "1.0.0", "Deletes one or more keys.").
			syntax("key:key{RM,delete}..."),
		spec("unlink", -2, Write|fast, 1, -1, 1, "generic", "4.0.0", "Asynchronously deletes one or more keys.").
			syntax("key:key{RM,delete}..."),
		spec("exists", -2, ro|fast, 1, -1, 1, "generic", "1.0.0", "Determines whether one or more keys exist.").
			syntax("key:key{RO}..."),
		spec("type", 2, ro|fast, 1, 1, 1, "generic", "1.0.0", "Determines the type of value stored at a key.").
			syntax("key:key{RO}"),
		spec("rename", 3, Write, 1, 2, 1, "generic", "1.0.0", "Renames a key and overwrites the destination.").
			syntax("key:key{RW,access,delete} newkey:key{OW,update}"),
		spec("renamenx", 3, Write|fast, 1, 2, 1, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.").
			syntax("key:key{RW,access,delete} newkey:key{OW,insert}"),
		spec("keys", 2, ro, 0, 0, 0, "generic", "1.0.0", "Returns all key names that match a pattern.").
			syntax("pattern:pattern"),
		spec("scan", -2, ro|Random, 0, 0, 0, "generic", "2.8.0", "Iterates over the key names in the database.").
			syntax("cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [TYPE type:string]@6.0.0"),
		spec("touch", -2, ro|fast, 1, -1, 1, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.").
			syntax("key:key{RO}..."),
		spec("randomkey", 1, ro|Random, 0, 0, 0, "generic", "1.0.0", "Returns a random key name from the database."),
		spec("object", -2, 0, 0, 0, 0, "generic", "2.2.3", "A container for object introspection commands.",
			spec("object|encoding", 3, ro, 2, 2, 1, "generic", "2.2.3", "Returns the internal encoding of a Redis object.").
				syntax("key:key{RO}"),
			spec("object|freq", 3, ro, 2, 2, 1, "generic", "4.0.0", "Returns the logarithmic access frequency counter of a Redis object.").
				syntax("key:key{RO}"),
			spec("object|idletime", 3, ro, 2, 2, 1, "generic", "2.2.3", "Returns the time since the last access to a Redis object.").
				syntax("key:key{RO}"),
			spec("object|refcount", 3, ro, 2, 2, 1, "generic", "2.2.3", "Returns the reference count of a value of a key.").
				syntax("key:key{RO}"),
			spec("object|help", 2, ro, 0, 0, 0, "generic", "6.2.0", "Returns helpful text about the different subcommands.")),
		spec("memory", -2, 0, 0, 0, 0, "server", "4.0.0", "A container for memory diagnostics commands.",
			spec("memory|usage", -3, ro, 2, 2, 1, "server", "4.0.0", "Estimates the memory usage of a key.").
				syntax("key:key{RO} [SAMPLES count:integer]"),
			spec("memory|help", 2, ro, 0, 0, 0, "server", "4.0.0", "Returns helpful text about the different subcommands.")),
		spec("dbsize", 1, ro|fast, 0, 0, 0, "server", "1.0.0", "Returns the number of keys in the database."),
		spec("flushall", -1, Write, 0, 0, 0, "server", "1.0.0", "Removes all keys from all databases.").
			syntax("[async: ASYNC@4.0.0 | SYNC@6.2.0]"),
		spec("flushdb", -1, Write, 0, 0, 0, "server", "1.0.0", "Remove all keys from the current database.").
			syntax("[async: ASYNC@4.0.0 | SYNC@6.2.0]"),
		// Expiry.
		spec("expire", -3, Write|fast, 1, 1, 1, "generic", "1.0.0", "Sets the expiration time of a key in seconds.").
			syntax("key:key{RW,update} seconds:integer [condition: NX | XX | GT | LT]@7.0.0"),
		spec("pexpire", -3, Write|fast, 1, 1, 1, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.").
			syntax("key:key{RW,update} milliseconds:integer [condition: NX | XX | GT | LT]@7.0.0"),
		spec("expireat", -3, Write|fast, 1, 1, 1, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.").
			syntax("key:key{RW,update} unix-time-seconds:unix-time [condition: NX | XX | GT | LT]@7.0.0"),
		spec("pexpireat", -3, Write|fast, 1, 1, 1, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.").
			syntax("key:key{RW,update} unix-time-milliseconds:unix-time [condition: NX | XX | GT | LT]@7.0.0"),
		spec("ttl", 2, ro|fast, 1, 1, 1, "generic", "1.0.0", "Returns the expiration time in seconds of a key.").
			syntax("key:key{RO,access}"),
		spec("pttl", 2, ro|fast, 1, 1, 1, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.").
			syntax("key:key{RO,access}"),
		spec("expiretime", 2, ro|fast, 1, 1, 1, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.").
			syntax("key:key{RO,access}"),
		spec("pexpiretime", 2, ro|fast, 1, 1, 1, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.").
			syntax("key:key{RO,access}"),
		spec("persist", 2, Write|fast, 1, 1, 1, "generic", "2.2.0", "Removes the expiration time of a key.").
			syntax("key:key{RW,update}"),
		// Strings.
		spec("get", 2, ro|fast, 1, 1, 1, "string", "1.0.0", "Returns the string value of a key.").
			syntax("key:key{RO,access}"),
		spec("set", -3, rw, 1, 1, 1, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.").
			syntax("key:key{RW,access,update,variable_flags} value:string [condition: NX | XX]@2.6.12 [GET]@6.2.0 " +
				"[expiration: EX seconds:integer@2.6.12 | PX milliseconds:integer@2.6.12 | " +
				"EXAT unix-time-seconds:unix-time@6.2.0 | PXAT unix-time-milliseconds:unix-time@6.2.0 | KEEPTTL@6.0.0]"),
		spec("setex", 4, rw, 1, 1, 1, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.").
			syntax("key:key{OW,update} seconds:integer value:string"),
		spec("psetex", 4, rw, 1, 1, 1, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.").
			syntax("key:key{OW,update} milliseconds:integer value:string"),
		spec("setnx", 3, rw|fast, 1, 1, 1, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.").
			syntax("key:key{OW,insert} value:string"),
		spec("getdel", 2, Write|fast, 1, 1, 1, "string", "6.2.0", "Returns the string value of a key after deleting the key.").
			syntax("key:key{RW,access,delete}"),
		spec("getex", -2, Write|fast, 1, 1, 1, "string", "6.2.0", "Returns the string value of a key after setting its expiration time.").
			syntax("key:key{RW,access,update} [expiration: EX seconds:integer | PX milliseconds:integer | " +
				"EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | PERSIST]"),
		spec("mget", -2, ro|fast, 1, -1, 1, "string", "1.0.0", "Atomically returns the string values of one or more keys.").
			syntax("key:key{RO,access}..."),
		spec("mset", -3, rw, 1, -1, 2, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.").
			syntax("(key_value: key:key{OW,update} value:string)..."),
		spec("incr", 2, rw|fast, 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.").
			syntax("key:key{RW,access,update}"),
		spec("incrby", 3, rw|fast, 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.").
			syntax("key:key{RW,access,update} increment:integer"),
		spec("decr", 2, rw|fast, 1, 1, 1, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.").
			syntax("key:key{RW,access,update}"),
		spec("decrby", 3, rw|fast, 1, 1, 1, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.").
			syntax("key:key{RW,access,update} decrement:integer"),
		spec("strlen", 2, ro|fast, 1, 1, 1, "string", "2.2.0", "Returns the length of a string value.").
			syntax("key:key{RO}"),
		spec("append", 3, rw|fast, 1, 1, 1, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.").
			syntax("key:key{RW,insert} value:string"),
		spec("getrange", 4, ro, 1, 1, 1, "string", "2.4.0", "Returns a substring of the string stored at a key.").
			syntax("key:key{RO,access} start:integer end:integer"),
		spec("substr", 4, ro, 1, 1, 1, "string", "1.0.0", "Returns a substring from a string value.").
			syntax("key:key{RO,access} start:integer end:integer").deprecated("2.0.0", "`GETRANGE`"),
		spec("setrange", 4, rw, 1, 1, 1, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.").
			syntax("key:key{RW,update} offset:integer value:string"),
		spec("incrbyfloat", 3, rw|fast, 1, 1, 1, "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.").
			syntax("key:key{RW,access,update} increment:double"),
		spec("getset", 3, rw|fast, 1, 1, 1, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.").
			syntax("key:key{RW,access,update} value:string").deprecated("6.2.0", "`SET` with the `!GET` argument"),
		spec("msetnx", -3, rw, 1, -1, 2, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.").
			syntax("(key_value: key:key{OW,insert} value:string)..."),
		spec("lcs", -3, ro, 1, 2, 1, "string", "7.0.0", "Finds the longest common substring.").
			syntax("key1:key{RO,access} key2:key{=0} [LEN] [IDX] [MINMATCHLEN len:integer] [WITHMATCHLEN]"),
		// Keys (serialization, copy, sort).
		spec("copy", -3, rw, 1, 2, 1, "generic", "6.2.0", "Copies the value of a key to a new key.").
			syntax("source:key{RO,access} destination:key{OW,update} [DB destination-db:integer] [REPLACE]"),
		spec("dump", 2, ro|Random, 1, 1, 1, "generic", "2.6.0", "Returns a serialized representation of the value stored at a key.").
			syntax("key:key{RO,access}"),
		spec("restore", -4, rw, 1, 1, 1, "generic", "2.6.0", "Creates a key from the serialized representation of a value.").
			syntax("key:key{OW,update} ttl:integer serialized-value:string [REPLACE]@3.0.0 [ABSTTL]@5.0.0 " +
				"[IDLETIME seconds:integer]@5.0.0 [FREQ frequency:integer]@5.0.0"),
		spec("sort", -2, rw|MovableKeys, 1, 1, 1, "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.").
			syntax("key:key{RO,access} [BY pattern:pattern{?RO,access}] [LIMIT offset_count: offset:integer count:integer] " +
				"[GET pattern:pattern{=1}]...+ [order: ASC | DESC] [ALPHA:sorting] [STORE destination:key{?OW,update}]"),
		spec("sort_ro", -2, ro|MovableKeys, 1, 1, 1, "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.").
			syntax("key:key{RO,access} [BY pattern:pattern{?RO,access}] [LIMIT offset_count: offset:integer count:integer] " +
				"[GET pattern:pattern{=1}]...+ [order: ASC | DESC] [ALPHA:sorting]"),
		// Scripting: a script is one log entry (EVAL, EVALSHA) or one read
		// (the _RO forms, and EVAL of a no-writes script).
		spec("eval", -3, Write|MovableKeys, 0, 0, 0, "scripting", "2.6.0", "Executes a server-side Lua script.").
			syntax("script:string numkeys:integer [key:key{RW,access,update}...] [arg:string...]"),
		spec("evalsha", -3, Write|MovableKeys, 0, 0, 0, "scripting", "2.6.0", "Executes a server-side Lua script by SHA1 digest.").
			syntax("sha1:string numkeys:integer [key:key{RW,access,update}...] [arg:string...]"),
		spec("eval_ro", -3, ro|MovableKeys, 0, 0, 0, "scripting", "7.0.0", "Executes a read-only server-side Lua script.").
			syntax("script:string numkeys:integer [key:key{RO,access}...] [arg:string...]"),
		spec("evalsha_ro", -3, ro|MovableKeys, 0, 0, 0, "scripting", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.").
			syntax("sha1:string numkeys:integer [key:key{RO,access}...] [arg:string...]"),
		spec("script", -2, 0, 0, 0, 0, "scripting", "2.6.0", "A container for Lua scripts management commands.",
			spec("script|load", 3, Write, 0, 0, 0, "scripting", "2.6.0", "Loads a server-side Lua script to the script cache.").
				syntax("script:string"),
			spec("script|exists", -3, ro, 0, 0, 0, "scripting", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache.").
				syntax("sha1:string..."),
			spec("script|flush", -2, Write, 0, 0, 0, "scripting", "2.6.0", "Removes all server-side Lua scripts from the script cache.").
				syntax("[async: ASYNC | SYNC]@6.2.0"),
			spec("script|kill", 2, ro, 0, 0, 0, "scripting", "2.6.0", "Terminates a server-side Lua script during execution."),
			spec("script|help", 2, ro, 0, 0, 0, "scripting", "5.0.0", "Returns helpful text about the different subcommands.")),
		// Transactions.
		spec("multi", 1, Conn|fast|NoMulti, 0, 0, 0, "transactions", "1.2.0", "Starts a transaction."),
		spec("exec", 1, Conn|NoMulti, 0, 0, 0, "transactions", "1.2.0", "Executes all commands in a transaction."),
		spec("discard", 1, Conn|fast|NoMulti, 0, 0, 0, "transactions", "2.0.0", "Discards a transaction."),
		spec("watch", -2, Conn|fast|NoMulti, 1, -1, 1, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction.").
			syntax("key:key{RO}..."),
		spec("unwatch", 1, Conn|fast|NoMulti, 0, 0, 0, "transactions", "2.2.0", "Forgets about watched keys of a transaction."),
		// Connection.
		spec("ping", -1, Conn|fast, 0, 0, 0, "connection", "1.0.0", "Returns the server's liveliness response.").
			syntax("[message:string]"),
		spec("echo", 2, Conn|fast, 0, 0, 0, "connection", "1.0.0", "Returns the given string.").
			syntax("message:string"),
		spec("quit", -1, Conn|fast|NoAuth, 0, 0, 0, "connection", "1.0.0", "Closes the connection."),
		spec("select", 2, Conn|fast, 0, 0, 0, "connection", "1.0.0", "Changes the selected database.").
			syntax("index:integer"),
		spec("hello", -1, Conn|fast|NoAuth|NoMulti, 0, 0, 0, "connection", "6.0.0", "Handshakes with the Redis server.").
			syntax("[arguments: protover:integer [AUTH username_password: username:string password:string] [SETNAME clientname:string]]"),
		spec("auth", -2, Conn|fast|NoAuth|NoMulti, 0, 0, 0, "connection", "1.0.0", "Authenticates the connection.").
			syntax("[username:string]@6.0.0 password:string"),
		spec("reset", 1, Conn|fast|NoAuth, 0, 0, 0, "connection", "6.2.0", "Resets the connection."),
		spec("readonly", 1, Conn|fast, 0, 0, 0, "cluster", "3.0.0", "Enables stale reads on this connection."),
		spec("readwrite", 1, Conn|fast, 0, 0, 0, "cluster", "3.0.0", "Restores linearizable reads on this connection."),
		// CLUSTER: the front end answers KEYSLOT and the cluster-enabled
		// check, the node the rest (resp/cluster.go). Conn, not Admin: Redis
		// files them under @slow only.
		spec("asking", 1, Conn|fast, 0, 0, 0, "cluster", "3.0.0", "Signals that a cluster client is following an -ASK redirect."),
		spec("cluster", -2, Conn, 0, 0, 0, "cluster", "3.0.0", "A container for Redis Cluster commands.",
			spec("cluster|keyslot", 3, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the hash slot for a key.").
				syntax("key:string"),
			spec("cluster|myid", 2, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the ID of a node."),
			spec("cluster|info", 2, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns information about the state of a node."),
			spec("cluster|slots", 2, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the mapping of cluster slots to nodes.").
				deprecated("7.0.0", "`CLUSTER SHARDS`"),
			spec("cluster|shards", 2, Conn, 0, 0, 0, "cluster", "7.0.0", "Returns the mapping of cluster slots to shards."),
			spec("cluster|nodes", 2, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the cluster configuration for a node."),
			spec("cluster|countkeysinslot", 3, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the number of keys in a hash slot.").
				syntax("slot:integer"),
			spec("cluster|getkeysinslot", 4, Conn, 0, 0, 0, "cluster", "3.0.0", "Returns the key names in a hash slot.").
				syntax("slot:integer count:integer")),
		spec("client", -2, Conn, 0, 0, 0, "connection", "2.4.0", "A container for client connection commands.",
			spec("client|setname", 3, Conn|fast, 0, 0, 0, "connection", "2.6.9", "Sets the connection name.").
				syntax("connection-name:string"),
			spec("client|getname", 2, Conn|fast, 0, 0, 0, "connection", "2.6.9", "Returns the name of the connection."),
			spec("client|id", 2, Conn|fast, 0, 0, 0, "connection", "5.0.0", "Returns the unique client ID of the connection."),
			spec("client|info", 2, Conn, 0, 0, 0, "connection", "6.2.0", "Returns information about the connection."),
			spec("client|list", -2, Conn|Admin, 0, 0, 0, "connection", "2.4.0", "Lists open connections.").
				syntax("[TYPE normal_master_replica_pubsub: NORMAL | MASTER | REPLICA | PUBSUB]@5.0.0 "+
					"[ID id: client-id:integer...]@6.2.0"),
			spec("client|setinfo", 4, Conn|fast, 0, 0, 0, "connection", "7.2.0", "Sets information specific to the client or connection.").
				syntax("(attr: LIB-NAME libname:string | LIB-VER libver:string)"),
			spec("client|help", 2, Conn, 0, 0, 0, "connection", "5.0.0", "Returns helpful text about the different subcommands."),
			// Client-side caching, output control and other connections (resp/tracking.go, resp/monitor.go).
			spec("client|tracking", -3, Conn, 0, 0, 0, "connection", "6.0.0", "Controls server-assisted client-side caching for the connection.").
				syntax("(status: ON | OFF) [REDIRECT client-id:integer] [PREFIX prefix:string]...+ [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"),
			spec("client|caching", 3, Conn, 0, 0, 0, "connection", "6.0.0", "Instructs the server whether to track the keys in the next request.").
				syntax("(mode: YES | NO)"),
			spec("client|getredir", 2, Conn, 0, 0, 0, "connection", "6.0.0", "Returns the client ID to which the connection's tracking notifications are redirected."),
			spec("client|trackinginfo", 2, Conn, 0, 0, 0, "connection", "6.2.0", "Returns information about server-assisted client-side caching for the connection."),
			spec("client|kill", -3, Conn|Admin, 0, 0, 0, "connection", "2.4.0", "Terminates open connections.").
				syntax("(filter: ip:port:string~2.8.12 | (new-format: [ID client-id:integer]@2.8.12 | "+
					"[TYPE normal_master_slave_pubsub: NORMAL | MASTER@3.2.0 | SLAVE | REPLICA@5.0.0 | PUBSUB]@2.8.12 | "+
					"[USER username:string] | [ADDR ip:port:string] | [LADDR ip:port:string]@6.2.0 | [SKIPME yes/no:string])...)"),
			spec("client|pause", -3, Conn|Admin, 0, 0, 0, "connection", "2.9.50", "Suspends commands processing.").
				syntax("timeout:integer [mode: WRITE | ALL]@6.2.0"),
			spec("client|unpause", 2, Conn|Admin, 0, 0, 0, "connection", "6.2.0", "Resumes processing commands from paused clients."),
			spec("client|reply", 3, Conn, 0, 0, 0, "connection", "3.2.0", "Instructs the server whether to reply to commands.").
				syntax("(on_off_skip: ON | OFF | SKIP)"),
			spec("client|no-evict", 3, Conn|Admin, 0, 0, 0, "connection", "7.0.0", "Sets the client eviction mode of the connection.").
				syntax("(enabled: ON | OFF)"),
			spec("client|no-touch", 3, Conn, 0, 0, 0, "connection", "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.").
				syntax("(enabled: ON | OFF)")),
		spec("monitor", 1, Admin, 0, 0, 0, "server", "1.0.0", "Listens for all requests received by the server in real-time."),
		// Pub/Sub (node-local).
		spec("subscribe", -2, Conn|NoMulti, 0, 0, 0, "pubsub", "2.0.0", "Listens for messages published to channels.").
			syntax("channel:string..."),
		spec("unsubscribe", -1, Conn|NoMulti, 0, 0, 0, "pubsub", "2.0.0", "Stops listening to messages posted to channels.").
			syntax("[channel:string...]"),
		spec("psubscribe", -2, Conn|NoMulti, 0, 0, 0, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.").
			syntax("(pattern: pattern:pattern)..."),
		spec("punsubscribe", -1, Conn|NoMulti, 0, 0, 0, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.").
			syntax("[pattern:pattern...]"),
		spec("publish", 3, Conn|fast, 0, 0, 0, "pubsub", "2.0.0", "Posts a message to a channel.").
			syntax("channel:string message:string"),
		// Server.
		spec("time", 1, Conn|fast, 0, 0, 0, "server", "2.6.0", "Returns the server time."),
		spec("info", -1, Admin, 0, 0, 0, "server", "1.0.0", "Returns information and statistics about the server.").
			syntax("[section:string...]"),
		spec("config", -2, Admin, 0, 0, 0, "server", "2.0.0", "A container for server configuration commands.",
			spec("config|get", -3, Admin, 0, 0, 0, "server", "2.0.0", "Returns the effective values of configuration parameters.").
				syntax("(parameter: parameter:string)..."),
			spec("config|set", -4, Admin, 0, 0, 0, "server", "2.0.0", "Sets configuration parameters in-flight.").
				syntax("(parameter_value: parameter:string value:string)..."),
			spec("config|resetstat", 2, Admin, 0, 0, 0, "server", "2.0.0", "Resets the server's statistics."),
			spec("config|rewrite", 2, Admin, 0, 0, 0, "server", "2.8.0", "Persists the effective configuration to file."),
			spec("config|help", 2, Admin, 0, 0, 0, "server", "5.0.0", "Returns helpful text about the different subcommands.")),
		spec("command", -1, Conn, 0, 0, 0, "server", "2.8.13", "Returns detailed information about all commands.",
			spec("command|count", 2, Conn, 0, 0, 0, "server", "2.8.13", "Returns a count of commands."),
			spec("command|info", -2, Conn, 0, 0, 0, "server", "2.8.13", "Returns information about one, multiple or all commands.").
				syntax("[command-name:string...]"),
			spec("command|docs", -2, Conn, 0, 0, 0, "server", "7.0.0", "Returns documentary information about one, multiple or all commands.").
				syntax("[command-name:string...]"),
			spec("command|list", -2, Conn, 0, 0, 0, "server", "7.0.0", "Returns a list of command names.").
				syntax("[FILTERBY filterby: MODULE module-name:string | ACLCAT category:string | PATTERN pattern:pattern]"),
			spec("command|getkeys", -4, Conn, 0, 0, 0, "server", "2.8.13", "Extracts the key names from an arbitrary command."),
			spec("command|getkeysandflags", -4, Conn, 0, 0, 0, "server", "7.0.0", "Extracts the key names and access flags for an arbitrary command."),
			spec("command|help", 2, Conn, 0, 0, 0, "server", "5.0.0", "Returns helpful text about the different subcommands.")),
		spec("debug", -2, Admin, 0, 0, 0, "server", "1.0.0", "A container for debugging commands."),
		spec("slowlog", -2, Admin, 0, 0, 0, "server", "2.2.12", "A container for slow log commands.",
			spec("slowlog|get", -2, Admin, 0, 0, 0, "server", "2.2.12", "Returns the slow log's entries.").
				syntax("[count:integer]"),
			spec("slowlog|len", 2, Admin, 0, 0, 0, "server", "2.2.12", "Returns the number of entries in the slow log."),
			spec("slowlog|reset", 2, Admin, 0, 0, 0, "server", "2.2.12", "Clears all entries from the slow log."),
			spec("slowlog|help", 2, Admin, 0, 0, 0, "server", "6.2.0", "Show helpful text about the different subcommands")),
		spec("latency", -2, Admin, 0, 0, 0, "server", "2.8.13", "A container for latency diagnostics commands.",
			spec("latency|latest", 2, Admin, 0, 0, 0, "server", "2.8.13", "Returns the latest latency samples for all events."),
			spec("latency|history", 3, Admin, 0, 0, 0, "server", "2.8.13", "Returns timestamp-latency samples for an event.").
				syntax("event:string"),
			spec("latency|reset", -2, Admin, 0, 0, 0, "server", "2.8.13", "Resets the latency data for one or more events.").
				syntax("[event:string...]"),
			spec("latency|histogram", -2, Admin, 0, 0, 0, "server", "7.0.0", "Returns the cumulative distribution of latencies of a subset or all commands.").
				syntax("[command:string...]"),
			spec("latency|help", 2, Admin, 0, 0, 0, "server", "2.8.13", "Returns helpful text about the different subcommands.")),
		spec("save", 1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Synchronously saves the database(s) to disk."),
		spec("bgsave", -1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Asynchronously saves the database(s) to disk.").
			syntax("[SCHEDULE]@3.2.2"),
		spec("shutdown", -1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.").
			syntax("[nosave_save: NOSAVE | SAVE] [NOW]@7.0.0 [FORCE]@7.0.0 [ABORT]@7.0.0"),
		spec("lastsave", 1, Admin|fast, 0, 0, 0, "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
		spec("role", 1, Admin|fast, 0, 0, 0, "server", "2.8.12", "Returns the replication role."),
		spec("wait", 3, Admin, 0, 0, 0, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.").
			syntax("numreplicas:integer timeout:integer"),
		// ACL users: SETUSER, DELUSER and LOAD change the replicated users (Write: through the
		// log); the others are answered by the front end from the node's copy.
		spec("acl", -2, 0, 0, 0, 0, "server", "6.0.0", "A container for Access List Control commands.",
			spec("acl|cat", -2, Conn, 0, 0, 0, "server", "6.0.0", "Lists the ACL categories, or the commands inside a category.").
				syntax("[categoryname:string]"),
			spec("acl|deluser", -3, Write|Admin, 0, 0, 0, "server", "6.0.0", "Deletes ACL users, and terminates their connections.").
				syntax("username:string..."),
			spec("acl|dryrun", -4, Admin, 0, 0, 0, "server", "7.0.0", "Simulates the execution of a command by a user, without executing the command.").
				syntax("username:string command:string [arg:string...]"),
			spec("acl|genpass", -2, Conn, 0, 0, 0, "server", "6.0.0", "Generates a pseudorandom, secure password that can be used to identify ACL users.").
				syntax("[bits:integer]"),
			spec("acl|getuser", 3, Admin, 0, 0, 0, "server", "6.0.0", "Lists the ACL rules of a user.").
				syntax("username:string"),
			spec("acl|help", 2, Conn, 0, 0, 0, "server", "6.0.0", "Returns helpful text about the different subcommands."),
			spec("acl|list", 2, Admin, 0, 0, 0, "server", "6.0.0", "Dumps the effective rules in ACL file format."),
			spec("acl|load", 2, Write|Admin, 0, 0, 0, "server", "6.0.0", "Reloads the rules from the configured ACL file."),
			spec("acl|log", -2, Admin, 0, 0, 0, "server", "6.0.0", "Lists recent security events generated due to ACL rules.").
				syntax("[operation: count:integer | RESET]"),
			spec("acl|save", 2, Admin, 0, 0, 0, "server", "6.0.0", "Saves the effective ACL rules in the configured ACL file."),
			spec("acl|setuser", -3, Write|Admin, 0, 0, 0, "server", "6.0.0", "Creates and modifies an ACL user and its rules.").
				syntax("username:string [rule:string...]"),
			spec("acl|users", 2, Admin, 0, 0, 0, "server", "6.0.0", "Lists all ACL users."),
			spec("acl|whoami", 2, Conn, 0, 0, 0, "server", "6.0.0", "Returns the authenticated username of the current connection.")),
		// Replication: enough for redis-cli --rdb and raftset backup (resp/sync.go).
		spec("sync", 1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "An internal command used in replication."),
		spec("psync", -3, Admin|NoMulti, 0, 0, 0, "server", "2.8.0", "An internal command used in replication.").
			syntax("replicationid:string offset:integer"),
		spec("replconf", -1, Admin, 0, 0, 0, "server", "3.0.0", "An internal command used in replication."),
		// Cluster (raftset's own).
		spec("raft.join", -3, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Adds a node (id, Raft address, client address) as a non-voter, promoted once caught up.").
			syntax("node-id:string raft-address:string [client-address:string]"),
		spec("raft.remove", 2, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Removes a node from the cluster by id.").
			syntax("node-id:string"),
		spec("raft.transfer", -1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Transfers leadership to another voter (the given id, or any).").
			syntax("[node-id:string]"),
		spec("raft.info", 1, Admin, 0, 0, 0, "server", "1.0.0", "Returns the node's Raft state and the cluster's members."),
		spec("raft.restore", 2, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Replaces the cluster's state with an RDB file, on every member (Raft's user restore).").
			syntax("rdb:string"),
		spec("raft.snapshot", 1, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Takes a Raft snapshot on this node."),
		spec("raft.shard", -2, Admin|NoMulti, 0, 0, 0, "server", "1.0.0", "Runs a node command (RAFT.INFO, RAFT.TRANSFER, ...) on this process's replica of one shard; MOVESLOTS moves slots to another shard, BALANCE-LEADERS spreads the shards' leaderships, ADDSHARD adds a shard, ADDREPLICA and REMOVEREPLICA move a replica between nodes, ADDNODE records a new node, MAP shows the cluster map.").
			syntax("shard-id-or-subcommand:string [arg:string...]"),
		spec("sentinel", -2, Admin, 0, 0, 0, "sentinel", "2.8.4", "Answers Sentinel queries: the master is the Raft leader."),
		// Internal: between nodes only.
		spec("raftset.forward", -2, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: a follower's writes, run by the leader."),
		spec("raftset.readindex", 1, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: the leader's read index for a follower."),
		spec("raftset.node", 3, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: publishes a node's client address."),
		spec("raftset.promote", 3, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: a non-voter asks to become a voter, saying how far it applied."),
		spec("raftset.onleader", -2, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: a leader-only command relayed by a follower."),
		spec("raftset.auth", -2, Conn|NoMulti|Internal|fast, 0, 0, 0, "connection", "1.0.0", "Internal: authenticates a connection as a node of the cluster."),
		spec("raftset.shard", -3, Admin|NoMulti|Internal, 0, 0, 0, "server", "1.0.0", "Internal: another call, for one shard's replica on a process that hosts several."),
		spec("raftset.leader", 1, Admin|NoMulti|Internal|fast, 0, 0, 0, "server", "1.0.0", "Internal: the Raft leader this replica knows (id, client address, term)."),
		spec("raftset.applied", 1, Admin|NoMulti|Internal|fast, 0, 0, 0, "server", "1.0.0", "Internal: this node's applied index (WAIT)."),
		spec("raftset.clock", 2, Admin|NoMulti|Internal|fast, 0, 0, 0, "server", "1.0.0", "Internal: the leader's cluster time, handed to a leadership transfer's target."),
		spec("raftset.formats", 1, Admin|NoMulti|Internal|fast, 0, 0, 0, "server", "1.0.0", "Internal: the highest log-entry format this node reads (rolling upgrades)."),
	}
	t := make(Table, len(list))
	id := 0
	for _, s := range list {
		t[s.Name] = s
		s.ID = id
		id++
		for _, sub := range s.Subs {
			sub.ID = id
			id++
		}
	}
	return t
}

// MaxID returns one more than the largest spec ID in t.
func (t Table) MaxID() int {
	n := 0
	for _, s := range t {
		n = max(n, s.ID+1)
		for _, sub := range s.Subs {
			n = max(n, sub.ID+1)
		}
	}
	return n
}
