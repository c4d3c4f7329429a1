package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/bridge/egress/egresstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers with the host it was asked for and echoes the request's
// credential in a header, as a careless API might; under /echo/ it echoes
// the whole request every way a host might (egresstest.Echo).
func echo(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/echo/") {
		egresstest.Echo(w, r)
		return
	}
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	fmt.Fprintf(w, "hello from %s", r.Host)
}

// last is the last request a server got.
func last(t testing.TB, rec *egresstest.Recorder) egresstest.Request {
	t.Helper()
	reqs := rec.Requests()
	if len(reqs) == 0 {
		t.Fatal("the server got no request")
	}
	return reqs[len(reqs)-1]
}

// fixture is a proxy on a Unix socket with loopback servers behind names.
type fixture struct {
	pki      *egresstest.PKI
	proxy    *Proxy
	sock     string
	secret   Secret
	tlsPort  string // of the HTTPS server, for api.test, plain.test, ...
	httpPort string // of the plain HTTP server
	seen     *egresstest.Recorder
	res      *fakeResolver

	mu     sync.Mutex
	denied []*Denial
}

const realValue = "real-secret-value-4f9a1c"

func rule(t testing.TB, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newFixture(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	f := &fixture{pki: egresstest.NewPKI(t)}
	tlsSrv := egresstest.NewServer(t, f.pki, http.HandlerFunc(echo), "api.test", "plain.test", "unmapped.test", "other.test")
	f.seen = tlsSrv.Recorder
	httpSrv := httptest.NewServer(f.seen.Wrap(http.HandlerFunc(echo)))
	t.Cleanup(httpSrv.Close)
	f.tlsPort = strconv.Itoa(tlsSrv.Port)
	_, f.httpPort, _ = net.SplitHostPort(httpSrv.Listener.Addr().String())

	loop := netip.MustParseAddr("127.0.0.1")
	f.res = &fakeResolver{answers: map[string][]netip.Addr{"private.test": {loop}}}
	f.secret = Secret{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: realValue,
		Hosts: []Rule{rule(t, "api.test:"+f.tlsPort), rule(t, "api.test:"+f.httpPort), rule(t, "unmapped.test:"+f.tlsPort)}}
	ca, err := NewCA(f.secret.Hosts, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Policy: Policy{
			Allow: []Rule{rule(t, "api.test:"+f.tlsPort), rule(t, "api.test:"+f.httpPort), rule(t, "plain.test:"+f.tlsPort),
				rule(t, "plain.test:"+f.httpPort), rule(t, "private.test:"+f.tlsPort), rule(t, "private.test:"+f.httpPort),
				rule(t, "unmapped.test:"+f.tlsPort)},
			Hosts: map[string]netip.Addr{"api.test": loop, "plain.test": loop},
		},
		Secrets:  []Secret{f.secret},
		CA:       ca,
		RootCAs:  f.pki.Pool(),
		Resolver: f.res,
		OnDeny: func(d *Denial) {
			f.mu.Lock()
			f.denied = append(f.denied, d)
			f.mu.Unlock()
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = p
	dir, err := os.MkdirTemp("", "egress")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f.sock = filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return f
}

// client is what a tool in the sandbox does with HTTP(S)_PROXY set: CONNECT
// for https, absolute URLs for http. It trusts the system-like roots (the
// test CA) and the proxy's CA, like the sandbox's bundle.
func (f *fixture) client() *http.Client {
	roots := f.pki.Pool()
	roots.AppendCertsFromPEM(f.proxy.cfg.CA.CertPEM())
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", f.sock)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}}
}

func (f *fixture) do(t *testing.T, method, rawURL, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := f.client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// rawConnect sends CONNECT over a fresh connection and returns the
// response (its body read) and the connection.
func (f *fixture) rawConnect(t *testing.T, target string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body := ""
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp, body, c, br
}

func TestSecretOnlyReachesItsHosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ph := f.secret.Placeholder

	// To the secret's host over HTTPS: the proxy terminates TLS and puts
	// the value into the credential header, and only there.
	resp, body := f.do(t, http.MethodPost, "https://api.test:"+f.tlsPort+"/v1/items?q=1",
		`{"note":"`+ph+`"}`, http.Header{"Authorization": {"Bearer " + ph}})
	if resp.StatusCode != http.StatusOK || body != "hello from api.test:"+f.tlsPort {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	got := last(t, f.seen)
	if got.Header.Get("Authorization") != "Bearer "+realValue {
		t.Errorf("host got Authorization %q; want the real value", got.Header.Get("Authorization"))
	}
	if !strings.Contains(got.Body, ph) || strings.Contains(got.Body, realValue) {
		t.Errorf("the body must keep the placeholder: %q", got.Body)
	}
	if echo := resp.Header.Get("X-Echo"); echo != "Bearer "+strings.Repeat("*", len(realValue)) {
		t.Errorf("a response header echoing the value reached the sandbox as %q; want it masked", echo)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.Contains(issuer, "agentbox egress") {
		t.Errorf("the secret's host was not terminated by the proxy (issuer %q)", issuer)
	}

	// Basic credentials (git with a token in the URL, a credential helper).
	req, _ := http.NewRequest(http.MethodGet, "https://api.test:"+f.tlsPort+"/repo.git/info/refs", nil)
	req.SetBasicAuth("x-access-token", ph)
	r2, err := f.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+realValue))
	if got := last(t, f.seen).Header.Get("Authorization"); got != want {
		t.Errorf("Basic credentials = %q, want the real value inside", got)
	}

	// Another allowed host: tunnelled untouched, the placeholder stays.
	resp, _ = f.do(t, http.MethodGet, "https://plain.test:"+f.tlsPort+"/", "", http.Header{"Authorization": {"Bearer " + ph}})
	if got := last(t, f.seen).Header.Get("Authorization"); got != "Bearer "+ph {
		t.Errorf("a host not listed for the secret got %q", got)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "egress test CA" {
		t.Errorf("a host without secrets was intercepted (issuer %q)", issuer)
	}

	// The secret's host over plain HTTP: never in clear text.
	f.do(t, http.MethodGet, "http://api.test:"+f.httpPort+"/", "", http.Header{"Authorization": {"Bearer " + ph}})
	if got := last(t, f.seen); got.TLS || got.Header.Get("Authorization") != "Bearer "+ph {
		t.Errorf("plain HTTP to the secret's host carried %q", got.Header.Get("Authorization"))
	}

	// Usage per host.
	use := map[string]int64{}
	for _, u := range f.proxy.Usage() {
		use[u.Host] = u.Requests
		if u.Requests > 0 && (u.BytesSent == 0 || u.BytesReceived == 0) {
			t.Errorf("usage %+v: no bytes counted", u)
		}
	}
	if use["api.test:"+f.tlsPort] != 2 || use["plain.test:"+f.tlsPort] != 1 || use["api.test:"+f.httpPort] != 1 {
		t.Errorf("usage = %+v", f.proxy.Usage())
	}
}

// TestSecretOnlyInItsHeaders: the value goes into the headers the secret
// names and nowhere else; a request with the placeholder in another header
// (one a host may echo) or in the URL is refused before it reaches the
// host, and so is an upgrade that would carry the value.
func TestSecretOnlyInItsHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ph := f.secret.Placeholder
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+ph))
	for _, tt := range []struct {
		name, path string
		header     http.Header
		where      string
	}{
		{"Accept", "/", http.Header{"Accept": {ph}}, "the Accept header"},
		{"User-Agent", "/", http.Header{"User-Agent": {"curl " + ph}}, "the User-Agent header"},
		{"an API-key header it does not name", "/", http.Header{"X-Api-Key": {ph}, "Authorization": {"Bearer " + ph}}, "the X-Api-Key header"},
		{"Cookie", "/", http.Header{"Cookie": {"session=" + ph}}, "the Cookie header"},
		{"Basic credentials in another header", "/", http.Header{"X-Auth": {basic}}, "the X-Auth header"},
		{"query", "/search?token=" + ph, nil, "the URL"},
		{"path", "/users/" + ph, nil, "the URL"},
		{"escaped path", "/users/%61" + ph[1:], nil, "the URL"},
	} {
		resp, body := f.do(t, http.MethodGet, "https://api.test:"+f.tlsPort+tt.path, "", tt.header)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "placeholder of secret TOKEN in "+tt.where) ||
			!strings.Contains(body, "only into the Authorization header") {
			t.Errorf("%s: %d %q", tt.name, resp.StatusCode, body)
		}
	}
	// An upgrade (WebSocket) with the secret in it.
	resp, body := f.do(t, http.MethodGet, "https://api.test:"+f.tlsPort+"/ws", "", http.Header{"Authorization": {"Bearer " + ph},
		"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "upgrades the connection (websocket)") {
		t.Errorf("upgrade with a secret: %d %q", resp.StatusCode, body)
	}
	if reqs := f.seen.Requests(); len(reqs) != 0 {
		t.Errorf("refused requests reached the host: %d", len(reqs))
	}
	f.mu.Lock()
	n := 0
	for _, d := range f.denied {
		if d.Reason == ReasonSecretRefused {
			n++
		}
	}
	f.mu.Unlock()
	if n != 1 {
		t.Errorf("secret_refused reported %d times, want once per host", n)
	}

	// A secret that names its header: there and only there.
	g := newFixture(t, func(c *Config) { c.Secrets[0].Headers = []string{"x-api-key", "Private-Token"} })
	ph = g.secret.Placeholder
	resp, _ = g.do(t, http.MethodGet, "https://api.test:"+g.tlsPort+"/", "", http.Header{"X-Api-Key": {ph}, "Private-Token": {"t " + ph}})
	if got := last(t, g.seen); resp.StatusCode != http.StatusOK || got.Header.Get("X-Api-Key") != realValue || got.Header.Get("Private-Token") != "t "+realValue {
		t.Errorf("named headers: %d, host got %v", resp.StatusCode, got.Header)
	}
	if resp, body := g.do(t, http.MethodGet, "https://api.test:"+g.tlsPort+"/", "", http.Header{"Authorization": {"Bearer " + ph}}); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "in the Authorization header; the proxy puts its value only into the X-Api-Key or Private-Token header") {
		t.Errorf("Authorization for a secret that names other headers: %d %q", resp.StatusCode, body)
	}
}

