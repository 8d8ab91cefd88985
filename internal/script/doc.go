// Package script runs Redis's Lua scripts (EVAL, EVALSHA, their _RO forms)
// on gopher-lua, a Lua 5.1 interpreter, with Redis 7's environment: the
// redis library (call, pcall, error_reply, status_reply, sha1hex, log,
// setresp, ...), cjson, bit and struct, read-only globals and libraries, and the
// RESP↔Lua conversions.
//
// A script runs inside the state machine on every replica, so everything
// here is deterministic: math.random is Redis's rand48 seeded identically
// for each script, tostring of tables and functions names them by the order
// the script first printed them instead of by address, table iteration is
// gopher-lua's insertion order, and the bound on a script's running time is
// an instruction budget counted identically on every replica, never a clock.
// No I/O, OS or coroutine library is loaded.
//
// The package knows nothing of the keyspace: the caller hands a Host whose
// Call runs one command and returns its RESP2 reply.
package script
