package acl

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// RESP2 encoders: the replies are built here so that they can be compared
// byte for byte with Redis's, and the server writes them as they are.

func appendArray(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

func appendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

func appendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// appendError appends an error reply; text carries its code ("ERR ...",
// "NOPERM ...").
func appendError(dst []byte, text string) []byte {
	dst = append(dst, '-')
	dst = append(dst, text...)
	return append(dst, '\r', '\n')
}

func appendNull(dst []byte) []byte { return append(dst, "$-1\r\n"...) }

// AppendError appends err as an error reply: a *DeniedError or an AUTH
// error as it is, any other error with Redis's "ERR " code.
func AppendError(dst []byte, err error) []byte {
	text := err.Error()
	switch err.(type) {
	case *DeniedError:
		return appendError(dst, text)
	}
	if err == ErrWrongPass || err == ErrNoDefaultPassword || err == ErrAuthSyntax {
		return appendError(dst, text)
	}
	return appendError(dst, "ERR "+text)
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
		return appendError(dst, "ERR wrong number of arguments for 'acl' command")
	}
	sub := strings.ToLower(string(args[1]))
	arity, known := aclArity[sub]
	if !known {
		return appendError(dst, "ERR unknown subcommand '"+trunc128(string(args[1]))+"'. Try "+strings.ToUpper(string(args[0]))+" HELP.")
	}
	if (arity > 0 && len(args) != arity) || len(args) < -arity {
		return appendError(dst, "ERR wrong number of arguments for 'acl|"+sub+"' command")
	}
	switch {
	case sub == "setuser":
		if err := r.SetUser(string(args[2]), args[3:]); err != nil {
			return AppendError(dst, err)
		}
		return appendSimple(dst, "OK")
	case sub == "deluser":
		names := make([]string, len(args)-2)
		for i, a := range args[2:] {
			names[i] = string(a)
		}
		n, err := r.DelUser(names...)
		if err != nil {
			return AppendError(dst, err)
		}
		return appendInt(dst, int64(n))
	case sub == "getuser":
		u, ok := r.User(string(args[2]))
		if !ok {
			return appendNull(dst)
		}
		return AppendGetUser(dst, u)
	case sub == "list":
		return r.AppendList(dst)
	case sub == "users":
		names := r.Names()
		dst = appendArray(dst, len(names))
		for _, n := range names {
			dst = appendBulkString(dst, n)
		}
		return dst
	case sub == "whoami":
		return appendBulkString(dst, s.User)
	case sub == "load" || sub == "save":
		return appendError(dst, NoFileError)
	case sub == "cat" && len(args) == 2:
		dst = appendArray(dst, len(categoryNames))
		for _, c := range categoryNames {
			dst = appendBulkString(dst, c)
		}
		return dst
	case sub == "cat" && len(args) == 3:
		bit := categoryBit(string(args[2]))
		if bit == 0 {
			return appendError(dst, "ERR Unknown category '"+trunc128(string(args[2]))+"'")
		}
		names := r.t.inCategory(bit)
		dst = appendArray(dst, len(names))
		for _, n := range names {
			dst = appendBulkString(dst, n)
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
				return appendSimple(dst, "OK")
			}
			n, ok := parseLong(args[2])
			if !ok {
				return appendError(dst, "ERR value is not an integer or out of range")
			}
			count = int(max(0, min(n, 1<<30)))
		}
		if s.Log == nil {
			return appendArray(dst, 0)
		}
		return s.Log.AppendReply(dst, count)
	case sub == "dryrun":
		return r.appendDryRun(dst, args[2:], s.Resolve)
	case sub == "help":
		dst = appendArray(dst, len(helpLines)+3)
		dst = appendSimple(dst, strings.ToUpper(string(args[0]))+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
		for _, l := range helpLines {
			dst = appendSimple(dst, l)
		}
		dst = appendSimple(dst, "HELP")
		return appendSimple(dst, "    Prints this help.")
	}
	return appendError(dst, "ERR unknown subcommand or wrong number of arguments for '"+trunc128(string(args[1]))+"'. Try "+strings.ToUpper(string(args[0]))+" HELP.")
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
	dst = appendArray(dst, 12)
	dst = appendBulkString(dst, "flags")
	flags := u.flagNames()
	dst = appendArray(dst, len(flags))
	for _, f := range flags {
		dst = appendBulkString(dst, f)
	}
	dst = appendBulkString(dst, "passwords")
	dst = appendArray(dst, len(u.passwords))
	for _, p := range u.passwords {
		dst = appendBulkString(dst, p)
	}
	dst = appendBulkString(dst, "commands")
	dst = appendBulkString(dst, u.commandRules())
	dst = appendBulkString(dst, "keys")
	dst = appendBulkString(dst, u.keysField())
	dst = appendBulkString(dst, "channels")
	dst = appendBulkString(dst, u.channelsField())
	dst = appendBulkString(dst, "selectors")
	return appendArray(dst, 0)
}

// AppendList appends ACL LIST's reply: one "user <name> <rules>" line per
// user.
func (r *Registry) AppendList(dst []byte) []byte {
	lines := r.listLines()
	dst = appendArray(dst, len(lines))
	for _, l := range lines {
		dst = appendBulkString(dst, l)
	}
	return dst
}

func (r *Registry) listLines() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.sortedNamesLocked()
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = "user " + n + " " + r.users[n].Describe()
	}
	return lines
}

func (r *Registry) appendDryRun(dst []byte, args [][]byte, resolve Resolver) []byte {
	u, ok := r.User(string(args[0]))
	if !ok {
		return appendError(dst, "ERR User '"+string(args[0])+"' not found")
	}
	if resolve == nil {
		return appendError(dst, "ERR Command '"+string(args[1])+"' not found")
	}
	cmd, sub, keys, err := resolve(args[1:])
	if err != nil {
		return appendError(dst, err.Error())
	}
	if err := r.checkUser(u, cmd, sub, keys); err != nil {
		if d, ok := err.(*DeniedError); ok {
			return appendBulkString(dst, d.Verbose())
		}
		return AppendError(dst, err)
	}
	return appendSimple(dst, "OK")
}

const genPassMaxBits = 4096

func appendGenPass(dst []byte, args [][]byte) []byte {
	bits := int64(256)
	if len(args) == 3 {
		n, ok := parseLong(args[2])
		if !ok {
			return appendError(dst, "ERR value is not an integer or out of range")
		}
		bits = n
	}
	if bits <= 0 || bits > genPassMaxBits {
		return appendError(dst, "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	if _, err := rand.Read(buf); err != nil {
		return appendError(dst, "ERR cannot read random bytes: "+err.Error())
	}
	return appendBulkString(dst, hex.EncodeToString(buf)[:chars])
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
