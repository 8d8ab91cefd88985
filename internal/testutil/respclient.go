package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// RESPClient is a minimal Redis client for tests: it sends a command and
// returns the reply exactly as it came off the wire, so tests can compare
// replies byte for byte. It never retries.
type RESPClient struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// DialRESP connects to addr.
func DialRESP(addr string, timeout time.Duration) (*RESPClient, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &RESPClient{conn: c, r: bufio.NewReader(c), timeout: timeout}, nil
}

// Close closes the connection.
func (c *RESPClient) Close() error { return c.conn.Close() }

// Do sends one command and returns its raw reply.
func (c *RESPClient) Do(args ...string) (string, error) {
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	if err := c.Send(bargs); err != nil {
		return "", err
	}
	return c.Read()
}

// Send writes one command without reading its reply (for pipelining).
func (c *RESPClient) Send(args [][]byte) error {
	buf := AppendCommand(nil, args)
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(buf)
	return err
}

// AppendCommand encodes args as a RESP array of bulk strings.
func AppendCommand(dst []byte, args [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// Read reads one complete reply and returns its raw bytes.
func (c *RESPClient) Read() (string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	var out []byte
	if err := readReply(c.r, &out); err != nil {
		return string(out), err
	}
	return string(out), nil
}

func readReply(r *bufio.Reader, out *[]byte) error {
	line, err := r.ReadSlice('\n')
	*out = append(*out, line...)
	if err != nil {
		return err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := readFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, buf...)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("bad aggregate length %q", body)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
		return nil
	}
	return errors.New("unknown reply type " + strconv.Quote(string(line[:1])))
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
