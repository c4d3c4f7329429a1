package bridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// The bridge across the network: where a sandbox cannot share Unix sockets
// with the server (a Kubernetes pod on another node), the in-sandbox side
// reaches the server over TCP instead. One Gateway per server listens on a
// TCP address with mutual TLS under a CA the server generates at start
// (kept in memory only, so a restart revokes every certificate it issued).
// Each session gets a client certificate whose common name is the session's
// id and a token of its own; a connection presents both, plus the channel it
// wants (tools, model, egress, mcp) in a one-line preamble, and is handed to that
// session's server for the channel, exactly as a connection to its socket
// would be. The sandbox gets its credentials in its environment, which
// every exec carries (never the pod spec), and needs no mount but the
// agentbox binary.

// Channels of a session on the gateway: the names of the sockets they
// replace.
const (
	channelTools  = "tools.sock"
	channelModel  = "model.sock"
	channelEgress = "egress.sock"
)

// gatewayPreamble starts the line a guest sends after the TLS handshake:
// "agentbox-bridge/1 CHANNEL TOKEN\n".
const gatewayPreamble = "agentbox-bridge/1"

// gatewayHandshakeTimeout bounds the TLS handshake and the preamble.
const gatewayHandshakeTimeout = 10 * time.Second

// gatewayMaxPending bounds the connections in their handshake at once:
// more are closed at once, so a flood of connections that never finish
// one holds at most this many goroutines and TLS states (each for at most
// gatewayHandshakeTimeout). Routed connections are bounded by their
// session (Options.Connections, ServerLimits).
const gatewayMaxPending = 256

// GatewayOptions configure a Gateway.
type GatewayOptions struct {
	// Listen is the TCP address to listen on (":41890", "10.0.0.5:41890",
	// "127.0.0.1:0").
	Listen string
	// Address is the host:port sandboxes dial: this server's own address
	// on the pod network (its pod IP; a Service would spread connections
	// over replicas that do not hold the session). "" = the listener's
	// address, which must then not be a wildcard.
	Address string
	// Dir, when set, replaces Options.Dir for the sessions on this
	// gateway: the folder of their files (the execute-only copy of the
	// agentbox binary beside it, the egress CA), which sandboxes mount.
	// Pods on other nodes see it only on a volume they share with the
	// server (the workspace claim). No socket lives there, so its path
	// may be long.
	Dir string
	// Logger receives refused connections (nil: discard).
	Logger *slog.Logger
}

// Gateway is a server's TLS endpoint for the bridges of its sessions. Safe
// for concurrent use.
type Gateway struct {
	ln      net.Listener
	addr    string
	dir     string
	log     *slog.Logger
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	caPEM   []byte
	mu      sync.Mutex
	byID    map[string]*gatewaySession
	closed  bool
	wg      sync.WaitGroup
	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
}

// gatewaySession is one session's registration: its token and the
// listeners its servers accept on.
type gatewaySession struct {
	token     string
	listeners map[string]*chanListener
}

// NewGateway generates the server's CA and a serving certificate for
// opts.Address, and starts listening.
func NewGateway(opts GatewayOptions) (*Gateway, error) {
	if opts.Listen == "" {
		return nil, errors.New("bridge gateway: no listen address")
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("bridge gateway: listen: %w", err)
	}
	addr := opts.Address
	if addr == "" {
		addr = ln.Addr().String()
		if h, _, _ := net.SplitHostPort(addr); net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("bridge gateway: listening on %s, a wildcard address: set the address sandboxes dial (the server's pod IP and port)", addr)
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		ln.Close()
		return nil, fmt.Errorf("bridge gateway: address %q: want host:port", addr)
	}
	if port == "0" { // the port the listener got
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		addr = net.JoinHostPort(host, port)
	}
	g := &Gateway{ln: ln, addr: addr, dir: opts.Dir, log: opts.Logger, byID: map[string]*gatewaySession{}, conns: map[net.Conn]struct{}{}}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := g.makeCA(); err != nil {
		ln.Close()
		return nil, err
	}
	serving, err := g.issue(pkix.Name{CommonName: "agentbox bridge gateway"}, host, x509.ExtKeyUsageServerAuth, time.Now().AddDate(1, 0, 0))
	if err != nil {
		ln.Close()
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(g.ca)
	tlsCfg := &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}
	g.wg.Go(func() { g.serve(tls.NewListener(ln, tlsCfg)) })
	return g, nil
}

// Address is what sandboxes dial (host:port).
func (g *Gateway) Address() string { return g.addr }

// Dir is GatewayOptions.Dir ("": the sessions' own Options.Dir).
func (g *Gateway) Dir() string { return g.dir }

// ListenAddr is the address the gateway listens on.
func (g *Gateway) ListenAddr() string { return g.ln.Addr().String() }

// Close stops listening and ends every connection; sessions still
// registered get no more connections.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	for _, gs := range g.byID {
		for _, l := range gs.listeners {
			l.Close()
		}
	}
	g.mu.Unlock()
	err := g.ln.Close()
	g.connsMu.Lock()
	for c := range g.conns {
		c.Close()
	}
	g.connsMu.Unlock()
	g.wg.Wait()
	return err
}

func (g *Gateway) makeCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("bridge gateway CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agentbox bridge CA " + randomName(4)},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("bridge gateway CA: %w", err)
	}
	if g.ca, err = x509.ParseCertificate(der); err != nil {
		return fmt.Errorf("bridge gateway CA: %w", err)
	}
	g.caKey = key
	g.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

