package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/netutil"

	"github.com/agentbox/agentbox/chat"
)

// Defaults.
const (
	// DefaultMaxConns bounds the connections a sandbox may hold open to
	// the proxy at once.
	DefaultMaxConns = 256
	// DefaultDialTimeout bounds one connection attempt to a host.
	DefaultDialTimeout = 10 * time.Second
)

// Config configures a Proxy.
type Config struct {
	// Policy says which hosts and ports the sandbox may reach.
	Policy Policy
	// Secrets are put into requests to their hosts. They need CA.
	Secrets []Secret
	// Scrub are more values to keep out of what comes back, besides the
	// secrets' (values under MinSecretLen are ignored).
	Scrub []string
	// CA signs the certificates the proxy presents for the hosts of
	// Secrets (nil without secrets).
	CA *CA
	// RootCAs are the roots the proxy trusts when it connects to a host
	// whose TLS it terminates (nil: the system's roots). Tests set their
	// own CA here; there is no way to turn verification off.
	RootCAs *x509.CertPool
	// Resolver looks up names (nil: net.DefaultResolver).
	Resolver Resolver
	// Logger gets a line per refused request and, at debug level, per
	// forwarded one: hosts, methods, statuses and sizes, never header
	// values or URLs (nil discards).
	Logger *slog.Logger
	// OnDeny is told about refused requests: once per host and reason, so
	// an agent retrying in a loop does not flood it. It must not block.
	OnDeny func(*Denial)
	// MaxConns bounds the sandbox's open connections to the proxy
	// (0: DefaultMaxConns).
	MaxConns int
	// DialTimeout bounds a connection to a host (0: DefaultDialTimeout).
	DialTimeout time.Duration
}

// Proxy is one sandbox's egress proxy: an HTTP forward proxy for plain
// HTTP requests (absolute-form) and CONNECT tunnels. Tunnels to the hosts
// of a secret are terminated with the CA's certificates so the secret can
// be put into their credential headers; every other tunnel passes bytes
// untouched. Every response the proxy can read (plain HTTP, terminated
// tunnels) comes back with the secrets' values scrubbed from its headers,
// body and trailers. Methods are safe for concurrent use.
type Proxy struct {
	cfg     Config
	log     *slog.Logger
	secrets []*Secret
	scrub   *Scrubber

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	front     *http.Server  // CONNECT and plain HTTP, on Serve's listener
	inner     *http.Server  // requests inside terminated TLS
	innerLn   *chanListener // feeds inner
	innerOnce sync.Once
	innerConn sync.Map               // *tls.Conn -> innerConn
	fwd       *httputil.ReverseProxy // forwards both
	tr        *http.Transport
	// dial connects to a checked address (a net.Dialer; tests replace it).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	meter  meter
	notice sync.Map // "host reason" -> struct{}: OnDeny told already

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
}

// New creates a proxy. It starts nothing until Serve.
func New(cfg Config) (*Proxy, error) {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	for name, ip := range cfg.Policy.Hosts {
		if err := checkRuleAddr(ip); err != nil {
			return nil, fmt.Errorf("egress hosts %s: %w", name, err)
		}
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg, log: lg, tunnels: map[net.Conn]struct{}{}}
	p.dial = (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext
	values := slices.Clone(cfg.Scrub)
	for i := range cfg.Secrets {
		s := cfg.Secrets[i]
		if err := s.check(); err != nil {
			return nil, err
		}
		p.secrets = append(p.secrets, &s)
		values = append(values, s.Value)
	}
	p.scrub = NewScrubber(values...)
	if len(p.secrets) > 0 && cfg.CA == nil {
		return nil, errors.New("egress: secrets need a CA")
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.tr = &http.Transport{
		Proxy:                 nil, // never the host's own proxy settings
		DialContext:           p.dialContext,
		TLSClientConfig:       newClientTLS(cfg.RootCAs),
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
		// The proxy asks for gzip itself and decodes what comes back, to
		// scrub it (identityBody).
		DisableCompression: true,
	}
	discard := log.New(io.Discard, "", 0)
	p.fwd = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      p.tr,
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.forwardError,
		ErrorLog:       discard,
	}
	base := func(net.Listener) context.Context { return p.ctx }
	p.front = &http.Server{Handler: http.HandlerFunc(p.serveFront), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: discard, BaseContext: base}
	p.innerLn = newChanListener()
	p.inner = &http.Server{Handler: http.HandlerFunc(p.serveInner), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: discard, BaseContext: base,
		// Inside a terminated tunnel the proxy offers HTTP/1.1 only.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if v, ok := p.innerConn.Load(c); ok {
				return context.WithValue(ctx, tunnelKey{}, v.(innerConn).target)
			}
			return ctx
		},
		ConnState: p.innerState,
	}
	return p, nil
}

