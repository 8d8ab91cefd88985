package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"raftset/internal/respwire"
	"raftset/internal/tlsconf"
	"raftset/snapshot"
)

// raftset backup and raftset restore: a node's state over RESP, with what
// redis-cli --rdb does plus a progress bar, a verified file and the log
// index it is consistent with (docs/operations.md).

const backupUsage = `usage: raftset backup [--addr host:port] [--user U] [--pass P] [--tls ...] FILE

Fetches a consistent RDB file of the cluster's state from any node (SYNC, as
redis-cli --rdb does), shows progress on stderr, verifies the whole file and
its CRC64, and prints the Raft log index and term it is consistent with. The
file is written to FILE.tmp and renamed once verified.
`

const restoreUsage = `usage: raftset restore [--addr host:port] [--user U] [--pass P] [--tls ...] FILE

Replaces the whole cluster's state with an RDB file (a raftset backup or any
Redis dump: database 0; strings and sets) through Raft's user restore: every
member installs it and the cluster keeps its membership. It asks the node at
--addr for the leader (ROLE) and sends the file there (RAFT.RESTORE).
`

// connFlags are the connection flags backup and restore share, as
// redis-cli names them.
type connFlags struct {
	addr, user, pass  *string
	useTLS, insecure  *bool
	cacert, cert, key *string
	timeout           *time.Duration
	progress          *bool
	tlsCfg            *tls.Config
	stderr            io.Writer
	progressTerminal  bool
}

func addConnFlags(fs *flag.FlagSet, stderr io.Writer) *connFlags {
	return &connFlags{
		addr:     fs.String("addr", defaultHealthAddr, "RESP address of any node"),
		user:     fs.String("user", "", "AUTH with this user (ACL)"),
		pass:     fs.String("pass", os.Getenv("REDISCLI_AUTH"), "AUTH with this password (default $REDISCLI_AUTH)"),
		useTLS:   fs.Bool("tls", false, "connect with TLS (the node's tls-port)"),
		cacert:   fs.String("cacert", "", "CA certificate the node's certificate must chain to"),
		cert:     fs.String("cert", "", "client certificate, for tls-auth-clients"),
		key:      fs.String("key", "", "client certificate's key"),
		insecure: fs.Bool("insecure", false, "do not check the node's certificate"),
		timeout:  fs.Duration("timeout", 10*time.Second, "dial timeout, and the longest wait for the node to make progress"),
		progress: fs.Bool("progress", true, "show progress on stderr"),
		stderr:   stderr,
	}
}

// parseFileCommand parses the arguments of `raftset NAME [flags] FILE`.
// A nil connFlags means the command is over, with code as its exit status
// (0 after -help, 2 for a usage error, 1 for unusable TLS settings).
func parseFileCommand(name, usage string, args []string, stderr io.Writer) (cf *connFlags, file string, code int) {
	fs := flag.NewFlagSet("raftset "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	cf = addConnFlags(fs, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", 0
		}
		return nil, "", 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return nil, "", 2
	}
	if err := cf.init(); err != nil {
		fmt.Fprintf(stderr, "raftset %s: %v\n", name, err)
		return nil, "", 1
	}
	return cf, fs.Arg(0), 0
}

func (cf *connFlags) init() error {
	if *cf.useTLS {
		var err error
		cf.tlsCfg, err = tlsconf.ClientConfig(tlsconf.Files{Cert: *cf.cert, Key: *cf.key, CA: *cf.cacert}, *cf.insecure)
		if err != nil {
			return err
		}
	}
	if f, ok := cf.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cf.progressTerminal = true
		}
	}
	return nil
}

// rawConn is a RESP connection read and written directly: SYNC's answer is
// not a RESP reply a client library can parse.
type rawConn struct {
	c       net.Conn
	br      *bufio.Reader
	timeout time.Duration
}

// dial connects to addr and authenticates.
func (cf *connFlags) dial(addr string) (*rawConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	cl, err := respwire.DialContext(ctx, addr, respwire.DialOptions{Timeout: *cf.timeout, TLS: cf.tlsCfg})
	if err != nil {
		return nil, err
	}
	rc := &rawConn{c: cl.Conn(), br: bufio.NewReaderSize(cl.Conn(), 64<<10), timeout: *cf.timeout}
	if *cf.pass != "" {
		args := []string{"AUTH", *cf.pass}
		if *cf.user != "" {
			args = []string{"AUTH", *cf.user, *cf.pass}
		}
		line, err := rc.call(args...)
		if err == nil && line != "+OK" {
			err = fmt.Errorf("AUTH: %s", strings.TrimPrefix(line, "-"))
		}
		if err != nil {
			rc.c.Close()
			return nil, err
		}
	}
	return rc, nil
}

// send writes one command.
func (rc *rawConn) send(args ...[]byte) error {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	_ = rc.c.SetWriteDeadline(time.Now().Add(rc.timeout))
	_, err := rc.c.Write(b)
	return err
}

