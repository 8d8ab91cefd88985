// Package tlsconf turns certificate files into TLS configurations for the
// two kinds of connection raftset serves: peers (mutual TLS, both sides
// verified against the cluster's CA) and clients (Redis's tls-* directives).
// Certificates are re-read on Reload without a restart: connections made
// afterwards use the new files, established ones keep theirs.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// Files names the PEM files of a node's identity and of the CA it trusts.
type Files struct {
	Cert, Key, CA string
}

// Store holds the loaded certificate and CA pool, replaced whole by Reload.
type Store struct {
	mu    sync.RWMutex
	files Files
	cert  *tls.Certificate
	pool  *x509.CertPool
}

// Load reads files. Cert and Key are required; CA is required for peers
// and for verifying clients.
func Load(files Files) (*Store, error) {
	s := &Store{files: files}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-reads the files; on any error the old ones stay in force.
func (s *Store) Reload() error {
	s.mu.RLock()
	files := s.files
	s.mu.RUnlock()
	return s.reload(files)
}

// SetFiles switches to other files (CONFIG SET tls-cert-file …) if they load.
func (s *Store) SetFiles(files Files) error { return s.reload(files) }

// Files returns the files in force.
func (s *Store) Files() Files {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.files
}

func (s *Store) reload(files Files) error {
	if files.Cert == "" || files.Key == "" {
		return errors.New("tls: a certificate file and a key file are needed")
	}
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", files.Cert, files.Key, err)
	}
	var pool *x509.CertPool
	if files.CA != "" {
		pem, err := os.ReadFile(files.CA)
		if err != nil {
			return fmt.Errorf("tls: read CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: %s holds no PEM certificate", files.CA)
		}
	}
	s.mu.Lock()
	s.files, s.cert, s.pool = files, &cert, pool
	s.mu.Unlock()
	return nil
}

func (s *Store) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cert, s.pool
}

// Options are the client-facing tls-protocols and tls-ciphersuites.
type Options struct {
	MinVersion, MaxVersion uint16   // 0: TLS 1.2 .. TLS 1.3
	CipherSuites           []uint16 // TLS 1.2 suites; nil: Go's defaults
}

// PeerServer is the server side of mutual TLS between nodes: the client's
// certificate must chain to the CA, be a node certificate (not one made for
// clients only) and, when names is not empty, carry one of them (common
// name or DNS name).
func (s *Store) PeerServer(names []string) (*tls.Config, error) {
	if _, pool := s.current(); pool == nil {
		return nil, errors.New("tls: peer TLS needs tls-ca-cert-file")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Every handshake picks up the files in force at that moment.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			if pool == nil {
				// Go would verify against the system's roots.
				return nil, errors.New("tls: no CA to verify peers against")
			}
			return &tls.Config{
				MinVersion:            tls.VersionTLS12,
				Certificates:          []tls.Certificate{*cert},
				ClientCAs:             pool,
				ClientAuth:            tls.RequireAndVerifyClientCert,
				VerifyPeerCertificate: pinNames(names),
			}, nil
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
	}, nil
}

// PeerClient is the client side of mutual TLS between nodes. Peers are
// dialled by address, which a certificate made for a compose service or a
// pod need not list, so the check is the one that matters for a private CA:
// the chain ends at the cluster's CA (and the name is pinned when names is
// not empty).
func (s *Store) PeerClient(names []string) (*tls.Config, error) {
	if _, pool := s.current(); pool == nil {
		return nil, errors.New("tls: peer TLS needs tls-ca-cert-file")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := s.current()
			return cert, nil
		},
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := s.current()
			if err := verifyChain(cs.PeerCertificates, pool, x509.ExtKeyUsageServerAuth); err != nil {
				return err
			}
			if len(names) == 0 {
				return nil
			}
			return checkNames(cs.PeerCertificates[0], names)
		},
	}, nil
}

// ClientAuth is tls-auth-clients: yes, no or optional.
type ClientAuth int

const (
	ClientAuthYes ClientAuth = iota
	ClientAuthNo
	ClientAuthOptional
)

// ParseClientAuth parses tls-auth-clients's value.
func ParseClientAuth(v string) (ClientAuth, error) {
	switch strings.ToLower(v) {
	case "yes":
		return ClientAuthYes, nil
	case "no":
		return ClientAuthNo, nil
	case "optional":
		return ClientAuthOptional, nil
	}
	return 0, fmt.Errorf("tls-auth-clients must be yes, no or optional, not %q", v)
}

// ClientServer is the TLS configuration of the client port.
func (s *Store) ClientServer(auth ClientAuth, opts Options) *tls.Config {
	return s.ClientServerFunc(func() (ClientAuth, Options) { return auth, opts })
}

// ClientServerFunc is ClientServer with settings read at every handshake, so
// that CONFIG SET tls-auth-clients, tls-protocols and tls-ciphers apply to
// the next connection without a new listener.
func (s *Store) ClientServerFunc(settings func() (ClientAuth, Options)) *tls.Config {
	get := func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := s.current()
		auth, opts := settings()
		c := &tls.Config{
			Certificates: []tls.Certificate{*cert},
			MinVersion:   opts.MinVersion,
			MaxVersion:   opts.MaxVersion,
			CipherSuites: opts.CipherSuites,
			ClientCAs:    pool,
		}
		if c.MinVersion == 0 {
			c.MinVersion = tls.VersionTLS12
		}
		switch auth {
		case ClientAuthYes:
			c.ClientAuth = tls.RequireAndVerifyClientCert
		case ClientAuthOptional:
			c.ClientAuth = tls.VerifyClientCertIfGiven
		default:
			c.ClientAuth = tls.NoClientCert
		}
		return c, nil
	}
	return &tls.Config{GetConfigForClient: get, MinVersion: tls.VersionTLS12}
}

