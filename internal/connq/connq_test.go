package connq

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
)

func TestDeliverThenAccept(t *testing.T) {
	q := New()
	a, b := net.Pipe()
	defer b.Close()
	taken := make(chan bool)
	go func() { taken <- q.Deliver(a, nil) }()
	c, err := q.Accept()
	if err != nil || c != a {
		t.Fatalf("Accept = %v, %v; want the delivered conn", c, err)
	}
	if !<-taken {
		t.Fatal("Deliver reported the conn not taken")
	}
	_ = c.Close()
}

// A connection that nobody accepts is closed, not leaked, when the queue
// or the caller's stop channel closes.
func TestDeliverClosesWhenRefused(t *testing.T) {
	for _, name := range []string{"queue closed", "stop closed"} {
		t.Run(name, func(t *testing.T) {
			q := New()
			stop := make(chan struct{})
			a, b := net.Pipe()
			defer b.Close()
			taken := make(chan bool)
			go func() { taken <- q.Deliver(a, stop) }()
			if name == "queue closed" {
				q.Close()
				q.Close() // twice is fine
			} else {
				close(stop)
			}
			if <-taken {
				t.Fatal("Deliver reported a refused conn taken")
			}
			if _, err := a.Write([]byte("x")); !errors.Is(err, errClosedPipe) {
				t.Fatalf("write on the refused conn: %v, want it closed", err)
			}
		})
	}
}

var errClosedPipe = io.ErrClosedPipe

func TestAcceptAfterClose(t *testing.T) {
	q := New()
	q.Close()
	if _, err := q.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRetryAccept(t *testing.T) {
	open, closed := make(chan struct{}), make(chan struct{})
	close(closed)
	for _, c := range []struct {
		name string
		err  error
		done chan struct{}
		want bool
	}{
		{"timeout", timeoutErr{}, open, true},
		{"listener closed", net.ErrClosed, open, false},
		{"other error", os.ErrPermission, open, true},
		{"done wins", timeoutErr{}, closed, false},
	} {
		if got := RetryAccept(c.err, c.done); got != c.want {
			t.Errorf("%s: RetryAccept = %v, want %v", c.name, got, c.want)
		}
	}
}
