package bridge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkGatewayModelRequest compares one model request through the
// bridge over a Unix socket and over the gateway (TCP, mutual TLS), on a
// kept-alive connection ("reuse") and on a new one each time ("new": the
// relay dials, so the gateway's TLS handshake is in it).
func BenchmarkGatewayModelRequest(b *testing.B) {
	for _, conn := range []string{"reuse", "new"} {
		b.Run(conn, func(b *testing.B) {
			up := httptest.NewServer(&fakeAnthropic{})
			defer up.Close()
			g := startGateway(b)
			unix := startSession(b, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport})
			netw := startSession(b, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Gateway: g})
			unixBase, netBase := startGuestProxy(b, unix), startGuestProxy(b, netw)
			tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableKeepAlives: conn == "new"}
			client := &http.Client{Transport: tr}
			defer client.CloseIdleConnections()
			call := func(url, token string) time.Duration {
				start := time.Now()
				req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(`{"model":"x"}`))
				req.Header.Set("X-Api-Key", token)
				resp, err := client.Do(req)
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
			call(unixBase, unix.Token())
			call(netBase, netw.Token())
			var viaUnix, viaNet []time.Duration
			b.ResetTimer()
			for range b.N {
				viaUnix = append(viaUnix, call(unixBase, unix.Token()))
				viaNet = append(viaNet, call(netBase, netw.Token()))
			}
			b.StopTimer()
			b.ReportMetric(float64(median(viaUnix).Microseconds()), "unix-median-µs")
			b.ReportMetric(float64(median(viaNet).Microseconds()), "gateway-median-µs")
		})
	}
}

// BenchmarkGatewaySession measures what a session on the gateway costs the
// server: starting one (its client certificate: a key pair and a
// signature) and the heap a live one holds, next to a session on Unix
// sockets.
func BenchmarkGatewaySession(b *testing.B) {
	up := httptest.NewServer(&fakeAnthropic{})
	defer up.Close()
	g := startGateway(b)
	dir := shortTempDir(b)
	for _, via := range []string{"unix", "gateway"} {
		b.Run(via, func(b *testing.B) {
			opts := Options{Dir: dir, Binary: os.Args[0], Upstream: testUpstream(up.URL), Transport: up.Client().Transport}
			if via == "gateway" {
				opts.Gateway = g
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			sessions := make([]*Session, 0, b.N)
			b.ResetTimer()
			for range b.N {
				s, err := Start(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				sessions = append(sessions, s)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N)/1024, "heap-KiB/live-session")
			for _, s := range sessions {
				_ = s.Close(context.Background())
			}
		})
	}
}
