package bridge

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkPortRelay compares an HTTP request through the port relay (the
// host's Dial, the guest's splice, over the Unix socket, as a preview
// takes it) with the same request on a direct loopback connection: a
// small answer (latency) and a 16 MiB one (throughput). Compare the
// relay's ns/op with direct's within one run: ratio, not absolutes.
func BenchmarkPortRelay(b *testing.B) {
	big := strings.Repeat("x", 16<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := portOf(b, srv.Listener.Addr().String())
	r := startPortRelay(b, []int{port})
	relayed := &http.Client{Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return r.Dial(ctx, port) },
		MaxIdleConnsPerHost: 4,
	}}
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, size := range []string{"small", "16MiB"} {
		path := "/"
		if size == "16MiB" {
			path = "/big"
		}
		for _, c := range []struct {
			name string
			cl   *http.Client
		}{{"direct", direct}, {"relay", relayed}} {
			b.Run(fmt.Sprintf("%s/%s", size, c.name), func(b *testing.B) {
				url := fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
				for b.Loop() {
					resp, err := c.cl.Get(url)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					b.SetBytes(n)
				}
			})
		}
	}
}
