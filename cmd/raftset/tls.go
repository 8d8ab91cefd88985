package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"raftset/cluster"
	"raftset/internal/tlsconf"
	"raftset/resp"
)

// errTLSApply is what Redis answers when a CONFIG SET of a tls-* directive
// cannot take effect; the reason goes to the log.
var errTLSApply = errors.New("Unable to update TLS configuration. Check server logs.")

// clientTLS is the client port's TLS: the certificate store and the
// settings read at every handshake, changed together by CONFIG SET.
type clientTLS struct {
	log   hclog.Logger
	store *tlsconf.Store // nil when tls-port is 0: directives are only recorded
	// keepCA: the store also authenticates peers (peerTLS), so CONFIG SET
	// must not clear the CA, or Go would check them against the system's
	// roots.
	keepCA  bool
	tlsAddr net.Addr // the TLS port's address, nil when off

	mu       sync.RWMutex
	auth     tlsconf.ClientAuth // in force
	opts     tlsconf.Options
	settings tlsSettings // as set, in force once applied
}

// tlsSettings are the tls-* directives CONFIG SET can change.
type tlsSettings struct {
	cert, key, ca, auth, protocols, ciphers, suites string
}

func settingsOf(cfg *Config) tlsSettings {
	return tlsSettings{cert: cfg.TLSCertFile, key: cfg.TLSKeyFile, ca: cfg.TLSCACertFile, auth: cfg.TLSAuthClients,
		protocols: cfg.TLSProtocols, ciphers: cfg.TLSCiphers, suites: cfg.TLSCipherSuites}
}

// parse checks settings as a whole.
func (st tlsSettings) parse() (tlsconf.ClientAuth, tlsconf.Options, error) {
	auth, err := tlsconf.ParseClientAuth(st.auth)
	if err != nil {
		return 0, tlsconf.Options{}, err
	}
	var opts tlsconf.Options
	if opts.MinVersion, opts.MaxVersion, err = tlsconf.ParseProtocols(st.protocols); err != nil {
		return 0, tlsconf.Options{}, err
	}
	if opts.CipherSuites, err = tlsconf.ParseCipherSuites(st.ciphers); err != nil {
		return 0, tlsconf.Options{}, fmt.Errorf("tls-ciphers: %w", err)
	}
	if err := tlsconf.ParseTLS13Suites(st.suites); err != nil {
		return 0, tlsconf.Options{}, fmt.Errorf("tls-ciphersuites: %w", err)
	}
	return auth, opts, nil
}

