package cluster

import (
	"errors"
	"strconv"

	"github.com/hashicorp/raft"

	"raftset/internal/command"
)

// ErrCorruptSnapshot is wrapped by New when the latest snapshot cannot be
// read or restored; the files are left as they are.
var ErrCorruptSnapshot = errors.New("cluster: latest snapshot is unusable")

// The replies of the node itself, RESP2 wire bytes. Two families, never
// mixed (DESIGN.md, "Reply families"):
//   - TRYAGAIN: the write certainly was not appended to the log (no leader,
//     not the leader, refused before proposing). Retrying is safe.
//   - CLUSTERDOWN: the write was handed to Raft and its outcome is unknown
//     (leadership lost before commit, shutdown, storage failure): it may or
//     may not be applied.
var (
	replyTryAgainNoLeader = constReply(command.ErrTryAgain)
	replyTryAgainClosing  = constReply("TRYAGAIN the write was not proposed: the node is shutting down, retry")
	replyTryAgainCanceled = constReply("TRYAGAIN the write was not proposed: the request was canceled")
	replyTryAgainNotReady = constReply("TRYAGAIN the write was not proposed: the new leader has not applied its predecessors' entries yet, retry")
	replyTryAgainQueue    = constReply("TRYAGAIN the write was not proposed: Raft's queue stayed full (or a leadership transfer is in progress), retry")
	replyUnknownLost      = constReply("CLUSTERDOWN the write's outcome is unknown: leadership was lost before it committed; it may or may not be applied")
	replyUnknownShutdown  = constReply("CLUSTERDOWN the write's outcome is unknown: the node shut down before it was applied; it may or may not be applied")
	replyUnknownCanceled  = constReply("CLUSTERDOWN the write's outcome is unknown: the request was canceled after it was proposed; it may or may not be applied")
	replyUnknownInternal  = constReply("CLUSTERDOWN the write's outcome is unknown: the state machine returned no reply for it")
	replyReadNoLeader     = constReply("TRYAGAIN the read was not served: no leader is known, retry")
	replyReadClosing      = constReply("TRYAGAIN the read was not served: the node is shutting down")
	replyReadNotReady     = constReply("TRYAGAIN the read was not served: the new leader has not committed an entry of its term yet, retry")
	replyReadLostLeader   = constReply("TRYAGAIN the read was not served: leadership could not be confirmed, retry")
	replyReadCanceled     = constReply("TRYAGAIN the read was not served: the request was canceled")
	replyReadRestoring    = constReply("TRYAGAIN the read was not served: a restore (RAFT.RESTORE) is being installed, retry")
	replyNoAdminCommand   = constReply("ERR unknown admin command")
)

// constReply builds the error reply for msg with no spare capacity, so that
// a caller appending to a shared reply copies it instead of writing into it.
func constReply(msg string) []byte {
	b := command.Error(msg)
	return b[:len(b):len(b)]
}

// notLeaderWrite is the reply to a write refused before proposing because
// this node does not lead (a follower that knows the leader's client
// address forwards instead).
func notLeaderWrite(leaderAddr, leaderID string) []byte {
	if leaderAddr == "" {
		return replyTryAgainNoLeader
	}
	return constReply("TRYAGAIN the write was not proposed: this node is not the leader (the leader is " +
		leaderID + " at " + leaderAddr + "), retry")
}

// notLeaderRead is the reply to a linearizable read on a follower.
func notLeaderRead(leaderAddr, leaderID string) []byte {
	if leaderAddr == "" {
		return replyReadNoLeader
	}
	return constReply("TRYAGAIN the read was not served: this node is not the leader (the leader is " +
		leaderID + " at " + leaderAddr + "), retry")
}

// tooLarge is the reply to a single command that cannot fit in a log entry.
func tooLarge(size, limit int) []byte {
	return command.Error("ERR the command is " + strconv.Itoa(size) +
		" bytes encoded, over the Raft log entry limit of " + strconv.Itoa(limit) + " bytes")
}

// applyErrorReply maps the error of an ApplyFuture to the reply every op of
// the entry gets. Only errors that prove the entry was never appended map to
// TRYAGAIN; everything else is an unknown outcome.
func applyErrorReply(err error) []byte {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return replyTryAgainNoLeader
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return replyTryAgainQueue
	case errors.Is(err, raft.ErrLeadershipLost):
		return replyUnknownLost
	case errors.Is(err, errFormatHeld):
		return constReply("TRYAGAIN the write was not proposed: " + err.Error())
	case errors.Is(err, raft.ErrRaftShutdown):
		// Raft also answers this for entries committed but not yet handed to
		// the FSM at shutdown, so it does not prove "not appended".
		return replyUnknownShutdown
	default:
		// ErrAbortedByRestore, a log store failure: unknown.
		return constReply("CLUSTERDOWN the write's outcome is unknown: " + err.Error())
	}
}

// applyErrorOutcome is applyErrorReply's verdict as an outcome: notApplied
// for the errors that prove the entry was never appended, else unknown.
func applyErrorOutcome(err error) outcomeKind {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, errFormatHeld):
		return notApplied
	}
	return outcomeUnknown
}
