package cluster

import (
	"bytes"
	"testing"
)

// FuzzInternalProtocol feeds the internal protocol's decoders what a peer
// (or a stranger who got past nothing) could send: request arguments and
// replies. None may panic; what a decoder accepts must survive re-encoding.
func FuzzInternalProtocol(f *testing.F) {
	f.Add([]byte("raftset.forward\x00\x01\x01\x00\x01\x00\x02\x04sadd\x01s\x01m"), []byte("*2\r\n:1\r\n:7\r\n"))
	f.Add([]byte("raftset.promote\x00n2\x0042"), []byte(":42\r\n"))
	f.Add([]byte("raftset.node\x00n1\x00127.0.0.1:6379"), []byte("-TRYAGAIN x\r\n"))
	f.Fuzz(func(t *testing.T, req, reply []byte) {
		args := bytes.Split(req, []byte{0})
		if r, refusal := parseForward(args); refusal == nil {
			again, refusal := parseForward(r.args())
			if refusal != nil || len(again.ops) != len(r.ops) || again.withIndex != r.withIndex {
				t.Fatalf("forward request %q does not survive re-encoding: %q", req, refusal)
			}
		}
		if r, refusal := parsePromote(args); refusal == nil {
			if again, refusal := parsePromote(r.args()); refusal != nil || again.applied != r.applied || !bytes.Equal(again.id, r.id) {
				t.Fatalf("promote request %q does not survive re-encoding", req)
			}
		}
		_, _ = parseNodeAddr(args)
		o := answered(reply)
		for nops := range 3 {
			got, parts, _ := decodeForward(o, nops)
			if got.kind == applied && len(parts) != nops {
				t.Fatalf("decodeForward(%q, %d) gave %d replies", reply, nops, len(parts))
			}
		}
		_, _ = decodeIndex(o, cmdReadIndex)
		_ = o.writeReply()
		_ = o.readReply()
	})
}