func TestSecretConfigChecked(t *testing.T) {
	t.Parallel()
	ca, err := NewCA([]Rule{rule(t, "api.test")}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s    Secret
		want string
	}{
		{Secret{Name: "T", Value: "short", Placeholder: "p-1234567890", Hosts: []Rule{rule(t, "api.test")}}, "its value is 5 bytes"},
		{Secret{Name: "T", Value: "long-enough-value", Placeholder: "p-1234567890", Hosts: []Rule{rule(t, "api.test")}, Headers: []string{"Host"}}, "Host cannot carry a secret"},
		{Secret{Name: "T", Value: "long-enough-value", Placeholder: "p-1234567890", Hosts: []Rule{rule(t, "api.test")}, Headers: []string{"bad header"}}, "not a valid header name"},
		{Secret{Name: "T", Value: "long-enough-value", Placeholder: "p-1234567890", Hosts: []Rule{rule(t, "api.test")}, Headers: []string{"Proxy-Authorization"}}, "cannot carry a secret"},
	} {
		if _, err := New(Config{Secrets: []Secret{tt.s}, CA: ca}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.s.Headers, err, tt.want)
		}
	}
}

func TestDeniedRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)

	for _, tt := range []struct {
		name, url, reason string
		want              []string
	}{
		{"not allowed", "http://denied.test/x", ReasonNotAllowed,
			[]string{"host: denied.test:80", "not in this sandbox's network allow list", `add "denied.test" to sandbox.network.allow`}},
		{"not allowed port", "http://api.test:1/", ReasonNotAllowed, []string{`"api.test:1"`}},
		{"loopback by name", "http://private.test:" + f.httpPort + "/", ReasonSpecialAddress,
			[]string{"127.0.0.1 is a loopback address", `"hosts": {"private.test": "ADDRESS"}`}},
		{"address not listed", "http://127.0.0.1:" + f.httpPort + "/", ReasonNotAllowed, []string{"not in this sandbox's network allow list"}},
		{"decimal address", "http://2130706433:" + f.httpPort + "/", ReasonBadRequest, []string{"looks like an IP address"}},
	} {
		resp, body := f.do(t, http.MethodGet, tt.url, "", nil)
		if resp.StatusCode/100 != 4 {
			t.Errorf("%s: status %d", tt.name, resp.StatusCode)
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body lacks %q:\n%s", tt.name, w, body)
			}
		}
		if h := resp.Header.Get(headerDenied); h == "" {
			t.Errorf("%s: no %s header", tt.name, headerDenied)
		}
	}

	// CONNECT refused: the same answer before any tunnel exists.
	for _, target := range []string{"denied.test:443", "private.test:" + f.tlsPort} {
		resp, body, _, _ := f.rawConnect(t, target)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "host: "+target) || !strings.Contains(resp.Header.Get(headerDenied), target) ||
			!strings.Contains(resp.Status, "403 Forbidden (egress to "+target+" denied: ") {
			t.Errorf("CONNECT %s: %d %q", target, resp.StatusCode, body)
		}
	}

	// A secret's host whose name does not resolve: the tunnel is
	// terminated, so the refusal comes inside it, where any client shows it.
	resp, body := f.do(t, http.MethodGet, "https://unmapped.test:"+f.tlsPort+"/", "", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "unmapped.test does not exist") {
		t.Errorf("unresolvable secret host: %d %q", resp.StatusCode, body)
	}

	// Each host and reason is reported once, however often it is tried.
	f.do(t, http.MethodGet, "http://denied.test/again", "", nil)
	f.mu.Lock()
	n := 0
	for _, d := range f.denied {
		if d.Target.Host == "denied.test" && d.Target.Port == 80 {
			n++
		}
	}
	f.mu.Unlock()
	if n != 1 {
		t.Errorf("denied.test:80 reported %d times, want once", n)
	}
	for _, u := range f.proxy.Usage() {
		if u.Host == "denied.test:80" && (u.Denied != 2 || u.Requests != 0) {
			t.Errorf("usage %+v: want 2 denied, no request", u)
		}
	}
}

