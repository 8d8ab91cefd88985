package command

import "strconv"

// Replies that many commands share.
var (
	OK        = []byte("+OK\r\n")
	Queued    = []byte("+QUEUED\r\n")
	Pong      = []byte("+PONG\r\n")
	NullBulk  = []byte("$-1\r\n")
	NullArray = []byte("*-1\r\n")
	EmptyArr  = []byte("*0\r\n")
	Zero      = []byte(":0\r\n")
	One       = []byte(":1\r\n")
)

// AppendInt appends an integer reply.
func AppendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendBulk appends a bulk string reply.
func AppendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString appends a bulk string reply.
func AppendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendBulkInt appends the decimal form of n as a bulk string.
func AppendBulkInt(dst []byte, n int64) []byte {
	var buf [20]byte
	return AppendBulk(dst, strconv.AppendInt(buf[:0], n, 10))
}

// AppendArray appends the header of an array of n elements.
func AppendArray(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendSimple appends a status reply such as +OK.
func AppendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendHelp appends the reply of a container command's HELP subcommand, as
// Redis renders it: a header line, then each line, all as status replies.
func AppendHelp(dst []byte, name string, lines []string) []byte {
	dst = AppendArray(dst, len(lines)+1)
	dst = AppendSimple(dst, name+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		dst = AppendSimple(dst, l)
	}
	return dst
}

// AppendError appends an error reply. msg is the full text after '-',
// including its code ("ERR syntax error", "WRONGTYPE ..."); newlines in msg
// are replaced by spaces, as Redis does, so the reply stays one line.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}

// Error returns an error reply as a new slice.
func Error(msg string) []byte { return AppendError(nil, msg) }

// IsError reports whether reply is an error reply.
func IsError(reply []byte) bool { return len(reply) > 0 && reply[0] == '-' }

// Error texts Redis 7.2 uses verbatim.
const (
	ErrSyntax      = "ERR syntax error"
	ErrWrongType   = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrNotInteger  = "ERR value is not an integer or out of range"
	ErrOutOfRange  = "ERR value is out of range, must be positive"
	ErrNoSuchKey   = "ERR no such key"
	ErrInvalidCur  = "ERR invalid cursor"
	ErrNotFloat    = "ERR value is not a valid float"
	ErrOverflow    = "ERR increment or decrement would overflow"
	ErrDBIndex     = "ERR DB index is out of range"
	ErrExecAbort   = "EXECABORT Transaction discarded because of previous errors."
	ErrNoAuth      = "NOAUTH Authentication required."
	ErrWrongPass   = "WRONGPASS invalid username-password pair or user is disabled."
	ErrTryAgain    = "TRYAGAIN the write was not proposed: no leader is known, retry"
	ErrClusterDown = "CLUSTERDOWN the cluster cannot commit writes right now"
)

// ErrUnknownCommand formats Redis's reply for an unknown command.
func ErrUnknownCommand(name string, args [][]byte) string {
	s := "ERR unknown command '" + name + "', with args beginning with: "
	for _, a := range args {
		s += "'" + string(a) + "' "
	}
	return s
}

// ErrArity formats Redis's wrong-arity reply; name is lower case, with
// "parent|sub" for subcommands.
func ErrArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}
