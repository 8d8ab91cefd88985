package cluster

import (
	"bytes"
	"strconv"
	"strings"

	"raftset/internal/command"
	"raftset/internal/respwire"
)

// The internal protocol: the calls nodes make to each other (DESIGN.md
// describes each). They travel as RESP commands on the client port, so that
// they ride whatever protects client connections; a connection may send them
// only after RAFTSET.AUTH (auth.go), and the front end hands them to
// Node.Internal, never to Admin.
//
// Every call has a typed request (encoded by its sender, parsed by its
// receiver) and ends in an outcome that the sender switches on. Only the
// edge facing a client turns an outcome into a -TRYAGAIN / -CLUSTERDOWN
// reply (the reply* functions below); nothing in between reads reply text
// back to learn what happened.

const (
	cmdForward   = "raftset.forward"
	cmdReadIndex = "raftset.readindex"
	cmdApplied   = "raftset.applied"
	cmdPromote   = "raftset.promote"
	cmdOnLeader  = "raftset.onleader"
	// cmdShard wraps another call for shard id's replica on a process that
	// hosts several (host.go): raftset.shard <id> <call...>. Shard 0's calls
	// go unwrapped, as a single-group node sends them.
	cmdShard = "raftset.shard"
	// cmdLeader asks a replica for the leader it knows: how a process learns
	// the leaders of shards it holds no replica of (host.go).
	cmdLeader = "raftset.leader"
	// cmdClock hands the leader's cluster time to a transfer's target.
	cmdClock = "raftset.clock"
)

// forwardWithIndex asks the leader to append its applied index to the
// replies of raftset.forward.
var forwardWithIndex = []byte("withindex")

// forwardReq is raftset.forward <entry> [withindex]: a follower's Write, its
// ops encoded as one command.Entry (MULTI/EXEC stays one op). The reply is an
// array of one reply per op, then (withIndex) the leader's applied index once
// they were answered.
type forwardReq struct {
	ops       []command.Op
	withIndex bool
}

func (r forwardReq) args() [][]byte {
	ent := command.Entry{Type: command.TypeBatch, Ops: r.ops}
	args := [][]byte{[]byte(cmdForward), ent.Encode(nil)}
	if r.withIndex {
		args = append(args, forwardWithIndex)
	}
	return args
}

// parseForward reads a raftset.forward request, or returns the error reply
// that refuses it.
func parseForward(args [][]byte) (forwardReq, []byte) {
	withIndex := len(args) == 3 && bytes.EqualFold(args[2], forwardWithIndex)
	if len(args) != 2 && !withIndex {
		return forwardReq{}, command.Error(command.ErrArity(cmdForward))
	}
	e, err := command.Decode(args[1])
	if err != nil {
		return forwardReq{}, command.Error("ERR " + cmdForward + ": " + err.Error())
	}
	return forwardReq{ops: e.Ops, withIndex: withIndex}, nil
}

// nodeAddrReq is raftset.node <id> <client-addr>: publish a node's client
// address (node metadata, meta.go). Leader-only.
type nodeAddrReq struct{ id, addr []byte }

func (r nodeAddrReq) args() [][]byte { return [][]byte{[]byte(CmdNode), r.id, r.addr} }

func parseNodeAddr(args [][]byte) (nodeAddrReq, []byte) {
	if len(args) != 3 {
		return nodeAddrReq{}, command.Error(command.ErrArity(CmdNode))
	}
	return nodeAddrReq{id: args[1], addr: args[2]}, nil
}

// promoteReq is raftset.promote <id> <applied-index>: a non-voter asks to
// become a voter, saying how far it applied (membership.go). Leader-only.
type promoteReq struct {
	id      []byte
	applied uint64
}

func (r promoteReq) args() [][]byte {
	return [][]byte{[]byte(cmdPromote), r.id, strconv.AppendUint(nil, r.applied, 10)}
}

