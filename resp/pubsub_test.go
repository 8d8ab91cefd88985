package resp

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"raftset/internal/testutil"
)

func pubsubReply(kind, name string, count int64) string {
	if name == "\x00" {
		return array(bulk(kind), "$-1\r\n", integer(count))
	}
	return array(bulk(kind), bulk(name), integer(count))
}

// The RESP2 shapes of Redis's pub/sub: confirmations, messages, PING and
// the commands refused in subscribed mode.
func TestPubSubReplyShapes(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeStore())
	sub, pub := dial(t, addr), dial(t, addr)
	if got := sub.do("PUNSUBSCRIBE"); got != pubsubReply("punsubscribe", "\x00", 0) {
		t.Errorf("PUNSUBSCRIBE with none = %q", got)
	}
	sub.send(enc("SUBSCRIBE", "a", "b"))
	if got := sub.replies(2); got != pubsubReply("subscribe", "a", 1)+pubsubReply("subscribe", "b", 2) {
		t.Fatalf("SUBSCRIBE a b = %q", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "x"}, errr("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")},
		{[]string{"CLIENT", "ID"}, errr("ERR Can't execute 'client|id': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")},
		{[]string{"PING"}, array(bulk("pong"), bulk(""))},
		{[]string{"PING", "hi"}, array(bulk("pong"), bulk("hi"))},
		{[]string{"SUBSCRIBE", "a"}, pubsubReply("subscribe", "a", 2)},
		{[]string{"PSUBSCRIBE", "h*"}, pubsubReply("psubscribe", "h*", 3)},
	} {
		if got := sub.do(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := pub.do("PUBLISH", "a", "hello"); got != integer(1) {
		t.Errorf("PUBLISH a = %q", got)
	}
	if got := sub.reply(); got != array(bulk("message"), bulk("a"), bulk("hello")) {
		t.Errorf("message = %q", got)
	}
	if got := pub.do("PUBLISH", "hx", "m"); got != integer(1) {
		t.Errorf("PUBLISH hx = %q", got)
	}
	if got := sub.reply(); got != "*4\r\n"+bulk("pmessage")+bulk("h*")+bulk("hx")+bulk("m") {
		t.Errorf("pmessage = %q", got)
	}
	if got := pub.do("PUBLISH", "nobody", "x"); got != integer(0) {
		t.Errorf("PUBLISH nobody = %q", got)
	}
	if list := pub.do("CLIENT", "LIST"); !strings.Contains(list, "flags=P db=0 sub=2 psub=1 ") {
		t.Errorf("CLIENT LIST lacks the subscriber's counts:\n%s", list)
	}
	if list := pub.do("CLIENT", "LIST", "TYPE", "pubsub"); strings.Count(list, "id=") != 1 || !strings.Contains(list, "sub=2 ") {
		t.Errorf("CLIENT LIST TYPE pubsub = %q, want the subscriber alone", list)
	}
	if list := pub.do("CLIENT", "LIST", "TYPE", "normal"); strings.Count(list, "id=") != 1 || !strings.Contains(list, "sub=0 ") {
		t.Errorf("CLIENT LIST TYPE normal = %q, want the publisher alone", list)
	}
	if got := sub.do("UNSUBSCRIBE", "a"); got != pubsubReply("unsubscribe", "a", 2) {
		t.Errorf("UNSUBSCRIBE a = %q", got)
	}
	if got := sub.do("UNSUBSCRIBE"); got != pubsubReply("unsubscribe", "b", 1) {
		t.Errorf("UNSUBSCRIBE (all) = %q", got)
	}
	if got := sub.do("PUNSUBSCRIBE", "h*"); got != pubsubReply("punsubscribe", "h*", 0) {
		t.Errorf("PUNSUBSCRIBE h* = %q", got)
	}
	// Out of subscribed mode: ordinary commands and PING again.
	if got := sub.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING after leaving = %q", got)
	}
	if got := pub.do("PUBLISH", "a", "late"); got != integer(0) {
		t.Errorf("PUBLISH after UNSUBSCRIBE = %q", got)
	}
	if got := sub.do("MULTI"); got != "+OK\r\n" {
		t.Fatalf("MULTI = %q", got)
	}
	if got := sub.do("SUBSCRIBE", "a"); got != errr("ERR Command not allowed inside a transaction") {
		t.Errorf("SUBSCRIBE in MULTI = %q", got)
	}
}

