package acl

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"raftset/internal/command"
)

// AppendError appends err as an error reply: a *DeniedError or an AUTH
// error as it is, any other error with Redis's "ERR " code.
func AppendError(dst []byte, err error) []byte {
	text := err.Error()
	switch err.(type) {
	case *DeniedError:
		return command.AppendError(dst, text)
	}
	if err == ErrWrongPass || err == ErrNoDefaultPassword || err == ErrAuthSyntax {
		return command.AppendError(dst, text)
	}
	return command.AppendError(dst, "ERR "+text)
}

// Resolver tells ACL DRYRUN what a command line is: its name, its first
// argument (for Check), and the keys and channels it names. A non-nil error
// is the reply, e.g. "ERR Command 'x' not found" or Redis's arity error.
type Resolver func(args [][]byte) (cmd, sub string, keys []KeyAccess, err error)

// Session is what ACL commands need to know about the connection and node
// that runs them.
type Session struct {
	User    string   // the connection's user, for ACL WHOAMI
	Log     *Log     // this node's ACL log, for ACL LOG
	Resolve Resolver // for ACL DRYRUN; nil answers every command "not found"
}

// subcommand arities of ACL, as Redis's command table has them.
var aclArity = map[string]int{
	"cat": -2, "deluser": -3, "dryrun": -4, "genpass": -2, "getuser": 3, "help": 2,
	"list": 2, "load": 2, "log": -2, "save": 2, "setuser": -3, "users": 2, "whoami": 2,
}

// Writes reports whether an ACL command line changes the users, so it must
// go through the Raft log (SETUSER, DELUSER, LOAD) rather than run locally.
func Writes(args [][]byte) bool {
	if len(args) < 2 {
		return false
	}
	switch strings.ToLower(string(args[1])) {
	case "setuser", "deluser", "load":
		return true
	}
	return false
}

// NoFileError is Redis's reply to ACL LOAD and ACL SAVE without an aclfile.
const NoFileError = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