// line reads one reply line, without its CRLF. SYNC answers "$<len>" and
// then the file with no CRLF after it, which no RESP reply reader takes:
// this connection reads the lines and the file itself.
func (rc *rawConn) line(wait time.Duration) (string, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(wait))
	s, err := rc.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// call sends a command whose reply is one line (+, -, :).
func (rc *rawConn) call(args ...string) (string, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if err := rc.send(b...); err != nil {
		return "", err
	}
	return rc.line(rc.timeout)
}

// progressBar draws "[=====>    ]  45%  12.3 MB / 27.0 MB" on a terminal,
// and a line every 10% elsewhere (a log).
type progressBar struct {
	out      io.Writer
	on, term bool
	what     string
	total    int64
	done     int64
	last     time.Time
	lastPct  int64
}

func (p *progressBar) add(n int) {
	p.done += int64(n)
	if !p.on {
		return
	}
	pct := int64(100)
	if p.total > 0 {
		pct = p.done * 100 / p.total
	}
	if p.term {
		if time.Since(p.last) < 100*time.Millisecond && p.done < p.total {
			return
		}
		p.last = time.Now()
		const width = 30
		fill := int(pct * width / 100)
		bar := strings.Repeat("=", fill)
		if fill < width {
			bar += ">" + strings.Repeat(" ", width-fill-1)
		}
		fmt.Fprintf(p.out, "\r%s [%s] %3d%%  %s / %s", p.what, bar, pct, mb(p.done), mb(p.total))
		return
	}
	if pct/10 > p.lastPct/10 || p.done == p.total && p.lastPct < 100 {
		p.lastPct = pct
		fmt.Fprintf(p.out, "%s: %d%% (%s of %s)\n", p.what, pct, mb(p.done), mb(p.total))
	}
}

func (p *progressBar) finish() {
	if p.on && p.term {
		fmt.Fprintln(p.out)
	}
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func runBackup(args []string, stdout, stderr io.Writer) int {
	cf, file, code := parseFileCommand("backup", backupUsage, args, stderr)
	if cf == nil {
		return code
	}
	res, err := backup(cf, file)
	if err != nil {
		fmt.Fprintf(stderr, "raftset backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup %s: %d bytes, %d keys, consistent with index %s term %s, checksum OK (%016x)\n",
		file, res.size, res.keys, res.index, res.term, res.crc)
	return 0
}

// backupResult describes a verified backup file.
type backupResult struct {
	size, keys  int64
	index, term string // the file's raftset-index and raftset-term
	crc         uint64
}

// backup fetches the node's state into file (through file.tmp) and
// verifies it.
func backup(cf *connFlags, file string) (backupResult, error) {
	var res backupResult
	rc, err := cf.dial(*cf.addr)
	if err != nil {
		return res, err
	}
	defer rc.c.Close()
	if err := rc.send([]byte("SYNC")); err != nil {
		return res, fmt.Errorf("SYNC: %w", err)
	}
	// The node passes its read barrier and measures the file first.
	head, err := rc.line(*cf.timeout + time.Minute)
	if err != nil {
		return res, fmt.Errorf("SYNC: %w", err)
	}
	if strings.HasPrefix(head, "-") {
		return res, fmt.Errorf("SYNC refused: %s", head[1:])
	}
	size, err := strconv.ParseInt(strings.TrimPrefix(head, "$"), 10, 64)
	if !strings.HasPrefix(head, "$") || err != nil || size < 0 {
		return res, fmt.Errorf("SYNC: unexpected answer %q", head)
	}
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return res, err
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(tmp)
		}
	}()
	bar := &progressBar{out: cf.stderr, on: *cf.progress, term: cf.progressTerminal, what: "backup", total: size}
	buf := make([]byte, 256<<10)
	for left := size; left > 0; {
		_ = rc.c.SetReadDeadline(time.Now().Add(*cf.timeout))
		k, rerr := rc.br.Read(buf[:min(int64(len(buf)), left)])
		if k > 0 {
			if _, err = f.Write(buf[:k]); err != nil {
				return res, err
			}
			left -= int64(k)
			bar.add(k)
		}
		if rerr != nil && left > 0 {
			bar.finish()
			err = fmt.Errorf("SYNC: the connection ended %d bytes before the end of the file: %w", left, rerr)
			return res, err
		}
	}
	bar.finish()
	if err = f.Sync(); err != nil {
		return res, err
	}
	if res, err = verifyRDB(tmp); err != nil {
		err = fmt.Errorf("the file received does not verify: %w", err)
		return res, err
	}
	if err = os.Rename(tmp, file); err != nil {
		return res, err
	}
	if d, derr := os.Open(filepath.Dir(file)); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return res, nil
}

