package bridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkProxyOverhead measures what the bridge adds to one model
// request: each iteration makes the same request straight to the upstream
// and through the in-sandbox relay, the model socket and the host proxy
// (token check, key swap, metering), and reports both medians and their
// difference (target: overhead-median under 2 ms).
func BenchmarkProxyOverhead(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "json"
		body := `{"model":"x"}`
		if stream {
			name, body = "sse", `{"model":"x","stream":true}`
		}
		b.Run(name, func(b *testing.B) {
			up := httptest.NewServer(&fakeAnthropic{})
			defer up.Close()
			s := startSession(b, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Limits: Limits{Calls: b.N + 10}})
			base := startGuestProxy(b, s)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			call := func(url, token string) time.Duration {
				start := time.Now()
				req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
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
			// Warm both paths' connections.
			call(up.URL, realKey)
			call(base, s.Token())
			direct := make([]time.Duration, 0, b.N)
			bridged := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				direct = append(direct, call(up.URL, realKey))
				bridged = append(bridged, call(base, s.Token()))
			}
			b.StopTimer()
			md, mb := median(direct), median(bridged)
			b.ReportMetric(float64(md.Microseconds()), "direct-median-µs")
			b.ReportMetric(float64(mb.Microseconds()), "bridge-median-µs")
			b.ReportMetric(float64((mb - md).Microseconds()), "overhead-median-µs")
		})
	}
}

// BenchmarkToolRoundTrip measures one host tool call the way the agent
// makes it: an MCP client, the in-sandbox `bridge mcp` relay (its own
// process), the tools socket, the host MCP server with argument validation,
// the Go handler, and back (target: median under 5 ms).
func BenchmarkToolRoundTrip(b *testing.B) {
	var calls atomic.Int32
	s := startSession(b, Options{Tools: testTools(&calls)})
	cs := connectGuest(b, s)
	ctx := context.Background()
	args := map[string]any{"order_id": "A-17"}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: args}); err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(ds).Microseconds()), "median-µs")
	var out map[string]any
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: args})
	if err := json.Unmarshal([]byte(text(b, res)), &out); err != nil || out["status"] != "shipped" {
		b.Fatalf("result %v %v", out, err)
	}
}

// claudeSizedRequest is a messages request of Claude Code's size (about
// 120 KB: the system prompt, 24 tool definitions, the conversation).
func claudeSizedRequest() []byte {
	return []byte(`{"model":"claude-haiku-4-5","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999},"system":"` +
		strings.Repeat("You are a coding agent. ", 2000) + `","tools":[` + strings.TrimSuffix(strings.Repeat(`{"name":"Bash","description":"`+strings.Repeat("run a command ", 200)+`","input_schema":{"type":"object"}},`, 24), ",") +
		`],"messages":[{"role":"user","content":"` + strings.Repeat("hello ", 5000) + `"}` +
		strings.Repeat(`,{"role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls -la"}}]}`+
			`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"`+strings.Repeat("file ", 100)+`"}]}]}`, 20) +
		`],"stream":true}`)
}

// BenchmarkAllowList measures checking a Claude Code-sized messages
// request against the allow list (every top-level key, tool and content
// block read, in place).
func BenchmarkAllowList(b *testing.B) {
	body := claudeSizedRequest()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		if !gjson.ValidBytes(body) {
			b.Fatal("not JSON")
		}
		if ferr := checkMessages(gjson.ParseBytes(body)); ferr != nil {
			b.Fatal(ferr)
		}
	}
}

// BenchmarkLimitsApply measures holding a Claude Code-sized messages
// request to the assistant's model and token limit.
func BenchmarkLimitsApply(b *testing.B) {
	body := claudeSizedRequest()
	l := Limits{Model: "claude-sonnet-4-5", MaxTokens: 4096}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		if _, changed := l.apply(body); len(changed) != 3 {
			b.Fatalf("changed %v", changed)
		}
	}
}
