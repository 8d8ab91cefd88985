package resp

import (
	"context"
	"strings"
	"sync"
	"testing"

	"raftset/internal/command"
)

// saveStore answers SAVE with a chosen reply and counts the calls.
type saveStore struct {
	*fakeStore
	mu    sync.Mutex
	reply []byte
	saves int
}

func (s *saveStore) Admin(ctx context.Context, args [][]byte) []byte {
	if strings.EqualFold(string(args[0]), "save") {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.saves++
		return s.reply
	}
	return s.fakeStore.Admin(ctx, args)
}

func (s *saveStore) saveCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// shutdownRecorder is a Config.Shutdown that counts its calls.
type shutdownRecorder struct {
	mu    sync.Mutex
	calls int
}

func (r *shutdownRecorder) shutdown() {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
}

func (r *shutdownRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// TestShutdownErrors: bad arguments get Redis 7's replies, nothing is
// stopped and the connection stays usable.
func TestShutdownErrors(t *testing.T) {
	rec := &shutdownRecorder{}
	store := &saveStore{fakeStore: newFakeStore(), reply: command.OK}
	_, addr := startServer(t, Config{RequirePass: "pw", Shutdown: rec.shutdown}, store)
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("SHUTDOWN"), errr("NOAUTH Authentication required.")},
		{cmd("AUTH", "pw"), ok},
		{cmd("SHUTDOWN", "foo"), errr("ERR syntax error")},
		{cmd("SHUTDOWN", "SAVE", "NOSAVE"), errr("ERR syntax error")},
		{cmd("shutdown", "abort", "now"), errr("ERR syntax error")},
		{cmd("SHUTDOWN", "SAVE", "SAVE", "ABORT"), errr("ERR syntax error")},
		{cmd("SHUTDOWN", "ABORT"), errr("ERR No shutdown in progress.")},
		{cmd("SHUTDOWN", "abort", "ABORT"), errr("ERR No shutdown in progress.")},
		{cmd("MULTI"), ok},
		{cmd("SHUTDOWN", "NOSAVE"), errr("ERR Command not allowed inside a transaction")},
		{cmd("EXEC"), errr("EXECABORT Transaction discarded because of previous errors.")},
		{cmd("PING"), "+PONG\r\n"},
	})
	if n := rec.count(); n != 0 {
		t.Errorf("Shutdown called %d times by refused commands", n)
	}
	if n := store.saveCalls(); n != 0 {
		t.Errorf("SAVE called %d times by refused commands", n)
	}
}

// TestShutdownFailedSave: when SHUTDOWN SAVE cannot take its snapshot the
// node keeps running and says so, unless FORCE; NOSAVE never snapshots.
func TestShutdownFailedSave(t *testing.T) {
	rec := &shutdownRecorder{}
	store := &saveStore{fakeStore: newFakeStore(), reply: command.Error("ERR snapshot: disk full")}
	_, addr := startServer(t, Config{Shutdown: rec.shutdown}, store)
	tc := dial(t, addr)
	runSteps(t, tc, []step{
		{cmd("SHUTDOWN", "SAVE"), errr("ERR Errors trying to SHUTDOWN. Check logs.")},
		{cmd("PING"), "+PONG\r\n"},
	})
	if rec.count() != 0 || store.saveCalls() != 1 {
		t.Fatalf("after a failed SHUTDOWN SAVE: %d shutdowns, %d saves", rec.count(), store.saveCalls())
	}
	// FORCE goes on despite the failed snapshot: the write pipelined before
	// it is answered, SHUTDOWN itself is not, nor anything after it.
	tc.send(enc("SADD", "k", "a") + enc("SHUTDOWN", "save", "now", "force") + enc("PING"))
	if got := tc.reply(); got != integer(1) {
		t.Errorf("SADD before SHUTDOWN = %q", got)
	}
	tc.expectEOF()
	if rec.count() != 1 || store.saveCalls() != 2 {
		t.Fatalf("after SHUTDOWN SAVE NOW FORCE: %d shutdowns, %d saves", rec.count(), store.saveCalls())
	}
	tc2 := dial(t, addr)
	tc2.send(enc("SHUTDOWN", "NOSAVE"))
	tc2.expectEOF()
	if rec.count() != 2 || store.saveCalls() != 2 {
		t.Fatalf("after SHUTDOWN NOSAVE: %d shutdowns, %d saves", rec.count(), store.saveCalls())
	}
}

// TestShutdownWithoutHandler: a server embedded without Config.Shutdown
// cannot stop its process and says so.
func TestShutdownWithoutHandler(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	runSteps(t, dial(t, addr), []step{
		{cmd("SHUTDOWN"), errr("ERR Errors trying to SHUTDOWN. Check logs.")},
		{cmd("PING"), "+PONG\r\n"},
	})
}
