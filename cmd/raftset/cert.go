package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"raftset/internal/certgen"
)

// runCert writes the certificates of a cluster that runs with tls-cluster
// and client TLS, like `cockroach cert`:
//
//	raftset cert ca   [--dir certs] [--days 3650]
//	raftset cert node NAME [--dir certs] [--ip 10.0.0.1,...] [--dns n1.example,...] [--days 365]
//	raftset cert client NAME [--dir certs] [--days 365]
//
// The CA's key stays in --dir (ca.key); node and client keys are written
// beside their certificates (NAME.crt, NAME.key), readable by the owner only.
func runCert(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, certUsage)
		return 2
	}
	kind, args := args[0], args[1:]
	fs := flag.NewFlagSet("raftset cert "+kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "folder of the CA and the certificates")
	days := fs.Int("days", 0, "validity in days (CA: 3650, others: 365)")
	ips := fs.String("ip", "", "node: IP addresses the certificate is valid for, comma-separated")
	dns := fs.String("dns", "", "node: extra DNS names, comma-separated")
	var name string
	if kind == "node" || kind == "client" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "raftset cert %s: a NAME is needed\n%s", kind, certUsage)
			return 2
		}
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "raftset cert %s: unexpected argument %q\n", kind, fs.Arg(0))
		return 2
	}
	if err := writeCert(kind, name, *dir, *days, *ips, *dns, stdout); err != nil {
		fmt.Fprintf(stderr, "raftset cert %s: %v\n", kind, err)
		return 1
	}
	return 0
}

const certUsage = `usage:
  raftset cert ca   [--dir certs] [--days 3650]
  raftset cert node NAME [--dir certs] [--ip A,B] [--dns X,Y] [--days 365]
  raftset cert client NAME [--dir certs] [--days 365]
`

func writeCert(kind, name, dir string, days int, ips, dns string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	validity := func(def int) time.Duration {
		if days > 0 {
			def = days
		}
		return time.Duration(def) * 24 * time.Hour
	}
	if kind == "ca" {
		if _, err := os.Stat(caKey); err == nil {
			return fmt.Errorf("%s exists: remove it to make a new CA (every certificate it signed stops being trusted)", caKey)
		}
		ca, err := certgen.NewCA("raftset CA", validity(3650))
		if err != nil {
			return err
		}
		if err := writePair(caCert, caKey, ca); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", caCert, caKey)
		return nil
	}
	if kind != "node" && kind != "client" {
		return fmt.Errorf("unknown kind %q (ca, node, client)", kind)
	}
	var ca certgen.Pair
	var err error
	if ca.CertPEM, err = os.ReadFile(caCert); err != nil {
		return fmt.Errorf("read the CA (run `raftset cert ca --dir %s` first): %w", dir, err)
	}
	if ca.KeyPEM, err = os.ReadFile(caKey); err != nil {
		return fmt.Errorf("read the CA key: %w", err)
	}
	spec := certgen.NodeSpec{Name: name, ValidFor: validity(365), ClientOnly: kind == "client"}
	for _, s := range splitList(ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--ip: %q is not an IP address", s)
		}
		spec.IPs = append(spec.IPs, ip)
	}
	spec.DNSNames = splitList(dns)
	if kind == "node" && len(spec.IPs) == 0 {
		spec.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	pair, err := certgen.NewNode(ca, spec)
	if err != nil {
		return err
	}
	if strings.ContainsAny(name, `/\`) {
		return errors.New("NAME must not contain a path separator")
	}
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writePair(certFile, keyFile, pair); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", certFile, keyFile)
	return nil
}

func writePair(certFile, keyFile string, p certgen.Pair) error {
	if err := os.WriteFile(certFile, p.CertPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, p.KeyPEM, 0o600)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
