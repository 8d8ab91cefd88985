// Package acl holds raftset's ACL users with Redis 7's semantics: the rules
// of ACL SETUSER, the checks behind -NOPERM, the replies of the ACL
// command, AUTH, the ACL log, ACL files, and a deterministic binary form of
// the whole user set.
//
// The package is pure: no network, no Raft, no RESP parsing. The server
// wires it in three places:
//
//   - Replication. ACL SETUSER, ACL DELUSER and ACL LOAD change the users
//     (Writes says which lines do); they go through the Raft log and every
//     node applies them with Registry.Exec (or SetUser, DelUser, LoadFile)
//     in log order. The result depends only on the command and the users
//     before it, so all nodes end with the same users. CheckSetUser lets the
//     proposer refuse a bad SETUSER before it reaches the log.
//   - Snapshots. Marshal writes the user set (the same users always give
//     the same bytes) and Unmarshal reads it back, all or nothing.
//   - requirepass. SetRequirePass is a node-local overlay on the default
//     user's passwords, never marshaled, that stands until the replicated
//     users set those passwords themselves (then it is ignored).
//   - Checks. Before running a command the server calls Check with the
//     connection's user, the command, its first argument and the keys and
//     channels it names; a *DeniedError's text is the reply, and its Event
//     goes to the node's Log.
//
// The package does not own the command table: the server passes a Commands
// (names and ACL categories) and a Matcher (Redis's glob rules, the same as
// KEYS). Rules and replies follow Redis 7.2 where Redis 7.0 and 7.2 differ:
//
//   - A user's command rules are kept verbatim, as 7.2 keeps them, so ACL
//     GETUSER and ACL LIST show "+@all -keys" as given. Redis 7.0 rebuilt
//     them from a bitmap, picking categories by best fit and listing single
//     commands in hash-table order, which differs between processes.
//   - -NOPERM texts are 7.2's: "User u has no permissions to run the 'get'
//     command", "No permissions to access a key", "No permissions to access
//     a channel"; ACL DRYRUN names the key or channel. ACL LOG entries have
//     7.2's ten fields (entry-id, timestamp-created, timestamp-last-updated).
//   - A user created without sanitize-payload rules shows no such flag, as
//     in 7.0 (newer Redis creates every user with sanitize-payload set);
//     raftset has no RESTORE, so the flag only round-trips.
//
// Not supported: selectors ("(...)" rules are refused with "Selectors are
// not supported"). Refused where Redis accepts something it cannot describe
// back: a bare "%" key rule, and a +cmd|first-arg with spaces. ACL GENPASS
// is random, as in Redis: run it locally, never through the log.
package acl