// verifyRDB reads a whole RDB file (every record, and the CRC64 at its end)
// and returns its summary.
func verifyRDB(path string) (backupResult, error) {
	var res backupResult
	f, err := os.Open(path)
	if err != nil {
		return res, err
	}
	defer f.Close()
	r, err := snapshot.NewReader(bufio.NewReaderSize(f, 256<<10), snapshot.ReaderOptions{SkipUnsupported: true})
	if err != nil {
		return res, err
	}
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		res.keys++
	}
	if st, err := f.Stat(); err == nil {
		res.size = st.Size()
		if st.Size() != r.Offset() {
			return res, fmt.Errorf("%d bytes after the end of the RDB data", st.Size()-r.Offset())
		}
	}
	res.crc = r.Checksum()
	res.index, res.term = "?", "?"
	for _, a := range r.Aux() {
		switch a.Key {
		case "raftset-index":
			res.index = a.Value
		case "raftset-term":
			res.term = a.Value
		}
	}
	return res, nil
}

func runRestore(args []string, stdout, stderr io.Writer) int {
	cf, file, code := parseFileCommand("restore", restoreUsage, args, stderr)
	if cf == nil {
		return code
	}
	keys, leader, err := restore(cf, file)
	if err != nil {
		fmt.Fprintf(stderr, "raftset restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s through the leader %s: %d keys\n", file, leader, keys)
	return 0
}

// restore sends file to the leader with RAFT.RESTORE and returns the number
// of keys the cluster now holds and the leader's address.
func restore(cf *connFlags, file string) (int64, string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, "", err
	}
	// Checked here too, so that a damaged file is refused before it
	// travels (the leader checks it again).
	if _, err := verifyRDB(file); err != nil {
		return 0, "", fmt.Errorf("%s does not verify: %w", file, err)
	}
	addr, err := cf.leader()
	if err != nil {
		return 0, "", err
	}
	rc, err := cf.dial(addr)
	if err != nil {
		return 0, addr, err
	}
	defer rc.c.Close()
	bar := &progressBar{out: cf.stderr, on: *cf.progress, term: cf.progressTerminal, what: "restore: upload", total: int64(len(data))}
	head := fmt.Appendf(nil, "*2\r\n$12\r\nRAFT.RESTORE\r\n$%d\r\n", len(data))
	pw := &progressWriter{w: rc.c, bar: bar, timeout: *cf.timeout}
	_ = rc.c.SetWriteDeadline(time.Now().Add(*cf.timeout))
	if _, err := rc.c.Write(head); err != nil {
		return 0, addr, err
	}
	for off := 0; off < len(data); off += 256 << 10 {
		if _, err := pw.Write(data[off:min(off+256<<10, len(data))]); err != nil {
			return 0, addr, err
		}
	}
	if _, err := rc.c.Write([]byte("\r\n")); err != nil {
		return 0, addr, err
	}
	bar.finish()
	if *cf.progress {
		fmt.Fprintln(cf.stderr, "restore: the leader is installing it on every member...")
	}
	line, err := rc.line(6 * time.Minute)
	if err != nil {
		return 0, addr, fmt.Errorf("RAFT.RESTORE: %w (the outcome is unknown: compare DEBUG DIGEST)", err)
	}
	if strings.HasPrefix(line, "-") {
		return 0, addr, fmt.Errorf("RAFT.RESTORE: %s", line[1:])
	}
	keys, err := strconv.ParseInt(strings.TrimPrefix(line, ":"), 10, 64)
	if err != nil {
		return 0, addr, fmt.Errorf("RAFT.RESTORE: unexpected answer %q", line)
	}
	return keys, addr, nil
}

type progressWriter struct {
	w       net.Conn
	bar     *progressBar
	timeout time.Duration
}

func (p *progressWriter) Write(b []byte) (int, error) {
	_ = p.w.SetWriteDeadline(time.Now().Add(p.timeout))
	n, err := p.w.Write(b)
	p.bar.add(n)
	return n, err
}

// leader returns the client address of the cluster's leader, as the node
// at --addr sees it (ROLE: a follower names its master).
func (cf *connFlags) leader() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	cl, err := respwire.DialContext(ctx, *cf.addr, respwire.DialOptions{Timeout: *cf.timeout, TLS: cf.tlsCfg})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	hc := &healthConn{ctx: ctx, c: cl}
	if *cf.pass != "" {
		args := []string{"AUTH", *cf.pass}
		if *cf.user != "" {
			args = []string{"AUTH", *cf.user, *cf.pass}
		}
		if _, err := hc.do(args...); err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
	}
	role, err := hc.do("ROLE")
	if err != nil {
		return "", fmt.Errorf("ROLE: %w", err)
	}
	if role.Kind != '*' || len(role.Elems) == 0 {
		return "", fmt.Errorf("ROLE: unexpected reply %v", role)
	}
	switch name, _ := text(role.Elems[0]); name {
	case "master":
		return *cf.addr, nil
	case "slave":
		if len(role.Elems) >= 3 {
			host, _ := text(role.Elems[1])
			if port := role.Elems[2].Str; role.Elems[2].Kind == ':' && host != "" && port != "0" {
				return net.JoinHostPort(host, port), nil
			}
		}
		return "", errors.New("the node knows no leader now; retry")
	}
	return "", fmt.Errorf("ROLE: unexpected role %v", role.Elems[0])
}
