package cluster

import (
	"errors"
	"testing"

	"raftset/internal/command"
)

// A reply that came back is classified before its call decodes it: an error
// reply refuses the call as a whole, and a reply of the wrong shape is
// garbled (unknown), never an answer.
func TestDecodeOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   string
		nops    int
		want    outcomeKind
		replies []string
		index   uint64
	}{
		{"forward answered", "*3\r\n:1\r\n-ERR x\r\n:42\r\n", 2, applied, []string{":1\r\n", "-ERR x\r\n"}, 42},
		{"forward index not a number", "*2\r\n+OK\r\n$1\r\nx\r\n", 1, applied, []string{"+OK\r\n"}, 0},
		{"forward refused", "-NOAUTH Authentication required.\r\n", 1, refused, nil, 0},
		{"forward leader's TRYAGAIN", "-TRYAGAIN the write was not proposed\r\n", 1, refused, nil, 0},
		{"forward too few", "*1\r\n:1\r\n", 1, garbled, nil, 0},
		{"forward not an array", ":1\r\n", 1, garbled, nil, 0},
	} {
		o, replies, index := decodeForward(answered([]byte(tc.reply)), tc.nops)
		if o.kind != tc.want || index != tc.index || len(replies) != len(tc.replies) {
			t.Errorf("%s: %q -> %v %q %d; want %v %q %d", tc.name, tc.reply, o.kind, replies, index, tc.want, tc.replies, tc.index)
			continue
		}
		for i := range replies {
			if string(replies[i]) != tc.replies[i] {
				t.Errorf("%s: reply %d = %q, want %q", tc.name, i, replies[i], tc.replies[i])
			}
		}
		if o.kind == refused && string(o.reply) != tc.reply {
			t.Errorf("%s: refused reply %q, want it as sent", tc.name, o.reply)
		}
	}
	for _, tc := range []struct {
		reply string
		want  outcomeKind
		index uint64
	}{
		{":17\r\n", applied, 17},
		{":0\r\n", applied, 0},
		{":-1\r\n", garbled, 0},
		{"+OK\r\n", garbled, 0},
		{"$2\r\n17\r\n", garbled, 0},
		{"-ERR unknown command 'raftset.readindex', with args beginning with: \r\n", refused, 0},
	} {
		o, index := decodeIndex(answered([]byte(tc.reply)), cmdReadIndex)
		if o.kind != tc.want || index != tc.index {
			t.Errorf("index %q -> %v %d; want %v %d", tc.reply, o.kind, index, tc.want, tc.index)
		}
	}
	// Transport outcomes pass through the decoders unchanged.
	for _, k := range []outcomeKind{notLeader, notApplied, outcomeUnknown} {
		if o, _, _ := decodeForward(outcome{kind: k}, 1); o.kind != k {
			t.Errorf("decodeForward(%v) = %v", k, o.kind)
		}
		if o, _ := decodeIndex(outcome{kind: k}, cmdApplied); o.kind != k {
			t.Errorf("decodeIndex(%v) = %v", k, o.kind)
		}
	}
}

