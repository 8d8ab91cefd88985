package resp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// chunkReader returns its data in chunks of the given sizes (cycling).
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = min(n, max(1, r.sizes[r.i%len(r.sizes)]))
		r.i++
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// framedReader is the framing checker over a plain reader, as frameConn
// applies it over a socket; unauth stands in for the connection's state.
type framedReader struct {
	r      io.Reader
	f      framer
	lim    frameLimits
	stash  []byte
	perr   string
	stops  int // times the framer stopped after AUTH/HELLO
	passed []byte
}

func (fr *framedReader) Read(p []byte) (int, error) {
	if fr.perr != "" {
		return 0, errors.New(fr.perr)
	}
	var n int
	stashed := len(fr.stash) > 0
	if stashed {
		n = copy(p, fr.stash)
	} else {
		var err error
		if n, err = fr.r.Read(p); n == 0 {
			return 0, err
		}
	}
	k, perr := fr.f.scan(p[:n], fr.lim)
	switch {
	case perr != "":
		fr.perr = perr
	case stashed:
		fr.stash = fr.stash[k:]
	case k < n:
		fr.stash = append([]byte(nil), p[k:n]...)
	}
	if perr == "" && k < n {
		fr.stops++
	}
	fr.passed = append(fr.passed, p[:k]...)
	if perr != "" && k == 0 {
		return 0, errors.New(perr)
	}
	return k, nil
}

// parseAll runs redcon's reader over the framed stream and returns the
// commands, the framer's refusal (if any) and redcon's error (if any other
// than EOF).
func parseAll(data []byte, sizes []int, lim frameLimits) (cmds [][]string, fr *framedReader, rerr error) {
	fr = &framedReader{r: &chunkReader{data: data, sizes: sizes}, lim: lim}
	rd := redcon.NewReader(fr)
	for {
		cmd, err := rd.ReadCommand()
		if err != nil {
			if err == io.EOF || (fr.perr != "" && err.Error() == fr.perr) {
				return cmds, fr, nil
			}
			return cmds, fr, err
		}
		var args []string
		for _, a := range cmd.Args {
			args = append(args, string(a))
		}
		cmds = append(cmds, args)
	}
}

func TestFramerChunking(t *testing.T) {
	stream := []byte(enc("SADD", "key", "a", "") + "PING\r\n" + enc("ECHO", strings.Repeat("x", 300)) +
		"ECHO 'a b'\n" + enc("AUTH", "pw") + enc("GET", "k"))
	want, _, err := parseAll(stream, nil, frameLimits{maxBulk: 1 << 20})
	if err != nil || len(want) != 6 {
		t.Fatalf("whole stream: %v, %v", want, err)
	}
	for size := 1; size <= len(stream); size++ {
		got, fr, err := parseAll(stream, []int{size}, frameLimits{maxBulk: 1 << 20, unauth: true})
		if err != nil || fr.perr != "" {
			t.Fatalf("chunks of %d: %v %q", size, err, fr.perr)
		}
		if len(got) != len(want) || strings.Join(got[5], " ") != "GET k" {
			t.Fatalf("chunks of %d: %q", size, got)
		}
		if fr.stops > 1 {
			t.Errorf("chunks of %d: stopped %d times", size, fr.stops)
		}
		if !bytes.Equal(fr.passed, stream) {
			t.Errorf("chunks of %d: passed %q", size, fr.passed)
		}
	}
}

func TestFramerErrors(t *testing.T) {
	for _, tt := range []struct {
		in     string
		unauth bool
		want   string
		before int // commands parsed before the refusal
	}{
		{"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$1048577\r\n", false, errBulkLen, 1},
		{"*1048577\r\n", false, errMultibulkLen, 0},
		{"*11\r\n", true, errUnauthMultibulkLen, 0},
		{"*10\r\n$16385\r\n", true, errUnauthBulkLen, 0},
		{"*1\r\n$4\r\nAUTH\r\n*11\r\n", true, errUnauthMultibulkLen, 1}, // the AUTH ran and failed
		{"*-0\r\n", false, errMultibulkLen, 0},
		{"*1\r\n$+1\r\n", false, errBulkLen, 0},
		{"*1\r\n$1\rx", false, errBulkLen, 0},
		{"*1\r\n$1\r\nx\rx", false, errBulkLen, 0},
		{strings.Repeat("x", maxInline) + "\n" + strings.Repeat("y", maxInline+1), false, errInlineTooBig, 1},
	} {
		chunk := 7
		if len(tt.in) > 1000 {
			chunk = 4096 // redcon rescans a partial command on every read
		}
		cmds, fr, err := parseAll([]byte(tt.in), []int{chunk}, frameLimits{maxBulk: 1 << 20, unauth: tt.unauth})
		if err != nil || fr.perr != tt.want || len(cmds) != tt.before {
			t.Errorf("%.40q: commands %d, refusal %q, redcon %v; want %d, %q", tt.in, len(cmds), fr.perr, err, tt.before, tt.want)
		}
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "1mb": 1 << 20, "2MB": 2 << 20, "1gb": 1 << 30, "1k": 1000, "5b": 5} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1tb", "1.5mb"} {
		if _, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) accepted", in)
		}
	}
}