func parsePromote(args [][]byte) (promoteReq, []byte) {
	if len(args) != 3 {
		return promoteReq{}, command.Error(command.ErrArity(cmdPromote))
	}
	applied, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil {
		return promoteReq{}, command.Error(command.ErrNotInteger)
	}
	return promoteReq{id: args[1], applied: applied}, nil
}

// onLeaderReq is raftset.onleader <cmd> [args...]: a leader-only command
// (RAFT.JOIN, RAFT.REMOVE, RAFT.TRANSFER, raftset.node, raftset.promote)
// relayed by a follower. The receiver runs it only if it leads, and never
// relays it again, so nodes with stale views of the leader cannot loop.
type onLeaderReq struct{ cmd [][]byte }

func (r onLeaderReq) args() [][]byte { return append([][]byte{[]byte(cmdOnLeader)}, r.cmd...) }

// clockReq is raftset.clock <unix-ns>: the leader's cluster time as it
// begins a leadership transfer; the receiver, which may lead next, counts
// on from no less (clock.go, handOver). It answers +OK.
type clockReq struct{ t int64 }

func (r clockReq) args() [][]byte {
	return [][]byte{[]byte(cmdClock), strconv.AppendInt(nil, r.t, 10)}
}

func parseClock(args [][]byte) (clockReq, []byte) {
	if len(args) != 2 {
		return clockReq{}, command.Error(command.ErrArity(cmdClock))
	}
	t, err := strconv.ParseInt(string(args[1]), 10, 64)
	if err != nil || t <= 0 {
		return clockReq{}, command.Error(command.ErrNotInteger)
	}
	return clockReq{t: t}, nil
}

// raftset.readindex and raftset.applied take no arguments and answer an
// integer: the index to wait for before a linearizable read (read.go), and
// the receiver's applied index (WAIT, wait.go).
var (
	readIndexArgs = [][]byte{[]byte(cmdReadIndex)}
	appliedArgs   = [][]byte{[]byte(cmdApplied)}
)

// outcomeKind is what the sender of a call (or the node's own proposal)
// learned about it.
type outcomeKind uint8

const (
	// applied: the receiver ran the call; outcome.reply is its answer.
	applied outcomeKind = iota
	// notLeader: not sent, because this node knows no leader's client
	// address; outcome.hint names the leader Raft knows, if any.
	notLeader
	// notApplied: certainly not done (not sent: dial or authentication
	// failed; or, for a proposal, never appended). Retrying is safe.
	notApplied
	// outcomeUnknown: sent (or proposed), but no answer came back; it may
	// or may not have been done.
	outcomeUnknown
	// refused: the receiver answered one error reply for the call as a
	// whole, before running it (arity, NOAUTH, not the leader any more);
	// outcome.reply is that reply, relayed as it is.
	refused
	// garbled: the answer is not of the call's shape. Treated as unknown.
	garbled
)

func (k outcomeKind) String() string {
	switch k {
	case applied:
		return "applied"
	case notLeader:
		return "not leader"
	case notApplied:
		return "not applied"
	case outcomeUnknown:
		return "outcome unknown"
	case refused:
		return "refused"
	case garbled:
		return "garbled"
	}
	return "outcome(" + strconv.Itoa(int(k)) + ")"
}

// outcome is the typed result of one internal call.
type outcome struct {
	kind  outcomeKind
	reply []byte     // applied, refused: the receiver's reply, wire bytes
	hint  leaderHint // notLeader
	err   error      // notApplied, outcomeUnknown, garbled: why, for logs
}

// Error describes an outcome that is not applied, for logs and wrapped
// errors.
func (o outcome) Error() string {
	switch {
	case o.kind == refused:
		return strings.TrimSpace(string(o.reply))
	case o.err != nil:
		return o.kind.String() + ": " + o.err.Error()
	}
	return o.kind.String()
}

// leaderHint is the leader as Raft knows it: Raft address and id, "" when
// there is none.
type leaderHint struct{ addr, id string }

