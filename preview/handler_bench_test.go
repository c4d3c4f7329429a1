package preview

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHandlerLargeBody: a 16 MiB answer through the preview handler
// (cookie check, reverse proxy; the app dialed on loopback) against the
// same request straight to the app, one of each per iteration,
// alternately; preview/direct is the ratio of their times.
func BenchmarkHandlerLargeBody(b *testing.B) {
	big := strings.Repeat("x", 16<<20)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) }))
	defer app.Close()
	_, p, _ := net.SplitHostPort(app.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	m, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.Open(Owner{User: "ann", Chat: "c1"}, loopDialer{}, []Port{{Port: port}})
	base, _ := url.Parse(srv.URL)
	ticket := m.List("ann", "c1", base)[0].URL
	pc, dc := client(b, srv), &http.Client{}
	get := func(c *http.Client, u string) {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(big)) {
			b.Fatalf("GET %s: %d bytes", u, n)
		}
	}
	get(pc, ticket) // the ticket becomes the cookie
	tu, _ := url.Parse(ticket)
	origin := tu.Scheme + "://" + tu.Host + "/"
	var dd, pd time.Duration
	for b.Loop() {
		t0 := time.Now()
		get(dc, app.URL)
		t1 := time.Now()
		get(pc, origin)
		dd += t1.Sub(t0)
		pd += time.Since(t1)
	}
	b.ReportMetric(float64(pd)/float64(dd), "preview/direct")
}