// CheckClient refuses a client-port setup Redis refuses too: verifying
// clients (tls-auth-clients yes or optional) needs the CA that signs them,
// or Go would fall back to the system's roots and admit any public
// certificate.
func (s *Store) CheckClient(auth ClientAuth) error {
	if _, pool := s.current(); pool == nil && auth != ClientAuthNo {
		return errors.New("tls: tls-ca-cert-file is needed when tls-auth-clients is yes or optional")
	}
	return nil
}

// ClientConfig is the TLS configuration of a one-off client such as the
// healthcheck (redis-cli's --tls --cacert --cert --key): files.Cert and
// files.Key, when given, are presented to servers that ask; the server's
// chain is checked against files.CA (the system's roots when empty) but not
// its name, as redis-cli does, since a node is often probed by an address
// its certificate does not list. insecure skips the check (--insecure).
func ClientConfig(files Files, insecure bool) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	if (files.Cert == "") != (files.Key == "") {
		return nil, errors.New("tls: a client certificate needs both --cert and --key")
	}
	if files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: load %s and %s: %w", files.Cert, files.Key, err)
		}
		// Always presented, as OpenSSL clients do (Go's own choice skips a
		// certificate whose CA the server did not list, which would hide a
		// wrong certificate behind tls-auth-clients optional).
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	if insecure {
		return c, nil
	}
	var pool *x509.CertPool
	if files.CA != "" {
		pem, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, fmt.Errorf("tls: read CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", files.CA)
		}
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyChain(cs.PeerCertificates, pool, x509.ExtKeyUsageServerAuth)
	}
	return c, nil
}

// ParseProtocols parses tls-protocols ("TLSv1.2 TLSv1.3"); empty means both.
func ParseProtocols(v string) (minV, maxV uint16, err error) {
	if strings.TrimSpace(v) == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	var vs []uint16
	for _, p := range strings.Fields(v) {
		switch strings.ToLower(p) {
		case "tlsv1.2":
			vs = append(vs, tls.VersionTLS12)
		case "tlsv1.3":
			vs = append(vs, tls.VersionTLS13)
		default:
			return 0, 0, fmt.Errorf("tls-protocols: %q is not supported (TLSv1.2, TLSv1.3)", p)
		}
	}
	return slices.Min(vs), slices.Max(vs), nil
}

// ParseCipherSuites parses tls-ciphers (and tls-ciphersuites): suites
// separated by ':', by IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) or
// by OpenSSL's (ECDHE-RSA-AES128-GCM-SHA256) as redis.conf writes them. Go
// does not let TLS 1.3 suites be chosen: they are accepted and ignored.
func ParseCipherSuites(v string) ([]uint16, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	byName := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		byName[cs.Name] = cs.ID
	}
	var out []uint16
	for _, n := range strings.Split(v, ":") {
		n = strings.TrimSpace(n)
		if tls13Suites[n] {
			continue
		}
		if iana, ok := opensslNames[n]; ok {
			n = iana
		}
		id, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown or insecure cipher suite %q", n)
		}
		out = append(out, id)
	}
	return out, nil
}

// ParseTLS13Suites checks tls-ciphersuites: TLS 1.3 suite names separated by
// ':'. Go always offers all three, so the value is only validated.
func ParseTLS13Suites(v string) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, n := range strings.Split(v, ":") {
		if !tls13Suites[strings.TrimSpace(n)] {
			return fmt.Errorf("%q is not a TLS 1.3 cipher suite (%s)", n, strings.Join(slices.Sorted(maps.Keys(tls13Suites)), ", "))
		}
	}
	return nil
}

var tls13Suites = map[string]bool{
	"TLS_AES_128_GCM_SHA256": true, "TLS_AES_256_GCM_SHA384": true, "TLS_CHACHA20_POLY1305_SHA256": true,
}

// opensslNames maps OpenSSL's names of the suites Go implements securely to
// IANA's.
var opensslNames = map[string]string{
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
}

func verifyChain(certs []*x509.Certificate, pool *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("tls: the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("tls: peer certificate not signed by the cluster CA: %w", err)
	}
	return nil
}

// pinNames returns the server side's check of a peer's leaf certificate:
// it must be a node certificate, one that may also serve (a client
// certificate the same CA signed for tls-auth-clients is no peer), and name
// one of names when names is not empty.
func pinNames(names []string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		var leaf *x509.Certificate
		if len(raw) > 0 {
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			leaf = c
		}
		if leaf == nil {
			return errors.New("tls: the peer sent no certificate")
		}
		if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
			return fmt.Errorf("tls: peer certificate %q is a client certificate, not a node's", leaf.Subject.CommonName)
		}
		if len(names) == 0 {
			return nil
		}
		return checkNames(leaf, names)
	}
}

func checkNames(leaf *x509.Certificate, names []string) error {
	if leaf == nil {
		return errors.New("tls: the peer sent no certificate")
	}
	if slices.Contains(names, leaf.Subject.CommonName) {
		return nil
	}
	for _, d := range leaf.DNSNames {
		if slices.Contains(names, d) {
			return nil
		}
	}
	return fmt.Errorf("tls: peer certificate %q is not one of the pinned names", leaf.Subject.CommonName)
}