// A message published while SUBSCRIBE runs never reaches the client before
// the subscription's confirmation, and a closed subscriber is forgotten.
func TestPubSubConfirmationComesFirst(t *testing.T) {
	s, addr := startServer(t, Config{}, newFakeStore())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.Publish("c", []byte("m"))
			}
		}
	}()
	var once sync.Once
	stopPublisher := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer stopPublisher()
	for range 50 {
		sub := dial(t, addr)
		sub.send(enc("SUBSCRIBE", "c"))
		if got := sub.reply(); got != pubsubReply("subscribe", "c", 1) {
			t.Fatalf("first reply after SUBSCRIBE = %q", got)
		}
		if got := sub.reply(); got != array(bulk("message"), bulk("c"), bulk("m")) {
			t.Fatalf("message = %q", got)
		}
		sub.c.Close()
	}
	stopPublisher()
	// Every subscriber above closed: PUBLISH reaches nobody once the server
	// has seen the closes.
	testutil.WaitFor(t, 10*time.Second, "closed subscribers forgotten", func() bool { return s.Publish("c", []byte("x")) == 0 })
}

// A subscriber that never reads is dropped once its queue passes the pubsub
// class of client-output-buffer-limit, with Redis's log line; PUBLISH keeps
// answering at once all along, and other subscribers keep receiving.
func TestStuckSubscriberDropped(t *testing.T) {
	var logs logLines
	logger := hclog.New(&hclog.LoggerOptions{Name: "resp", Output: &logs, Level: hclog.Warn})
	_, addr := startServer(t, Config{ClientOutputBufferLimit: "pubsub 1mb 256kb 60", Logger: logger}, newFakeStore())

	stuck := dial(t, addr)
	if got := stuck.do("SUBSCRIBE", "ch"); got != "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	reader := dial(t, addr)
	if got := reader.do("SUBSCRIBE", "ch"); got != "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE = %q", got)
	}
	pub := dial(t, addr)
	msg := strings.Repeat("m", 100<<10)
	wantMsg := "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$" + strconv.Itoa(len(msg)) + "\r\n" + msg + "\r\n"
	dropped := false
	for i := 0; i < 2000 && !dropped; i++ {
		pub.send(enc("PUBLISH", "ch", msg))
		// A publisher waiting on the stuck socket would miss this.
		_ = pub.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		switch got := pub.reply(); got {
		case ":2\r\n":
		case ":1\r\n":
			dropped = true
		default:
			t.Fatalf("PUBLISH %d = %q", i, got)
		}
		if got := reader.reply(); got != wantMsg {
			t.Fatalf("the reading subscriber got %.60q", got)
		}
	}
	if !dropped {
		t.Fatal("the stuck subscriber was never dropped")
	}
	// The stuck subscriber finds its connection closed once it reads.
	_ = stuck.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, stuck.r); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("stuck subscriber: %v, want the connection closed", err)
	}
	if got := pub.do("INFO", "stats"); !strings.Contains(got, "\r\nclient_output_buffer_limit_disconnections:1\r\n") {
		t.Errorf("INFO stats: %q", got)
	}
	lines := logs.matching("scheduled to be closed ASAP for overcoming of output buffer limits.")
	if len(lines) != 1 || !strings.Contains(lines[0], "Client id=") || !strings.Contains(lines[0], " sub=1 ") {
		t.Errorf("log lines %q", lines)
	}
}
