package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/bridge/egress"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
)

// BenchmarkEgressOverhead measures what the egress proxy adds to one
// request the way a tool in the sandbox makes it: through the in-sandbox
// relay on loopback, the egress socket and the host proxy (policy check,
// pinned dial, metering). Each iteration makes the same request directly
// and through the proxy; the medians and their difference are reported.
//
//   - http: plain HTTP, connections kept alive on both paths;
//   - tunnel: a new HTTPS connection per request (as curl or git do):
//     CONNECT, then TLS end to end with the host;
//   - terminated-new: the same to a secret's host, whose TLS the proxy
//     terminates (a leaf from the per-request CA) and re-encrypts;
//   - terminated-keepalive: requests on one kept-alive terminated tunnel,
//     with the secret put into a header.
//
// Targets: overhead-median under 1 ms for http and the kept-alive
// terminated tunnel, under 5 ms for a new connection.
func BenchmarkEgressOverhead(b *testing.B) {
	pki := egresstest.NewPKI(b)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 1024)) })
	tlsSrv := egresstest.NewServer(b, pki, h, "api.test", "plain.test")
	httpSrv := httptest.NewServer(h)
	defer httpSrv.Close()
	httpPort := strings.TrimPrefix(httpSrv.URL, "http://127.0.0.1:")
	loop := netip.MustParseAddr("127.0.0.1")
	rule := func(s string) egress.Rule { return mustRule(b, s) }
	s := startSession(b, Options{Egress: &EgressOptions{
		Policy: egress.Policy{
			Allow: []egress.Rule{rule(tlsSrv.Addr("api.test")), rule(tlsSrv.Addr("plain.test")), rule("plain.test:" + httpPort)},
			Hosts: map[string]netip.Addr{"api.test": loop, "plain.test": loop},
		},
		Secrets: []egress.Secret{{Name: "TOKEN", Value: "real-value", Hosts: []egress.Rule{rule(tlsSrv.Addr("api.test"))}}},
		RootCAs: pki.Pool(),
	}})
	relay := startGuestRelay(b, filepath.Join(s.Dir(), "egress.sock"))
	roots := pki.Pool()
	roots.AppendCertsFromPEM(mustRead(b, filepath.Join(s.Dir(), "egress-ca.pem")))

	for _, tc := range []struct {
		name      string
		via, dir  string // URL through the proxy, and straight to the server
		keepAlive bool
	}{
		{"http", "http://plain.test:" + httpPort + "/", httpSrv.URL + "/", true},
		{"tunnel", tlsSrv.URL("plain.test") + "/", "https://127.0.0.1:" + fmt.Sprint(tlsSrv.Port) + "/", false},
		{"terminated-new", tlsSrv.URL("api.test") + "/", "https://127.0.0.1:" + fmt.Sprint(tlsSrv.Port) + "/", false},
		{"terminated-keepalive", tlsSrv.URL("api.test") + "/", "https://127.0.0.1:" + fmt.Sprint(tlsSrv.Port) + "/", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			proxied := benchClient(relay, roots, "api.test", tc.keepAlive)
			direct := benchClient("", roots, "api.test", tc.keepAlive)
			defer proxied.CloseIdleConnections()
			defer direct.CloseIdleConnections()
			get := func(c *http.Client, u string) time.Duration {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, u, nil)
				req.Header.Set("Authorization", "Bearer "+s.Placeholders()["TOKEN"])
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				return time.Since(start)
			}
			get(direct, tc.dir)
			get(proxied, tc.via)
			ds := make([]time.Duration, 0, b.N)
			ps := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				ds = append(ds, get(direct, tc.dir))
				ps = append(ps, get(proxied, tc.via))
			}
			b.StopTimer()
			md, mp := median(ds), median(ps)
			b.ReportMetric(float64(md.Microseconds()), "direct-median-µs")
			b.ReportMetric(float64(mp.Microseconds()), "proxy-median-µs")
			b.ReportMetric(float64((mp - md).Microseconds()), "overhead-median-µs")
		})
	}

	// Bulk: a large HTTPS download of text (base64, the hardest for the
	// scrubber: most bytes could begin an encoded value), straight, through
	// a tunnel, and through a terminated tunnel that scrubs it (compare the
	// MB/s of one run).
	const size = 64 << 20
	chunk := make([]byte, 3<<18)
	for i := range chunk {
		chunk[i] = byte(i*7919 + i>>8)
	}
	text := []byte(base64.StdEncoding.EncodeToString(chunk)) // 1 MiB
	big := egresstest.NewServer(b, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range size >> 20 {
			_, _ = w.Write(text)
		}
	}), "plain.test", "api.test")
	s2 := startSession(b, Options{Egress: &EgressOptions{Policy: egress.Policy{
		Allow: []egress.Rule{rule(big.Addr("plain.test")), rule(big.Addr("api.test"))}, Hosts: map[string]netip.Addr{"plain.test": loop, "api.test": loop}},
		Secrets: []egress.Secret{{Name: "TOKEN", Value: "ghp_bench-secret-value-6a1d", Hosts: []egress.Rule{rule(big.Addr("api.test"))}}},
		RootCAs: pki.Pool()}})
	r2 := startGuestRelay(b, filepath.Join(s2.Dir(), "egress.sock"))
	roots2 := pki.Pool()
	roots2.AppendCertsFromPEM(mustRead(b, filepath.Join(s2.Dir(), "egress-ca.pem")))
	for _, tc := range []struct{ name, proxy, url string }{
		{"throughput-direct", "", "https://127.0.0.1:" + fmt.Sprint(big.Port)},
		{"throughput-tunnel", r2, big.URL("plain.test")},
		{"throughput-terminated", r2, big.URL("api.test")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := benchClient(tc.proxy, roots2, "plain.test", true)
			defer c.CloseIdleConnections()
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				resp, err := c.Get(tc.url)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != size {
					b.Fatalf("got %d bytes", n)
				}
			}
		})
	}
}

// benchClient is an HTTP client through proxy ("" for none) that trusts
// roots; direct requests to 127.0.0.1 verify the certificate as serverName.
func benchClient(proxy string, roots *x509.CertPool, serverName string, keepAlive bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: !keepAlive, ForceAttemptHTTP2: false}
	if proxy != "" {
		u, _ := url.Parse(proxy)
		tr.Proxy = http.ProxyURL(u)
	} else if serverName != "" {
		tr.TLSClientConfig.ServerName = serverName
	}
	return &http.Client{Transport: tr}
}

// startGuestRelay serves a host socket on a loopback port, as `agentbox
// bridge run` does in the sandbox, and returns its URL.
func startGuestRelay(tb testing.TB, socket string) string {
	tb.Helper()
	ln, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- GuestProxy(ctx, ln, socket) }()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String()
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
