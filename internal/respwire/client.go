package respwire

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Client is one RESP connection that sends commands and reads replies as
// their raw bytes. It never retries: a timed-out command closes nothing by
// itself, and the caller decides whether the connection is still usable
// (a reply may still be on its way). It is not safe for concurrent use.
type Client struct {
	conn    net.Conn
	br      *bufio.Reader
	out     []byte
	timeout time.Duration
	limits  Limits
}

// DialOptions says how to reach a server.
type DialOptions struct {
	Timeout time.Duration // dial and per-command timeout; 0 means 5 s
	TLS     *tls.Config   // nil: plain TCP
	Limits  *Limits       // nil: DefaultLimits
}

// Dial connects to addr with a timeout for the dial and for each command.
func Dial(addr string, timeout time.Duration) (*Client, error) {
	return DialContext(context.Background(), addr, DialOptions{Timeout: timeout})
}

// DialContext connects to addr as opts say.
func DialContext(ctx context.Context, addr string, opts DialOptions) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	d := net.Dialer{Timeout: opts.Timeout}
	var conn net.Conn
	var err error
	if opts.TLS != nil {
		td := tls.Dialer{NetDialer: &d, Config: opts.TLS}
		conn, err = td.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return NewClient(conn, opts), nil
}

// NewClient wraps an established connection.
func NewClient(conn net.Conn, opts DialOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	l := DefaultLimits
	if opts.Limits != nil {
		l = *opts.Limits
	}
	return &Client{conn: conn, br: bufio.NewReader(conn), timeout: opts.Timeout, limits: l}
}

// Conn is the underlying connection (for deadlines and addresses).
func (c *Client) Conn() net.Conn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends one command and returns its raw reply as a string. An error
// reply is not a Go error: compare the bytes, or Parse them.
func (c *Client) Do(args ...string) (string, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	raw, err := c.DoBytes(b)
	return string(raw), err
}

// DoBytes sends one command and returns its raw reply.
func (c *Client) DoBytes(args [][]byte) ([]byte, error) {
	if err := c.Send(args); err != nil {
		return nil, err
	}
	return c.ReadRaw()
}

// DoParsed sends one command and returns its parsed reply.
func (c *Client) DoParsed(args ...string) (Reply, error) {
	raw, err := c.Do(args...)
	if err != nil {
		return Reply{Kind: '?'}, err
	}
	return Parse([]byte(raw))
}

// Call sends one command and reads its reply within ctx's deadline (and the
// client's timeout); cancelling ctx interrupts the read.
func (c *Client) Call(ctx context.Context, args [][]byte) ([]byte, error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Now()) })
	c.out = AppendCommand(c.out[:0], args)
	_, err := c.conn.Write(c.out)
	var reply []byte
	if err == nil {
		reply, err = c.limits.ReadReply(c.br, nil)
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	_ = c.conn.SetDeadline(time.Time{})
	return reply, err
}

// CallParsed is Call with string arguments and the reply parsed; an error
// reply is returned as the error too (its text, "ERR ...").
func (c *Client) CallParsed(ctx context.Context, args ...string) (Reply, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	raw, err := c.Call(ctx, b)
	if err != nil {
		return Reply{}, err
	}
	r, err := Parse(raw)
	if err != nil {
		return Reply{}, err
	}
	return r, r.Err()
}

// Send writes one command without reading its reply (for pipelining).
func (c *Client) Send(args [][]byte) error {
	c.out = AppendCommand(c.out[:0], args)
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(c.out)
	return err
}

// SendRaw writes bytes as they are (malformed input for tests, inline
// commands, or a prepared pipeline).
func (c *Client) SendRaw(b []byte) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(b)
	return err
}

// Read reads one reply and returns its raw bytes as a string.
func (c *Client) Read() (string, error) {
	raw, err := c.ReadRaw()
	return string(raw), err
}

// ReadRaw reads one reply and returns its raw bytes.
func (c *Client) ReadRaw() ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.limits.ReadReply(c.br, nil)
}
