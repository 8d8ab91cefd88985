package resp

import (
	"io"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// readBoth parses data, delivered in chunks of sizes (through the framer
// when framed, as on a connection), with the connection loop's reader and
// with redcon's, and returns each one's commands (the arguments joined by
// "|") and the error that ended it (io.EOF: none).
func readBoth(data []byte, sizes []int, framed bool) (ours, theirs []string, ourErr, theirErr error) {
	source := func() io.Reader {
		var r io.Reader = &chunkReader{data: data, sizes: sizes}
		if framed {
			r = &framedReader{r: r, lim: frameLimits{maxBulk: 1 << 20}}
		}
		return r
	}
	var rd batchReader
	r := source()
	var keep [][][]byte // the arguments must stay intact after later reads
	for {
		cmds, err := rd.read(r)
		if err != nil {
			ourErr = err
			break
		}
		for _, c := range cmds {
			keep = append(keep, c.Args)
		}
	}
	for _, a := range keep {
		ours = append(ours, joinArgs(a))
	}
	rr := redcon.NewReader(source())
	defer func() {
		// Unframed, redcon's index arithmetic overflows on lengths near
		// 2^63 (the framer refuses them first); ours must not: compare
		// nothing then.
		if recover() != nil {
			theirs, theirErr = ours, ourErr
		}
	}()
	for {
		c, err := rr.ReadCommand()
		if err != nil {
			theirErr = err
			break
		}
		theirs = append(theirs, joinArgs(c.Args))
	}
	return ours, theirs, ourErr, theirErr
}

func joinArgs(args [][]byte) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = string(a)
	}
	return strings.Join(s, "|")
}

var readerInputs = []string{
	enc("PING"),
	enc("SADD", "k", "a", "b") + enc("SMEMBERS", "k") + enc("SISMEMBER", "k", ""),
	"PING\r\nECHO \"a b\"\r\n" + enc("GET", "x"),
	"\r\n  \r\nPING\n",
	"ping 'a\r\n",
	"echo \"a\\tb\" 'c d'\r\n" + enc("ECHO", strings.Repeat("x", 5000)),
	enc("MULTI") + enc("SET", "a", "1") + enc("EXEC"),
	"*2\r\n$4\r\nECHO\r\n$3\r\nabcXY",
	"*0\r\n",
	"*-1\r\n",
	"*1\n$4\r\nPING\r\n",
	"*1\r\n$x\r\nPING\r\n",
	"*1\r\n$4\nPING\r\n",
	"*1\r\n$-2\r\nPING\r\n",
	"*2\r\n$4\r\nECHO\r\n:3\r\n",
	enc("PING") + "*1\r\n$4\r\nPINGxx",
	"*1\r\n$0\r\n\r\n",
	"*1\r\n$9223372036854775807\r\nPING\r\n",
}

// TestBatchReaderMatchesRedcon: the connection loop's reader finds the same
// commands and the same protocol errors as redcon's, however the bytes
// arrive, and commands already returned keep their arguments.
func TestBatchReaderMatchesRedcon(t *testing.T) {
	for _, in := range readerInputs {
		for _, sizes := range [][]int{nil, {1}, {2}, {3}, {7}, {5, 1, 13}, {4096}} {
			ours, theirs, oe, te := readBoth([]byte(in), sizes, false)
			if strings.Join(ours, "\n") != strings.Join(theirs, "\n") {
				t.Errorf("%q in chunks %v: commands %q, redcon %q", in, sizes, ours, theirs)
			}
			if (oe == io.EOF) != (te == io.EOF) || (oe != io.EOF && oe.Error() != te.Error()) {
				t.Errorf("%q in chunks %v: error %v, redcon %v", in, sizes, oe, te)
			}
		}
	}
}

// FuzzBatchReader compares the readers on what passed the framer, as on a
// connection: unframed, redcon's reader spends seconds walking a multibulk
// count of billions that the framer refuses at once.
func FuzzBatchReader(f *testing.F) {
	for _, in := range readerInputs {
		f.Add([]byte(in), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		sizes := []int{int(size%64) + 1, int(size/64) + 1}
		ours, theirs, oe, te := readBoth(data, sizes, true)
		if strings.Join(ours, "\n") != strings.Join(theirs, "\n") {
			t.Fatalf("commands %q, redcon %q", ours, theirs)
		}
		if (oe == io.EOF) != (te == io.EOF) || (oe != io.EOF && oe.Error() != te.Error()) {
			t.Fatalf("error %v, redcon %v", oe, te)
		}
	})
}