func TestTerminatedTunnelCarriesOneHost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	target := "api.test:" + f.tlsPort
	resp, _, c, br := f.rawConnect(t, target)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.proxy.cfg.CA.CertPEM())
	tc := tls.Client(&readerConn{Conn: c, r: br}, &tls.Config{ServerName: "api.test", RootCAs: roots})
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: plain.test:%s\r\nAuthorization: Bearer %s\r\n\r\n", f.tlsPort, f.secret.Placeholder)
	r, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(b), "opened (CONNECT) to "+target) {
		t.Errorf("request for another host in the tunnel: %d %q", r.StatusCode, b)
	}
	if reqs := f.seen.Requests(); len(reqs) != 0 {
		t.Errorf("the request reached a host: %+v", reqs)
	}
}

func TestUpstreamCertificateVerified(t *testing.T) {
	t.Parallel()
	// The proxy trusts the system's roots only: the test server's
	// certificate must be refused, with a reason the agent can read.
	f := newFixture(t, func(c *Config) { c.RootCAs = x509.NewCertPool() })
	resp, body := f.do(t, http.MethodGet, "https://api.test:"+f.tlsPort+"/", "", http.Header{"Authorization": {"Bearer " + f.secret.Placeholder}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("untrusted upstream: %d %q", resp.StatusCode, body)
	}
	if len(f.seen.Requests()) != 0 {
		t.Error("the secret went to a host whose certificate was not verified")
	}
}

func TestProxyCAIsNameConstrained(t *testing.T) {
	t.Parallel()
	ca, err := NewCA([]Rule{rule(t, "api.test"), rule(t, "*.git.test")}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	for _, tt := range []struct {
		host string
		ok   bool
	}{{"api.test", true}, {"a.git.test", true}, {"evil.test", false}, {"127.0.0.1", false}} {
		tg, _ := ParseTarget(tt.host+":443", 0)
		leaf, err := ca.leaf(tg)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(leaf.Certificate[0])
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.host})
		if (err == nil) != tt.ok {
			t.Errorf("leaf for %s verifies: %v, want ok=%v", tt.host, err, tt.ok)
		}
	}
	if ca.Certificate().PublicKeyAlgorithm != x509.ECDSA || ca.Certificate().NotAfter.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Errorf("CA: %v until %v", ca.Certificate().PublicKeyAlgorithm, ca.Certificate().NotAfter)
	}
}