// Serve answers the sandbox's connections on ln until Close. It returns
// nil after Close.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil
	}
	p.innerOnce.Do(func() { p.wg.Go(func() { _ = p.inner.Serve(p.innerLn) }) })
	p.mu.Unlock()
	err := p.front.Serve(netutil.LimitListener(ln, p.cfg.MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the proxy: the listener, every tunnel and request in
// flight, and idle connections to hosts. It waits for its goroutines until
// ctx ends, and is idempotent.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	errs := []error{p.front.Close(), p.inner.Close(), p.innerLn.Close()}
	p.tr.CloseIdleConnections()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("egress proxy close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// Usage is the traffic so far, per host, sorted by host.
func (p *Proxy) Usage() []chat.HostUsage { return p.meter.usage() }

// track registers a connection to close on Close; it reports false (and
// closes c) when the proxy is closed already.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.tunnels[c] = struct{}{}
	return true
}

// spawn runs f in a goroutine Close waits for; it reports false when the
// proxy is closed (f does not run).
func (p *Proxy) spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.tunnels, c)
	p.mu.Unlock()
	c.Close()
}

// serveFront handles what the sandbox sends the proxy: CONNECT, or a plain
// HTTP request in absolute form.
func (p *Proxy) serveFront(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		why := "this is the sandbox's HTTP proxy: it takes absolute http:// URLs and CONNECT for https"
		if r.URL.Scheme == "https" {
			why = "https:// URLs go through the proxy with CONNECT (HTTPS_PROXY does this)"
		}
		p.deny(w, r, &Denial{Reason: ReasonBadRequest, Why: why})
		return
	}
	t, err := ParseTarget(r.URL.Host, PortHTTP)
	if err != nil {
		p.deny(w, r, &Denial{Reason: ReasonBadRequest, Why: "bad host in the URL: " + err.Error()})
		return
	}
	if d := p.cfg.Policy.Check(t); d != nil {
		p.deny(w, r, d)
		return
	}
	p.forward(w, r, t, false)
}

// connect opens a tunnel to an allowed host: terminated when a secret may
// go to the host, passed through untouched otherwise.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	t, err := ParseTarget(r.Host, 0)
	if err != nil {
		p.deny(w, r, &Denial{Reason: ReasonBadRequest, Why: "bad CONNECT target: " + err.Error()})
		return
	}
	if d := p.cfg.Policy.Check(t); d != nil {
		p.deny(w, r, d)
		return
	}
	if p.terminates(t) {
		p.terminate(w, r, t)
		return
	}
	up, err := p.dialContext(r.Context(), "tcp", t.String())
	if err != nil {
		p.forwardError(w, r, err)
		return
	}
	if !p.track(up) {
		return
	}
	client, ok := p.hijack(w)
	if !ok {
		p.untrack(up)
		return
	}
	if !p.spawn(func() { p.tunnel(client, up, t) }) {
		p.untrack(client)
		p.untrack(up)
	}
}

