package main

import (
	"crypto/x509"
	"encoding/pem"
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
//	raftset cert init [--dir certs] [--ca-dir DIR] [--ip ...] [--dns ...] NAME...
//
// The CA's key stays in --ca-dir (default --dir; ca.key); node and client
// keys are written beside their certificates (NAME.crt, NAME.key), readable
// by the owner only. init is the one-shot step of a compose file or a
// deployment script: it makes the CA unless --ca-dir holds one, copies
// ca.crt into --dir, and a node certificate for each NAME (also its DNS
// name) unless a valid one the CA signed is there, so it can run at every
// start; with --ca-dir elsewhere, the nodes' volume never holds the CA key.
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
	caDir := fs.String("ca-dir", "", "folder of the CA (default --dir)")
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
	if *caDir == "" {
		*caDir = *dir
	}
	if kind == "init" {
		if fs.NArg() == 0 {
			fmt.Fprintf(stderr, "raftset cert init: at least one node NAME is needed\n%s", certUsage)
			return 2
		}
		if err := initCerts(*dir, *caDir, *days, *ips, *dns, fs.Args(), stdout); err != nil {
			fmt.Fprintf(stderr, "raftset cert init: %v\n", err)
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "raftset cert %s: unexpected argument %q\n", kind, fs.Arg(0))
		return 2
	}
	if err := writeCert(kind, name, *dir, *caDir, *days, *ips, *dns, stdout); err != nil {
		fmt.Fprintf(stderr, "raftset cert %s: %v\n", kind, err)
		return 1
	}
	return 0
}

const certUsage = `usage:
  raftset cert ca   [--dir certs] [--days 3650]
  raftset cert node NAME [--dir certs] [--ip A,B] [--dns X,Y] [--days 365]
  raftset cert client NAME [--dir certs] [--days 365]
  raftset cert init [--dir certs] [--ca-dir DIR] [--ip A,B] [--dns X,Y] NAME...
`

func writeCert(kind, name, dir, caDir string, days int, ips, dns string, stdout io.Writer) error {
	for _, d := range []string{dir, caDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	caCert, caKey := filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key")
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
		return fmt.Errorf("read the CA (run `raftset cert ca --dir %s` first): %w", caDir, err)
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

// initCerts makes what is missing of a CA and node certificates for names.
func initCerts(dir, caDir string, days int, ips, dns string, names []string, stdout io.Writer) error {
	if _, err := os.Stat(filepath.Join(caDir, "ca.key")); errors.Is(err, os.ErrNotExist) {
		if err := writeCert("ca", "", caDir, caDir, days, "", "", stdout); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(caDir, "ca.crt"))
	if err != nil {
		return fmt.Errorf("read the CA: %w", err)
	}
	if filepath.Clean(dir) != filepath.Clean(caDir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o644); err != nil {
			return err
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("ca.crt holds no PEM certificate")
	}
	for _, name := range names {
		if signedBy(filepath.Join(dir, name+".crt"), pool) {
			fmt.Fprintf(stdout, "kept %s\n", filepath.Join(dir, name+".crt"))
			continue
		}
		if err := writeCert("node", name, dir, caDir, days, ips, dns, stdout); err != nil {
			return err
		}
	}
	return nil
}

// signedBy reports whether file holds a node certificate pool's CA signed
// that has not expired.
func signedBy(file string, pool *x509.CertPool) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return false
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}
