package respwire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// CallParsed sends the command as RESP and returns the parsed reply, with
// an error reply as the error too.
func TestCallParsed(t *testing.T) {
	for _, tc := range []struct {
		reply, wantStr, wantErr string
	}{
		{"+OK\r\n", "OK", ""},
		{"$3\r\nabc\r\n", "abc", ""},
		{"-ERR no such shard\r\n", "ERR no such shard", "ERR no such shard"},
	} {
		srv, cli := net.Pipe()
		got := make(chan string, 1)
		go func() {
			defer srv.Close()
			br := bufio.NewReader(srv)
			raw, err := ReadReply(br, nil) // a command is an array: read it as one
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			got <- string(raw)
			_, _ = srv.Write([]byte(tc.reply))
		}()
		c := NewClient(cli, DialOptions{Timeout: 5 * time.Second})
		r, err := c.CallParsed(context.Background(), "RAFT.SHARD", "MAP")
		if want := "*2\r\n$10\r\nRAFT.SHARD\r\n$3\r\nMAP\r\n"; <-got != want {
			t.Errorf("server read something other than %q", want)
		}
		if r.Str != tc.wantStr {
			t.Errorf("reply %q: Str = %q, want %q", tc.reply, r.Str, tc.wantStr)
		}
		if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
			t.Errorf("reply %q: err = %v, want %q", tc.reply, err, tc.wantErr)
		}
		c.Close()
	}
}