// answered classifies a reply that came back: an error reply refuses the
// call as a whole, anything else is the call's answer (its shape is checked
// by the call's decoder).
func answered(reply []byte) outcome {
	if command.IsError(reply) {
		return outcome{kind: refused, reply: reply}
	}
	return outcome{kind: applied, reply: reply}
}

// decodeForward splits an applied raftset.forward answer into one reply per
// op and, when present, the leader's applied index (0 when it is not a
// number). A reply of the wrong shape turns the outcome into garbled.
func decodeForward(o outcome, nops int) (outcome, [][]byte, uint64) {
	if o.kind != applied {
		return o, nil, 0
	}
	parts, err := respwire.SplitArray(o.reply)
	if err != nil || len(parts) != nops+1 {
		return outcome{kind: garbled, err: errShape(cmdForward, o.reply)}, nil, 0
	}
	index, ok := parseIndex(parts[nops])
	if !ok {
		index = 0
	}
	return o, parts[:nops], index
}

// decodeIndex reads the integer answer of raftset.readindex or
// raftset.applied.
func decodeIndex(o outcome, name string) (outcome, uint64) {
	if o.kind != applied {
		return o, 0
	}
	v, ok := parseIndex(o.reply)
	if !ok {
		return outcome{kind: garbled, err: errShape(name, o.reply)}, 0
	}
	return o, v
}

// parseIndex parses an integer reply holding a log index.
func parseIndex(reply []byte) (uint64, bool) {
	if len(reply) < 4 || reply[0] != ':' || reply[len(reply)-2] != '\r' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(reply[1:len(reply)-2]), 10, 64)
	return v, err == nil
}

type shapeError struct {
	call  string
	reply string
}

func (e shapeError) Error() string { return e.call + ": unexpected reply " + strconv.Quote(e.reply) }

func errShape(call string, reply []byte) error {
	const keep = 64 // enough to recognise the reply in a log line
	s := string(reply[:min(len(reply), keep)])
	return shapeError{call: call, reply: s}
}

// The client-facing edge: what a client hears when its command depended on
// an internal call that did not simply answer. TRYAGAIN means certainly not
// done (retry); CLUSTERDOWN means the outcome is unknown.

var (
	replyForwardUnreachable = constReply("TRYAGAIN the command was not forwarded: the leader's client address is not known yet or cannot be reached, retry")
	replyForwardUnknown     = constReply("CLUSTERDOWN the write's outcome is unknown: the connection to the leader failed after it was forwarded; it may or may not be applied")
	replyForwardReadFailed  = constReply("TRYAGAIN the read was not served: the leader could not be reached, retry")
	replyReadBehind         = constReply("TRYAGAIN the read was not served: this follower has not caught up with the leader's read index in time, retry")
)

// writeReply is the reply each op of a forwarded write gets when o is not
// applied.
func (o outcome) writeReply() []byte {
	switch o.kind {
	case notLeader:
		return notLeaderWrite(o.hint.addr, o.hint.id)
	case notApplied:
		return replyForwardUnreachable
	case outcomeUnknown:
		return replyForwardUnknown
	case refused:
		return o.reply // refused as a whole (e.g. NOAUTH): not proposed
	default:
		return replyUnknownInternal
	}
}

// readReply is the reply to a read whose read index o did not deliver.
func (o outcome) readReply() []byte {
	switch o.kind {
	case notLeader:
		return notLeaderRead(o.hint.addr, o.hint.id)
	case refused:
		return o.reply
	default:
		return replyForwardReadFailed
	}
}

// leaderCommandReply is the reply to a leader-only command (name as the
// client sent it) relayed with raftset.onleader: the leader's own reply
// when it answered.
func (o outcome) leaderCommandReply(name []byte) []byte {
	switch o.kind {
	case applied, refused:
		return o.reply
	case notLeader, notApplied:
		return constReply("TRYAGAIN " + strings.ToUpper(string(name)) + " was not run: no reachable leader, retry")
	default:
		return constReply("CLUSTERDOWN " + strings.ToUpper(string(name)) + ": the connection to the leader failed; it may or may not have been done")
	}
}
