package acl

import (
	"strconv"
	"time"

	"raftset/internal/command"
)

// Event is one denial to record in the ACL log.
type Event struct {
	Reason     Reason
	Context    string // "toplevel", "multi", "lua"
	Object     string // the command, key or channel; for auth, the command ("AUTH" as typed)
	Username   string
	ClientInfo string
}

// AuthEvent is the ACL LOG entry of a failed AUTH (or HELLO ... AUTH):
// cmd is the command name as the client typed it.
func AuthEvent(username, cmd, context, clientInfo string) Event {
	return Event{Reason: ReasonAuth, Context: context, Object: cmd, Username: username, ClientInfo: clientInfo}
}

// LogEntry is one ACL LOG entry.
type LogEntry struct {
	Event
	Count   int64
	ID      int64
	Created time.Time
	Updated time.Time
}

// Redis's limits: a new event within a minute of a matching one among the
// 10 newest entries counts there instead of adding an entry.
const (
	logGroupWindow = 60 * time.Second
	logGroupScan   = 10
	// DefaultLogMaxLen is Redis's acllog-max-len.
	DefaultLogMaxLen = 128
)

// Log is Redis's ACL log: denials, newest first, grouped. Each node keeps
// its own (it is not replicated). Not safe for concurrent use: the server
// serialises access.
type Log struct {
	MaxLen  int
	now     func() time.Time
	entries []*LogEntry // newest first
	nextID  int64
}

// NewLog returns an empty log keeping at most maxLen entries (0:
// DefaultLogMaxLen), reading the time from now (nil: time.Now).
func NewLog(maxLen int, now func() time.Time) *Log {
	if maxLen <= 0 {
		maxLen = DefaultLogMaxLen
	}
	if now == nil {
		now = time.Now
	}
	return &Log{MaxLen: maxLen, now: now}
}

// Add records an event (Redis's addACLLogEntry).
func (l *Log) Add(ev Event) {
	now := l.now()
	for i := 0; i < len(l.entries) && i < logGroupScan; i++ {
		e := l.entries[i]
		d := now.Sub(e.Updated)
		if d < 0 {
			d = -d
		}
		if e.Reason == ev.Reason && e.Context == ev.Context && d <= logGroupWindow &&
			e.Object == ev.Object && e.Username == ev.Username {
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			e.ClientInfo = ev.ClientInfo
			e.Updated = now
			e.Count++
			return
		}
	}
	e := &LogEntry{Event: ev, Count: 1, ID: l.nextID, Created: now, Updated: now}
	l.nextID++
	l.entries = append(l.entries, nil)
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
	for len(l.entries) > l.MaxLen {
		l.entries[len(l.entries)-1] = nil
		l.entries = l.entries[:len(l.entries)-1]
	}
}

// Reset is ACL LOG RESET. Entry ids keep counting, as in Redis.
func (l *Log) Reset() { l.entries = nil }

// Entries returns up to count entries, newest first.
func (l *Log) Entries(count int) []LogEntry {
	if count > len(l.entries) || count < 0 {
		count = len(l.entries)
	}
	out := make([]LogEntry, count)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// AppendReply appends ACL LOG [count]'s RESP2 reply in Redis 7.2's form
// (ten fields per entry).
func (l *Log) AppendReply(dst []byte, count int) []byte {
	if count < 0 {
		count = 0
	}
	entries := l.Entries(count)
	now := l.now()
	dst = command.AppendArray(dst, len(entries))
	for _, e := range entries {
		dst = command.AppendArray(dst, 20)
		dst = command.AppendBulkString(dst, "count")
		dst = command.AppendInt(dst, e.Count)
		dst = command.AppendBulkString(dst, "reason")
		dst = command.AppendBulkString(dst, e.Reason.String())
		dst = command.AppendBulkString(dst, "context")
		dst = command.AppendBulkString(dst, e.Context)
		dst = command.AppendBulkString(dst, "object")
		dst = command.AppendBulkString(dst, e.Object)
		dst = command.AppendBulkString(dst, "username")
		dst = command.AppendBulkString(dst, e.Username)
		dst = command.AppendBulkString(dst, "age-seconds")
		age := float64(now.UnixMilli()-e.Updated.UnixMilli()) / 1000
		dst = command.AppendBulkString(dst, strconv.FormatFloat(age, 'g', -1, 64))
		dst = command.AppendBulkString(dst, "client-info")
		dst = command.AppendBulkString(dst, e.ClientInfo)
		dst = command.AppendBulkString(dst, "entry-id")
		dst = command.AppendInt(dst, e.ID)
		dst = command.AppendBulkString(dst, "timestamp-created")
		dst = command.AppendInt(dst, e.Created.UnixMilli())
		dst = command.AppendBulkString(dst, "timestamp-last-updated")
		dst = command.AppendInt(dst, e.Updated.UnixMilli())
	}
	return dst
}