// Each outcome becomes one client-facing reply, byte for byte as before the
// protocol had types.
func TestOutcomeReplies(t *testing.T) {
	hint := leaderHint{addr: "10.0.0.1:7000", id: "n1"}
	noHint := leaderHint{}
	refusal := []byte("-NOAUTH Authentication required.\r\n")
	for _, tc := range []struct {
		o                outcome
		write, read, cmd string
	}{
		{
			outcome{kind: notLeader, hint: hint},
			"-TRYAGAIN the write was not proposed: this node is not the leader (the leader is n1 at 10.0.0.1:7000), retry\r\n",
			"-TRYAGAIN the read was not served: this node is not the leader (the leader is n1 at 10.0.0.1:7000), retry\r\n",
			"-TRYAGAIN RAFT.REMOVE was not run: no reachable leader, retry\r\n",
		},
		{
			outcome{kind: notLeader, hint: noHint},
			"-" + command.ErrTryAgain + "\r\n",
			"-TRYAGAIN the read was not served: no leader is known, retry\r\n",
			"-TRYAGAIN RAFT.REMOVE was not run: no reachable leader, retry\r\n",
		},
		{
			outcome{kind: notApplied, err: errors.New("dial")},
			"-TRYAGAIN the command was not forwarded: the leader's client address is not known yet or cannot be reached, retry\r\n",
			"-TRYAGAIN the read was not served: the leader could not be reached, retry\r\n",
			"-TRYAGAIN RAFT.REMOVE was not run: no reachable leader, retry\r\n",
		},
		{
			outcome{kind: outcomeUnknown, err: errors.New("EOF")},
			"-CLUSTERDOWN the write's outcome is unknown: the connection to the leader failed after it was forwarded; it may or may not be applied\r\n",
			"-TRYAGAIN the read was not served: the leader could not be reached, retry\r\n",
			"-CLUSTERDOWN RAFT.REMOVE: the connection to the leader failed; it may or may not have been done\r\n",
		},
		{
			outcome{kind: garbled, err: errors.New("shape")},
			"-CLUSTERDOWN the write's outcome is unknown: the state machine returned no reply for it\r\n",
			"-TRYAGAIN the read was not served: the leader could not be reached, retry\r\n",
			"-CLUSTERDOWN RAFT.REMOVE: the connection to the leader failed; it may or may not have been done\r\n",
		},
		{
			outcome{kind: refused, reply: refusal},
			string(refusal), string(refusal), string(refusal),
		},
	} {
		if got := string(tc.o.writeReply()); got != tc.write {
			t.Errorf("%v write reply %q, want %q", tc.o.kind, got, tc.write)
		}
		if got := string(tc.o.readReply()); got != tc.read {
			t.Errorf("%v read reply %q, want %q", tc.o.kind, got, tc.read)
		}
		if got := string(tc.o.leaderCommandReply([]byte("raft.remove"))); got != tc.cmd {
			t.Errorf("%v leader command reply %q, want %q", tc.o.kind, got, tc.cmd)
		}
	}
	if got := string(answered(command.OK).leaderCommandReply([]byte("raft.remove"))); got != "+OK\r\n" {
		t.Errorf("applied leader command reply %q", got)
	}
}

// Requests survive their own encoding.
func TestRequestRoundTrip(t *testing.T) {
	ops := []command.Op{command.Cmd([]byte("sadd"), []byte("s"), []byte("a"))}
	fr, bad := parseForward(forwardReq{ops: ops, withIndex: true}.args())
	if bad != nil || !fr.withIndex || len(fr.ops) != 1 || string(fr.ops[0].Args[2]) != "a" {
		t.Errorf("forward round trip: %+v %q", fr, bad)
	}
	if _, bad := parseForward([][]byte{[]byte(cmdForward), []byte("x"), []byte("other")}); string(bad) != "-ERR wrong number of arguments for 'raftset.forward' command\r\n" {
		t.Errorf("forward with a bad flag: %q", bad)
	}
	pr, bad := parsePromote(promoteReq{id: []byte("n2"), applied: 99}.args())
	if bad != nil || string(pr.id) != "n2" || pr.applied != 99 {
		t.Errorf("promote round trip: %+v %q", pr, bad)
	}
	if _, bad := parsePromote([][]byte{[]byte(cmdPromote), []byte("n2"), []byte("x")}); string(bad) != "-"+command.ErrNotInteger+"\r\n" {
		t.Errorf("promote with a bad index: %q", bad)
	}
	nr, bad := parseNodeAddr(nodeAddrReq{id: []byte("n3"), addr: []byte("h:1")}.args())
	if bad != nil || string(nr.id) != "n3" || string(nr.addr) != "h:1" {
		t.Errorf("node round trip: %+v %q", nr, bad)
	}
	ol := onLeaderReq{cmd: [][]byte{[]byte("raft.remove"), []byte("n1")}}
	if got := ol.args(); len(got) != 3 || string(got[0]) != cmdOnLeader {
		t.Errorf("onleader args %q", got)
	}
}