// hijack takes the sandbox's connection over, answers 200 and tracks it.
func (p *Proxy) hijack(w http.ResponseWriter) (*bufConn, bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "agentbox egress proxy: this connection cannot be tunnelled", http.StatusInternalServerError)
		return nil, false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, false
	}
	client := &bufConn{Conn: c, r: brw.Reader}
	if !p.track(client) {
		return nil, false
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.untrack(client)
		return nil, false
	}
	return client, true
}

// tunnel relays bytes between the sandbox and a host until both are done.
func (p *Proxy) tunnel(client, up net.Conn, t Target) {
	start := time.Now()
	p.meter.host(t.String()).requests.Add(1)
	p.log.Debug("bridge egress tunnel", "host", t.String())
	defer p.untrack(client)
	defer p.untrack(up)
	relay(client, up)
	p.log.Debug("bridge egress tunnel closed", "host", t.String(), "duration", time.Since(start))
}

// dialContext connects to an allowed host at an address it checked: the
// policy is asked again (every path to a host comes through here), the
// name is resolved once, special-purpose addresses are dropped unless the
// policy names them, and exactly the checked addresses are dialed.
func (p *Proxy) dialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	t, err := ParseTarget(addr, 0)
	if err != nil {
		return nil, &Denial{Reason: ReasonBadRequest, Why: "bad host: " + err.Error()}
	}
	if d := p.cfg.Policy.Check(t); d != nil {
		return nil, d
	}
	addrs, d := p.cfg.Policy.Addresses(ctx, p.cfg.Resolver, t)
	if d != nil {
		return nil, d
	}
	var errs []error
	for _, a := range addrs {
		c, err := p.dial(ctx, "tcp", netip.AddrPortFrom(a, t.Port).String())
		if err == nil {
			return &countingConn{Conn: c, h: p.meter.host(t.String())}, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to %s: %w", t, errors.Join(errs...))
}

// deny answers a refused request and reports it.
func (p *Proxy) deny(w http.ResponseWriter, r *http.Request, d *Denial) {
	p.report(r, d)
	if r.Method == http.MethodConnect && d.writeConnect(w) {
		return
	}
	d.write(w)
}

// report counts, logs and (once per host and reason) passes on a denial;
// repeats are logged at debug level only, so an agent retrying in a loop
// floods neither the log nor the client.
func (p *Proxy) report(r *http.Request, d *Denial) {
	host := ""
	if d.Target.Port != 0 {
		host = d.Target.String()
		p.meter.host(host).denied.Add(1)
	}
	level := slog.LevelWarn
	_, told := p.notice.LoadOrStore(host+" "+d.Reason, struct{}{})
	if told {
		level = slog.LevelDebug
	}
	p.log.Log(p.ctx, level, "bridge egress denied", "method", r.Method, "host", host, "reason", d.Reason, "why", d.Why)
	if !told && p.cfg.OnDeny != nil {
		p.cfg.OnDeny(d)
	}
}

// tunnelKey carries the Target of a terminated tunnel into its requests.
type tunnelKey struct{}

// forwardKey carries what rewrite needs to know of a request.
type forwardKey struct{}

type forwardInfo struct {
	target  Target
	tls     bool
	secrets []*Secret
	start   time.Time
}

// forward sends r to t through the shared transport. Over TLS the
// proxy terminated, the secrets of t go into the headers they name; a
// request that carries a placeholder elsewhere, or would carry a value
// into a protocol upgrade, is refused.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t Target, tls bool) {
	info := &forwardInfo{target: t, tls: tls, start: time.Now()}
	if tls {
		for _, s := range p.secrets {
			if s.applies(t) {
				info.secrets = append(info.secrets, s)
			}
		}
		if s, where := misplaced(r, info.secrets); s != nil {
			p.deny(w, r, &Denial{Target: t, Reason: ReasonSecretRefused,
				Why:  fmt.Sprintf("the request carries the placeholder of secret %s in %s; the proxy puts its value only into the %s header of requests to its hosts, and sends no placeholder elsewhere", s.Name, where, strings.Join(s.Headers, " or ")),
				Hint: fmt.Sprintf("send $%s in the %s header only (another header the host reads it from goes into the secret's \"headers\" in sandbox.secrets)", s.Name, s.Headers[0])})
			return
		}
		if httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") && carries(r.Header, info.secrets) {
			p.deny(w, r, &Denial{Target: t, Reason: ReasonSecretRefused,
				Why: "the request upgrades the connection (" + r.Header.Get("Upgrade") + ") with a secret in it: what comes back over an upgraded connection cannot be scrubbed, so the proxy does not send a secret into one"})
			return
		}
	}
	p.meter.host(t.String()).requests.Add(1)
	p.fwd.ServeHTTP(scrubWriter{ResponseWriter: w, s: p.scrub}, r.WithContext(context.WithValue(r.Context(), forwardKey{}, info)))
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	info := pr.In.Context().Value(forwardKey{}).(*forwardInfo)
	out := pr.Out
	// What comes back is read to be scrubbed: gzip (decoded by
	// identityBody) or nothing. A range of an encoded body could not be
	// decoded. Without secrets, bodies pass as the sandbox and the host
	// encode them.
	switch {
	case p.scrub.Empty():
	case out.Header.Get("Range") != "":
		out.Header.Set("Accept-Encoding", "identity")
	default:
		out.Header.Set("Accept-Encoding", "gzip")
	}
	if info.tls {
		out.URL.Scheme = "https"
		out.URL.Host = info.target.String()
		out.Host = pr.In.Host
		if used := inject(out.Header, info.secrets); len(used) > 0 {
			p.log.Debug("bridge egress secrets", "host", info.target.String(), "secrets", used)
		}
	}
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	info := resp.Request.Context().Value(forwardKey{}).(*forwardInfo)
	// Any secret, not only those sent: a value must not come back into the
	// sandbox whichever way it got to the host.
	p.scrub.Header(resp.Header)
	p.log.Debug("bridge egress request", "method", resp.Request.Method, "host", info.target.String(),
		"status", resp.StatusCode, "duration", time.Since(info.start))
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgrade carries no secret (forward refused it); its bytes
		// pass as they are.
		return nil
	}
	if p.scrub.Empty() {
		return nil
	}
	if err := identityBody(resp); err != nil {
		return &unreadable{err}
	}
	resp.Body = p.scrub.Reader(resp.Body, func() { p.scrub.Header(resp.Trailer) })
	return nil
}

// unreadable is a response the proxy refuses because it cannot scrub it.
type unreadable struct{ error }

// scrubWriter scrubs the headers of informational (1xx) responses, which
// the reverse proxy writes straight to the sandbox.
type scrubWriter struct {
	http.ResponseWriter
	s *Scrubber
}

func (w scrubWriter) WriteHeader(code int) {
	if code < http.StatusOK {
		w.s.Header(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// upgrades).
func (w scrubWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// forwardError answers a request that could not be forwarded: a denial
// found when dialing (the address check), or the host out of reach.
func (p *Proxy) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	var d *Denial
	if errors.As(err, &d) {
		p.deny(w, r, d)
		return
	}
	if r.Context().Err() != nil {
		return // the sandbox went away, or the session ended
	}
	host := r.Host
	if info, ok := r.Context().Value(forwardKey{}).(*forwardInfo); ok {
		host = info.target.String()
	}
	p.log.Warn("bridge egress upstream", "host", host, "err", err)
	msg := "agentbox egress proxy: " + host + " could not be reached: " + err.Error() + "\n"
	if u, ok := err.(*unreadable); ok {
		msg = "agentbox egress proxy: the answer of " + host + " was refused: " + u.Error() + "\n"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, msg)
}