// Exec runs one ACL command line (args[0] is "ACL") and appends its RESP2
// reply. ACL LOAD and ACL SAVE answer NoFileError: a server with an aclfile
// handles them itself with LoadFile and FormatFile.
func (r *Registry) Exec(dst []byte, args [][]byte, s Session) []byte {
	if len(args) < 2 {
		return command.AppendError(dst, "ERR wrong number of arguments for 'acl' command")
	}
	sub := strings.ToLower(string(args[1]))
	arity, known := aclArity[sub]
	if !known {
		return command.AppendError(dst, "ERR unknown subcommand '"+trunc128(string(args[1]))+"'. Try "+strings.ToUpper(string(args[0]))+" HELP.")
	}
	if (arity > 0 && len(args) != arity) || len(args) < -arity {
		return command.AppendError(dst, "ERR wrong number of arguments for 'acl|"+sub+"' command")
	}
	switch {
	case sub == "setuser":
		if err := r.SetUser(string(args[2]), args[3:]); err != nil {
			return AppendError(dst, err)
		}
		return command.AppendSimple(dst, "OK")
	case sub == "deluser":
		names := make([]string, len(args)-2)
		for i, a := range args[2:] {
			names[i] = string(a)
		}
		n, err := r.DelUser(names...)
		if err != nil {
			return AppendError(dst, err)
		}
		return command.AppendInt(dst, int64(n))
	case sub == "getuser":
		u, ok := r.User(string(args[2]))
		if !ok {
			return append(dst, command.NullBulk...)
		}
		return AppendGetUser(dst, u)
	case sub == "list":
		return r.AppendList(dst)
	case sub == "users":
		names := r.Names()
		dst = command.AppendArray(dst, len(names))
		for _, n := range names {
			dst = command.AppendBulkString(dst, n)
		}
		return dst
	case sub == "whoami":
		return command.AppendBulkString(dst, s.User)
	case sub == "load" || sub == "save":
		return command.AppendError(dst, NoFileError)
	case sub == "cat" && len(args) == 2:
		dst = command.AppendArray(dst, len(categoryNames))
		for _, c := range categoryNames {
			dst = command.AppendBulkString(dst, c)
		}
		return dst
	case sub == "cat" && len(args) == 3:
		bit := categoryBit(string(args[2]))
		if bit == 0 {
			return command.AppendError(dst, "ERR Unknown category '"+trunc128(string(args[2]))+"'")
		}
		names := r.t.inCategory(bit)
		dst = command.AppendArray(dst, len(names))
		for _, n := range names {
			dst = command.AppendBulkString(dst, n)
		}
		return dst
	case sub == "genpass" && len(args) <= 3:
		return appendGenPass(dst, args)
	case sub == "log" && len(args) <= 3:
		count := 10
		if len(args) == 3 {
			if strings.EqualFold(string(args[2]), "reset") {
				if s.Log != nil {
					s.Log.Reset()
				}
				return command.AppendSimple(dst, "OK")
			}
			n, ok := parseLong(args[2])
			if !ok {
				return command.AppendError(dst, "ERR value is not an integer or out of range")
			}
			count = int(max(0, min(n, 1<<30)))
		}
		if s.Log == nil {
			return command.AppendArray(dst, 0)
		}
		return s.Log.AppendReply(dst, count)
	case sub == "dryrun":
		return r.appendDryRun(dst, args[2:], s.Resolve)
	case sub == "help":
		dst = command.AppendArray(dst, len(helpLines)+3)
		dst = command.AppendSimple(dst, strings.ToUpper(string(args[0]))+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
		for _, l := range helpLines {
			dst = command.AppendSimple(dst, l)
		}
		dst = command.AppendSimple(dst, "HELP")
		return command.AppendSimple(dst, "    Prints this help.")
	}
	return command.AppendError(dst, "ERR unknown subcommand or wrong number of arguments for '"+trunc128(string(args[1]))+"'. Try "+strings.ToUpper(string(args[0]))+" HELP.")
}

// parseLong is Redis's string2ll: an optional '-', no '+', no leading
// zeros, no spaces.
func parseLong(b []byte) (int64, bool) {
	s := string(b)
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (digits[0] == '0' && len(s) > 1) || digits[0] < '0' || digits[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func trunc128(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}

// AppendGetUser appends ACL GETUSER's reply for u.
func AppendGetUser(dst []byte, u *User) []byte {
	dst = command.AppendArray(dst, 12)
	dst = command.AppendBulkString(dst, "flags")
	flags := u.flagNames()
	dst = command.AppendArray(dst, len(flags))
	for _, f := range flags {
		dst = command.AppendBulkString(dst, f)
	}
	dst = command.AppendBulkString(dst, "passwords")
	dst = command.AppendArray(dst, len(u.passwords))
	for _, p := range u.passwords {
		dst = command.AppendBulkString(dst, p)
	}
	dst = command.AppendBulkString(dst, "commands")
	dst = command.AppendBulkString(dst, u.commandRules())
	dst = command.AppendBulkString(dst, "keys")
	dst = command.AppendBulkString(dst, u.keysField())
	dst = command.AppendBulkString(dst, "channels")
	dst = command.AppendBulkString(dst, u.channelsField())
	dst = command.AppendBulkString(dst, "selectors")
	return command.AppendArray(dst, 0)
}

// AppendList appends ACL LIST's reply: one "user <name> <rules>" line per
// user.
func (r *Registry) AppendList(dst []byte) []byte {
	lines := r.listLines()
	dst = command.AppendArray(dst, len(lines))
	for _, l := range lines {
		dst = command.AppendBulkString(dst, l)
	}
	return dst
}

func (r *Registry) listLines() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.sortedNamesLocked()
	lines := make([]string, len(names))
	for i, n := range names {
		u, _ := r.userLocked(n)
		lines[i] = "user " + n + " " + u.Describe()
	}
	return lines
}

func (r *Registry) appendDryRun(dst []byte, args [][]byte, resolve Resolver) []byte {
	u, ok := r.User(string(args[0]))
	if !ok {
		return command.AppendError(dst, "ERR User '"+string(args[0])+"' not found")
	}
	if resolve == nil {
		return command.AppendError(dst, "ERR Command '"+string(args[1])+"' not found")
	}
	cmd, sub, keys, err := resolve(args[1:])
	if err != nil {
		return command.AppendError(dst, err.Error())
	}
	if err := r.checkUser(u, cmd, sub, keys); err != nil {
		if d, ok := err.(*DeniedError); ok {
			return command.AppendBulkString(dst, d.Verbose())
		}
		return AppendError(dst, err)
	}
	return command.AppendSimple(dst, "OK")
}

const genPassMaxBits = 4096

func appendGenPass(dst []byte, args [][]byte) []byte {
	bits := int64(256)
	if len(args) == 3 {
		n, ok := parseLong(args[2])
		if !ok {
			return command.AppendError(dst, "ERR value is not an integer or out of range")
		}
		bits = n
	}
	if bits <= 0 || bits > genPassMaxBits {
		return command.AppendError(dst, "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	if _, err := rand.Read(buf); err != nil {
		return command.AppendError(dst, "ERR cannot read random bytes: "+err.Error())
	}
	return command.AppendBulkString(dst, hex.EncodeToString(buf)[:chars])
}

var helpLines = []string{
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GETUSER <username>",
	"    Get the user's details.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
}