// listenClients opens the client port (unless port is 0) and the TLS port
// (when tls-port is set), served together by resp.Listeners.
func listenClients(cfg *Config, log hclog.Logger) (net.Listener, *clientTLS, error) {
	ct := &clientTLS{log: log, settings: settingsOf(cfg)}
	if cfg.TLSCluster == "yes" {
		if err := checkTLSCluster(cfg); err != nil {
			return nil, nil, err
		}
	}
	if cfg.Port == 0 && cfg.TLSPort == 0 {
		return nil, nil, errors.New("configured to not listen anywhere: port 0 needs a tls-port")
	}
	var tlsCfg *tls.Config
	if cfg.TLSPort != 0 {
		var err error
		if ct.auth, ct.opts, err = ct.settings.parse(); err != nil {
			return nil, nil, err
		}
		ct.store, err = tlsconf.Load(tlsconf.Files{Cert: cfg.TLSCertFile, Key: cfg.TLSKeyFile, CA: cfg.TLSCACertFile})
		if err != nil {
			return nil, nil, fmt.Errorf("tls-port: %w", err)
		}
		if err := ct.store.CheckClient(ct.auth); err != nil {
			return nil, nil, err
		}
		tlsCfg = ct.store.ClientServerFunc(ct.current)
	}
	var plain, secure net.Listener
	closeAll := func() {
		for _, l := range []net.Listener{plain, secure} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	var err error
	if cfg.Port != 0 {
		if plain, err = net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port))); err != nil {
			return nil, nil, fmt.Errorf("listen for clients: %w", err)
		}
	}
	if cfg.TLSPort != 0 {
		if secure, err = net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.TLSPort))); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("listen for TLS clients: %w", err)
		}
		ct.tlsAddr = secure.Addr()
	}
	ln, err := resp.Listeners(plain, secure, tlsCfg, func(addr net.Addr, err error) {
		// Anyone can connect and fail: not worth more than debug.
		log.Debug("TLS handshake failed", "addr", addr.String(), "error", err)
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return ln, ct, nil
}

func (ct *clientTLS) current() (tlsconf.ClientAuth, tlsconf.Options) {
	ct.mu.RLock()
	defer ct.mu.RUnlock()
	return ct.auth, ct.opts
}

// register serves the tls-* directives to CONFIG GET and CONFIG SET. A SET
// takes effect once per command, for all of them together (a new certificate
// comes with its key), and a failure keeps what was in force.
func (ct *clientTLS) register(srv *resp.Server) {
	apply := &resp.ConfigApply{Apply: ct.apply}
	field := func(name string, f func(*tlsSettings) *string, check func(string) error) {
		srv.RegisterConfigApplied(name,
			func() string {
				ct.mu.RLock()
				defer ct.mu.RUnlock()
				return *f(&ct.settings)
			},
			func(v string) error {
				if check != nil {
					if err := check(v); err != nil {
						return err
					}
				}
				ct.mu.Lock()
				*f(&ct.settings) = v
				ct.mu.Unlock()
				return nil
			}, apply)
	}
	field("tls-cert-file", func(s *tlsSettings) *string { return &s.cert }, nil)
	field("tls-key-file", func(s *tlsSettings) *string { return &s.key }, nil)
	field("tls-ca-cert-file", func(s *tlsSettings) *string { return &s.ca }, nil)
	field("tls-auth-clients", func(s *tlsSettings) *string { return &s.auth }, func(v string) error {
		if _, err := tlsconf.ParseClientAuth(v); err != nil {
			return errors.New("argument(s) must be one of the following: no, yes, optional")
		}
		return nil
	})
	field("tls-protocols", func(s *tlsSettings) *string { return &s.protocols }, nil)
	field("tls-ciphers", func(s *tlsSettings) *string { return &s.ciphers }, nil)
	field("tls-ciphersuites", func(s *tlsSettings) *string { return &s.suites }, nil)
}

// apply makes the settings as set the ones in force: the files are re-read
// even when their names did not change, which is how rotated certificates
// are picked up.
func (ct *clientTLS) apply() error {
	ct.mu.RLock()
	st := ct.settings
	ct.mu.RUnlock()
	auth, opts, err := st.parse()
	if err == nil && ct.keepCA && st.ca == "" {
		err = errors.New("nodes verify each other against tls-ca-cert-file, which cannot be empty")
	}
	if err == nil && ct.store != nil {
		err = ct.store.SetFiles(tlsconf.Files{Cert: st.cert, Key: st.key, CA: st.ca})
		if err == nil {
			err = ct.store.CheckClient(auth)
		}
	}
	if err != nil {
		ct.log.Warn("failed applying new TLS configuration, restoring the previous settings", "error", err)
		return errTLSApply
	}
	ct.mu.Lock()
	ct.auth, ct.opts = auth, opts
	ct.mu.Unlock()
	if ct.store != nil {
		ct.log.Info("TLS configuration applied", "cert", st.cert, "auth-clients", st.auth)
	}
	return nil
}

// checkTLSCluster refuses a tls-cluster yes that cannot work, before
// anything listens.
func checkTLSCluster(cfg *Config) error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"tls-cert-file", cfg.TLSCertFile}, {"tls-key-file", cfg.TLSKeyFile}, {"tls-ca-cert-file", cfg.TLSCACertFile},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tls-cluster yes: nodes authenticate each other with the TLS certificate files; set %s", strings.Join(missing, ", "))
	}
	if cfg.TLSPort == 0 {
		return errors.New("tls-cluster yes needs a tls-port: nodes call each other's client port over TLS")
	}
	return nil
}

// peerNames parses tls-cluster-peer-names.
func peerNames(v string) []string { return splitList(v) }

// peerTLS returns the TLS between nodes, read from the client port's
// certificate store (so CONFIG SET of the files reaches new peer
// connections): with tls-cluster yes, mutual TLS on the Raft port and the
// client side of calls to other nodes' TLS ports; with port 0 and a
// tls-port (no tls-cluster), only the latter, since the other nodes'
// published addresses are TLS ports. Otherwise nil, nil.
func (ct *clientTLS) peerTLS(cfg *Config) (*cluster.PeerTLS, *tls.Config, error) {
	names := peerNames(cfg.TLSClusterPeerNames)
	switch {
	case cfg.TLSCluster == "yes":
		srv, err := ct.store.PeerServer(names)
		if err != nil {
			return nil, nil, fmt.Errorf("tls-cluster: %w", err)
		}
		cli, err := ct.store.PeerClient(names)
		if err != nil {
			return nil, nil, fmt.Errorf("tls-cluster: %w", err)
		}
		ct.keepCA = true
		return &cluster.PeerTLS{Server: srv, Client: cli}, cli, nil
	case cfg.Port == 0 && ct.store != nil:
		if cfg.TLSCACertFile == "" {
			if cfg.Peers != "" || cfg.Join != "" {
				return nil, nil, errors.New("port 0: the other nodes are reached on their TLS port, and tls-ca-cert-file is needed to verify them")
			}
			return nil, nil, nil // a single node calls no one
		}
		cli, err := ct.store.PeerClient(names)
		if err != nil {
			return nil, nil, err
		}
		ct.keepCA = true
		return nil, cli, nil
	}
	return nil, nil, nil
}