func TestDialPinsTheCheckedAddress(t *testing.T) {
	t.Parallel()
	// A resolver that re-points the name on every lookup (DNS rebinding):
	// the proxy must dial what it checked, looking it up once.
	var lookups []string
	res := resolverFunc(func(host string) []netip.Addr {
		lookups = append(lookups, host)
		if len(lookups) == 1 {
			return []netip.Addr{netip.MustParseAddr("140.82.112.3")}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	})
	p, err := New(Config{Policy: Policy{Allow: []Rule{rule(t, "rebind.test")}}, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	var dialed []string
	p.dial = func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}
	c, err := p.dialContext(context.Background(), "tcp", "rebind.test:443")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(lookups) != 1 || len(dialed) != 1 || dialed[0] != "140.82.112.3:443" {
		t.Errorf("lookups %v, dialed %v; want one lookup and its address dialed", lookups, dialed)
	}
	// The second lookup now says loopback: refused, nothing dialed.
	if _, err := p.dialContext(context.Background(), "tcp", "rebind.test:443"); err == nil || len(dialed) != 1 {
		t.Errorf("rebound to loopback: err %v, dialed %v", err, dialed)
	}
}

type resolverFunc func(host string) []netip.Addr

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host), nil
}

func TestCloseEndsTunnels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, _, c, _ := f.rawConnect(t, "plain.test:"+f.tlsPort)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	if err := f.proxy.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("tunnel still open after Close: %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /not-a-proxy-request HTTP/1.1\r\nHost: api.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "absolute http:// URLs and CONNECT") {
		t.Errorf("origin-form request: %d %q", resp.StatusCode, b)
	}
}

// readerConn reads through r (which holds what was buffered).
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
