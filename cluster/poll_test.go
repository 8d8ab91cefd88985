package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		stop   bool          // the host is shutting down
		limit  time.Duration // the interval is a millisecond
		doneAt int           // the try that reports done; 0: none
		want   error         // nil, errPollLimit, or the error's text below
		text   string
		tries  int // exactly this many tries; -1: at least 2
	}{
		{name: "done at once", ctx: context.Background(), limit: time.Minute, doneAt: 1, tries: 1},
		{name: "done on the third try", ctx: context.Background(), limit: time.Minute, doneAt: 3, tries: 3},
		// Done at once wins over an ended context: nothing is awaited.
		{name: "done with the context ended", ctx: cancelled, limit: time.Minute, doneAt: 1, tries: 1},
		{name: "limit", ctx: context.Background(), limit: 20 * time.Millisecond, want: errPollLimit, tries: -1},
		{name: "context ended", ctx: cancelled, limit: time.Minute, want: context.Canceled, tries: 1},
		{name: "host shutting down", ctx: context.Background(), stop: true, limit: time.Minute, text: "shutting down", tries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Host{stop: make(chan struct{})}
			if tt.stop {
				close(h.stop)
			}
			tries := 0
			err := h.poll(tt.ctx, tt.limit, time.Millisecond, func() bool {
				tries++
				return tries == tt.doneAt
			})
			switch {
			case tt.text != "":
				if err == nil || err.Error() != tt.text {
					t.Errorf("poll() = %v, want %q", err, tt.text)
				}
			case !errors.Is(err, tt.want):
				t.Errorf("poll() = %v, want %v", err, tt.want)
			}
			if tt.tries >= 0 && tries != tt.tries || tt.tries < 0 && tries < 2 {
				t.Errorf("poll() tried %d times, want %d (-1: at least 2)", tries, tt.tries)
			}
		})
	}
}
