package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
	"raftset/internal/setenc"
	"raftset/internal/testutil"
)

// newTestFSM returns an FSM whose log shows if the test fails.
func newTestFSM(t testing.TB) *FSM {
	t.Helper()
	return New(Config{Logger: testutil.Logger(t, "fsm")})
}

func toArgs(args ...string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// applyEntry applies one entry of ops at the next log index, term 1.
func applyEntry(t testing.TB, f *FSM, now int64, ops ...command.Op) [][]byte {
	t.Helper()
	e := command.Entry{Type: command.TypeBatch, NowMs: now, Ops: ops}
	l := &raft.Log{Index: f.AppliedIndex() + 1, Term: 1, Type: raft.LogCommand, Data: e.Encode(nil)}
	res, ok := f.Apply(l).(*ApplyResult)
	if !ok || len(res.Replies) != len(ops) {
		t.Fatalf("Apply returned %#v, want %d replies", res, len(ops))
	}
	return res.Replies
}

// applyCmd applies one command, exactly as given (no Prepare), and returns
// its raw reply.
func applyCmd(t testing.TB, f *FSM, now int64, args ...string) string {
	t.Helper()
	return string(applyEntry(t, f, now, command.Cmd(toArgs(args...)...))[0])
}

// doCmd runs a command the way the cluster does: a write goes through
// Prepare (on the "leader" clock now) and then Apply; a read goes to Read.
func doCmd(t testing.TB, f *FSM, now int64, args ...string) string {
	t.Helper()
	argv := toArgs(args...)
	def := f.lookupCmd(argv[0])
	if def == nil || !def.write {
		return string(f.Read(argv, now, newTestSource(now), nil))
	}
	op := f.Prepare(argv, now)
	if op.Kind == command.OpReply {
		return string(op.Reply)
	}
	return string(applyEntry(t, f, now, op)[0])
}

func newTestSource(seed int64) setenc.Source { return &splitmix{uint64(seed)} }

type splitmix struct{ s uint64 }

func (r *splitmix) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// pretty renders a RESP2 reply the way redis-cli does, so golden files stay
// readable: (integer) 1, "bulk", (nil), (error) ERR ..., numbered arrays.
func pretty(reply string) string {
	var b strings.Builder
	rest := prettyValue(&b, reply, "")
	if rest != "" {
		fmt.Fprintf(&b, "\n(trailing bytes %q)", rest)
	}
	return b.String()
}

func prettyValue(b *strings.Builder, s, indent string) string {
	if s == "" {
		b.WriteString("(no reply)")
		return ""
	}
	line, rest, ok := strings.Cut(s, "\r\n")
	if !ok {
		fmt.Fprintf(b, "(malformed %q)", s)
		return ""
	}
	switch line[0] {
	case '+':
		b.WriteString(line[1:])
	case '-':
		b.WriteString("(error) " + line[1:])
	case ':':
		b.WriteString("(integer) " + line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			b.WriteString("(nil)")
			return rest
		}
		fmt.Fprintf(b, "%q", rest[:n])
		return rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(line[1:])
		switch {
		case n < 0:
			b.WriteString("(nil array)")
		case n == 0:
			b.WriteString("(empty array)")
		}
		for i := range n {
			if i > 0 {
				b.WriteString("\n" + indent)
			}
			p := fmt.Sprintf("%d) ", i+1)
			b.WriteString(p)
			rest = prettyValue(b, rest, indent+strings.Repeat(" ", len(p)))
		}
	default:
		fmt.Fprintf(b, "(malformed %q)", s)
		return ""
	}
	return rest
}

// dump describes the whole keyspace, logically expired keys included, in
// key order: type, encoding, deadline, version and content (set members
// in storage order, which is replicated state too).
func dump(f *FSM) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ks := f.ks
	type row struct{ key, text string }
	rows := make([]row, 0, ks.Len())
	for pos := range ks.Len() {
		var b strings.Builder
		key := string(ks.keys.At(pos))
		fmt.Fprintf(&b, "%q %s exp=%d ver=%d", key, encodingName(ks, pos), ks.exp(pos), ks.ver(pos))
		if !ks.isSet(pos) {
			fmt.Fprintf(&b, " %q", ks.str(pos))
		} else {
			s := ks.set(pos)
			if s.Encoding() != setenc.Hashtable {
				fmt.Fprintf(&b, " blob=%x", s.Blob())
			}
			s.Iterate(func(m []byte) bool { fmt.Fprintf(&b, " %q", m); return true })
		}
		rows = append(rows, row{key, b.String()})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.key, b.key) })
	var out bytes.Buffer
	fmt.Fprintf(&out, "now=%d lastDel=%d index=%d lim=%+v keys=%d\n", ks.now, ks.lastDel, ks.index, ks.lim, ks.Len())
	for _, r := range rows {
		out.WriteString(r.text + "\n")
	}
	return out.String()
}

// order lists the keys in dense order: replicated state, as it decides
// SCAN cursors and random picks.
func order(f *FSM) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, f.ks.Len())
	for i := range out {
		out[i] = string(f.ks.keys.At(i))
	}
	return out
}

// persist writes f's snapshot into a buffer.
func persist(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed {
		t.Fatal("Persist did not close the sink")
	}
	return sink.Bytes()
}

// restored returns a new FSM restored from data.
func restored(t testing.TB, data []byte) *FSM {
	t.Helper()
	g := newTestFSM(t)
	if err := g.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return g
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