// issue signs a leaf certificate for subject with a new key; host (an IP
// or DNS name) goes into the SANs of a serving certificate.
func (g *Gateway) issue(subject pkix.Name, host string, use x509.ExtKeyUsage, notAfter time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("bridge gateway certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{use},
	}
	if host != "" {
		if ip := net.ParseIP(host); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{host}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, g.ca, &key.PublicKey, g.caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("bridge gateway certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// register gives a session an id, a token, a client certificate valid
// until notAfter and a listener per channel; the credentials are what the
// sandbox needs to connect.
func (g *Gateway) register(channels []string, notAfter time.Time) (id string, creds *Credentials, err error) {
	id = randomName(12)
	cert, err := g.issue(pkix.Name{CommonName: id}, "", x509.ExtKeyUsageClientAuth, notAfter)
	if err != nil {
		return "", nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return "", nil, fmt.Errorf("bridge gateway key: %w", err)
	}
	gs := &gatewaySession{token: "agentbox-bridge-" + randomName(24), listeners: map[string]*chanListener{}}
	for _, ch := range channels {
		gs.listeners[ch] = newChanListener(g.ln.Addr())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return "", nil, errors.New("bridge gateway closed")
	}
	g.byID[id] = gs
	return id, &Credentials{
		Address: g.addr,
		Token:   gs.token,
		CA:      string(g.caPEM),
		Cert:    string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})),
		Key:     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
	}, nil
}

// listener is the session's listener for a channel.
func (g *Gateway) listener(id, channel string) net.Listener {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[id].listeners[channel]
}

// unregister refuses the session's later connections and closes its
// listeners.
func (g *Gateway) unregister(id string) {
	g.mu.Lock()
	gs := g.byID[id]
	delete(g.byID, id)
	g.mu.Unlock()
	if gs != nil {
		for _, l := range gs.listeners {
			l.Close()
		}
	}
}

func (g *Gateway) serve(ln net.Listener) {
	pending := make(chan struct{}, gatewayMaxPending)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case pending <- struct{}{}:
		default:
			g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", "too many connections in their handshake")
			c.Close()
			continue
		}
		g.connsMu.Lock()
		g.conns[c] = struct{}{}
		g.connsMu.Unlock()
		g.wg.Go(func() {
			if !g.route(c.(*tls.Conn)) {
				c.Close()
			}
			<-pending
			g.connsMu.Lock()
			delete(g.conns, c)
			g.connsMu.Unlock()
		})
	}
}

// route checks a connection's certificate, channel and token and hands it
// to the session's listener; false means it was refused.
func (g *Gateway) route(c *tls.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(gatewayHandshakeTimeout))
	ctx, cancel := context.WithTimeout(context.Background(), gatewayHandshakeTimeout)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", "TLS handshake: "+err.Error())
		return false
	}
	certs := c.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return false
	}
	id := certs[0].Subject.CommonName
	line, err := readPreamble(c)
	if err != nil {
		g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", err.Error())
		return false
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != gatewayPreamble {
		g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", "bad preamble")
		return false
	}
	g.mu.Lock()
	gs := g.byID[id]
	g.mu.Unlock()
	if gs == nil || subtle.ConstantTimeCompare([]byte(f[2]), []byte(gs.token)) != 1 {
		g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", "unknown session or bad token")
		return false
	}
	l := gs.listeners[f[1]]
	if l == nil {
		g.log.Warn("bridge gateway: refused", "remote", c.RemoteAddr().String(), "reason", "no channel "+f[1])
		return false
	}
	_ = c.SetDeadline(time.Time{})
	// Not a *tls.Conn to the servers: the handshake is done, and
	// net/http must not see TLS to negotiate.
	return l.push(gatewayConn{c})
}

// readPreamble reads one line of at most 256 bytes, byte by byte so that
// nothing after it is consumed.
func readPreamble(r io.Reader) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) < 256 {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("preamble: %w", err)
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("preamble too long")
}

// gatewayConn is a routed connection: a net.Conn with CloseWrite.
type gatewayConn struct{ *tls.Conn }

// chanListener is a net.Listener fed by the gateway.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to Accept; false when the listener is closed.
func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// register puts the session on its gateway with the channels it serves.
func (s *Session) register(tools, model bool) error {
	var channels []string
	if tools {
		channels = append(channels, channelTools)
	}
	if model {
		channels = append(channels, channelModel)
	}
	if s.opts.Egress != nil {
		channels = append(channels, channelEgress)
	}
	if s.opts.RemoteMCP {
		channels = append(channels, channelRemoteMCP)
	}
	if len(s.opts.Ports) > 0 {
		channels = append(channels, channelPorts)
	}
	notAfter := time.Now().Add(caLifetime)
	if !s.opts.Deadline.IsZero() {
		notAfter = s.opts.Deadline.Add(caGrace)
	}
	id, creds, err := s.opts.Gateway.register(channels, notAfter)
	if err != nil {
		return err
	}
	s.gwID, s.creds = id, creds
	return nil
}

// guestSocket is how the sandbox names a channel: GatewayPrefix+channel
// across the network, else the socket's path.
func (s *Session) guestSocket(channel, path string) string {
	if s.gwID != "" {
		return GatewayPrefix + channel
	}
	return path
}

// SandboxEnv is the environment the sandbox needs besides the CLI's: with
// a gateway, the session's credentials in EnvCredentials (a runtime must
// not write it where others read it, such as a pod spec); else empty.
func (s *Session) SandboxEnv() map[string]string {
	if s.creds == nil {
		return map[string]string{}
	}
	return map[string]string{EnvCredentials: s.creds.encode()}
}

// Networked reports whether the session's bridge runs over the network.
func (s *Session) Networked() bool { return s.gwID != "" }
