package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/internal/testenv"
)

// recorder is an upstream that records what reached it and answers 200
// with an empty JSON object.
type recorder struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies []string
}

func (u *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs, u.bodies = append(u.reqs, r), append(u.bodies, string(b))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{}`)
}

func (u *recorder) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

func (u *recorder) last() *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reqs[len(u.reqs)-1]
}

// RecordedRequest is one request a CLI sent, as testdata/cli-requests
// keeps it (record_test.go records them): its shape, with long strings cut
// and tool schemas left out (the allow list reads neither), and without
// its key.
type RecordedRequest struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  string          `json:"query,omitempty"`
	Header http.Header     `json:"header"`
	Body   json.RawMessage `json:"body"`
}

// TestCLIRequestsPass replays what the supported CLIs send their model
// APIs (recorded from the real CLIs, testdata/cli-requests) through the
// proxy: every request passes the allow list and reaches the upstream
// with its API's headers, the betas among them; only headers that carry
// nothing for the provider stay behind. The allow list's main risk is
// refusing what a CLI needs: each CLI's Docker end-to-end test checks the
// same on its live traffic.
func TestCLIRequestsPass(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cli-requests", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Every supported Claude Code version and every API is recorded.
	pins := testenv.Pins(t)
	for _, want := range []string{"claude-" + pins["CLAUDE_VERSION"] + "-", "claude-" + pins["CLAUDE_LATEST_VERSION"] + "-", "codex", "gemini", "opencode-anthropic", "opencode-openai"} {
		if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), want) }) {
			t.Errorf("no recording %s* in testdata/cli-requests (go test ./bridge -run TestRecordCLIRequests -args -record)", want)
		}
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var reqs []RecordedRequest
			if err := json.Unmarshal(b, &reqs); err != nil {
				t.Fatal(err)
			}
			up := &recorder{}
			srv := httptest.NewServer(up)
			t.Cleanup(srv.Close)
			conn := testUpstream(srv.URL)
			if strings.HasSuffix(file, "codex.json") || strings.HasSuffix(file, "-openai.json") {
				conn.Type = "openai"
			}
			s := startSession(t, Options{Upstream: conn, Transport: srv.Client().Transport})
			c := unixClient(s)
			for i, rr := range reqs {
				target := "http://bridge" + rr.Path
				if rr.Query != "" {
					target += "?" + rr.Query
				}
				var body io.Reader
				if len(rr.Body) > 0 && string(rr.Body) != "null" {
					body = strings.NewReader(string(rr.Body))
				}
				req, _ := http.NewRequest(rr.Method, target, body)
				req.Header = rr.Header.Clone()
				req.Header.Set("X-Api-Key", s.Token())
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || up.count() != i+1 {
					t.Fatalf("request %d (%s %s): status %d %s; the allow list refuses what the CLI sends", i, rr.Method, rr.Path, resp.StatusCode, got)
				}
				fwd := up.last().Header
				for name, vs := range rr.Header {
					switch name {
					case "Connection": // hop by hop
					case "Accept-Language", "Sec-Fetch-Mode":
						if fwd.Get(name) != "" {
							t.Errorf("request %d: %s forwarded", i, name)
						}
					default:
						if !slices.Equal(fwd.Values(name), vs) {
							t.Errorf("request %d: header %s = %q upstream, sent %q", i, name, fwd.Values(name), vs)
						}
					}
				}
			}
		})
	}
}

// TestAllowListRefuses: what a hostile agent adds to a request with the
// session's token is refused before it reaches the provider, with a 400
// in the API's own error shape that names the field, and the operator
// hears of it once.
func TestAllowListRefuses(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var told []Refusal
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, OnRefuse: func(r Refusal) {
		mu.Lock()
		told = append(told, r)
		mu.Unlock()
	}})
	if err := s.SetLimits(Limits{Model: "claude-sonnet-4-5"}); err != nil {
		t.Fatal(err)
	}
	c := unixClient(s)
	const msgs = `"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]`
	const gem = `"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	tests := []struct {
		name, path, body string
		header           map[string]string
		field            string
	}{
		{"web search", "/v1/messages", `{` + msgs + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, nil, "tools[0].type"},
		{"web fetch", "/v1/messages", `{` + msgs + `,"tools":[{"name":"Bash","input_schema":{}},{"type":"web_fetch_20250910","name":"web_fetch"}]}`, nil, "tools[1].type"},
		{"code execution", "/v1/messages", `{` + msgs + `,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`, nil, "tools[0].type"},
		{"computer use", "/v1/messages", `{` + msgs + `,"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1}]}`, nil, "tools[0].type"},
		{"a repeated type key", "/v1/messages", `{` + msgs + `,"tools":[{"name":"x","type":"custom","type":"web_search_20250305"}]}`, nil, "tools[0].type"},
		{"an escaped key", "/v1/messages", `{` + msgs + `,"tools":[{"name":"x","ty\u0070e":"web_search_20250305"}]}`, nil, "tools[0].type"},
		{"mcp servers", "/v1/messages", `{` + msgs + `,"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"x"}]}`, nil, "mcp_servers"},
		{"a repeated top-level key", "/v1/messages", `{` + msgs + `,"tools":[],"tools":[{"type":"web_search_20250305"}]}`, nil, "tools[0].type"},
		{"service tier", "/v1/messages", `{` + msgs + `,"service_tier":"priority"}`, nil, "service_tier"},
		{"container", "/v1/messages", `{` + msgs + `,"container":"c1"}`, nil, "container"},
		{"unknown field", "/v1/messages", `{` + msgs + `,"foo":1}`, nil, "foo"},
		{"image by url", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://evil.example/?d=secret"}}]}]}`, nil, "messages[0].content[0].source.type"},
		{"file in a tool result", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}]}]}`, nil, "messages[0].content[0].content[0].source.type"},
		{"url in a system block", "/v1/messages", `{"model":"m","system":[{"type":"image","source":{"type":"url","url":"https://evil.example/"}}],"messages":[]}`, nil, "system[0].source.type"},
		{"container upload", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"container_upload","file_id":"f"}]}]}`, nil, "messages[0].content[0].type"},
		{"beta", "/v1/messages", `{` + msgs + `}`, map[string]string{"Anthropic-Beta": "claude-code-20250219,mcp-client-2025-04-04"}, "anthropic-beta"},
		{"long-context beta", "/v1/messages", `{` + msgs + `}`, map[string]string{"Anthropic-Beta": "context-1m-2025-08-07"}, "anthropic-beta"},
		{"count tokens with mcp servers", "/v1/messages/count_tokens", `{"model":"m","messages":[],"mcp_servers":[]}`, nil, "mcp_servers"},
		{"not JSON", "/v1/messages", `{"model":`, nil, ""},
		{"not an object", "/v1/messages", `[1]`, nil, "(body)"},
		{"responses web search", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"web_search","external_web_access":true}]}`, nil, "tools[0].type"},
		{"responses remote mcp", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"mcp","server_url":"https://evil.example/mcp","server_label":"x"}]}`, nil, "tools[0].type"},
		{"responses namespaced server tool", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"},{"type":"code_interpreter"}]}]}`, nil, "tools[0].tools[1].type"},
		{"responses image url", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://evil.example/?d=1"}]}]}`, nil, "input[0].content[0].image_url"},
		{"responses file url in a tool output", "/v1/responses", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_url":"https://evil.example/"}]}]}`, nil, "input[0].output[0].file_url"},
		{"responses service tier", "/v1/responses", `{"model":"m","input":"hi","service_tier":"priority"}`, nil, "service_tier"},
		{"responses background", "/v1/responses", `{"model":"m","input":"hi","background":true}`, nil, "background"},
		{"responses stored response", "/v1/responses", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, nil, "previous_response_id"},
		{"gemini search", "/v1beta/models/g:generateContent", `{` + gem + `,"tools":[{"googleSearch":{}}]}`, nil, "tools[0].googleSearch"},
		{"gemini search, snake case", "/v1beta/models/g:generateContent", `{` + gem + `,"tools":[{"functionDeclarations":[],"google_search":{}}]}`, nil, "tools[0].google_search"},
		{"gemini url context", "/v1beta/models/g:streamGenerateContent?alt=sse", `{` + gem + `,"tools":[{"urlContext":{}}]}`, nil, "tools[0].urlContext"},
		{"gemini code execution", "/v1beta/models/g:generateContent", `{` + gem + `,"tools":[{"codeExecution":{}}]}`, nil, "tools[0].codeExecution"},
		{"gemini file data", "/v1beta/models/g:generateContent", `{"contents":[{"role":"user","parts":[{"fileData":{"fileUri":"https://evil.example/x"}}]}]}`, nil, "contents[0].parts[0].fileData"},
		{"gemini cached content", "/v1beta/models/g:generateContent", `{` + gem + `,"cachedContent":"cachedContents/x"}`, nil, "cachedContent"},
		{"gemini snake-case token limit", "/v1beta/models/g:generateContent", `{` + gem + `,"generationConfig":{"max_output_tokens":1000000}}`, nil, "generationConfig.max_output_tokens"},
		{"gemini count with search", "/v1beta/models/g:countTokens", `{"generateContentRequest":{"model":"models/g",` + gem + `,"tools":[{"googleSearch":{}}]}}`, nil, "generateContentRequest.tools[0].googleSearch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", "http://bridge"+tc.path, strings.NewReader(tc.body))
			req.Header.Set("X-Api-Key", s.Token())
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", resp.StatusCode, b)
			}
			e := gjson.ParseBytes(b)
			var msg string
			switch a := apiOf(tc.path); a {
			case apiOpenAI:
				msg = e.Get("error.message").String()
				if e.Get("error.type").String() != errInvalid || e.Get("error.param").String() != tc.field {
					t.Errorf("not the OpenAI error shape naming %s: %s", tc.field, b)
				}
			case apiGemini:
				msg = e.Get("error.message").String()
				if e.Get("error.code").Int() != 400 || e.Get("error.status").String() != "INVALID_ARGUMENT" {
					t.Errorf("not the Gemini error shape: %s", b)
				}
			default:
				msg = e.Get("error.message").String()
				if e.Get("type").String() != "error" || e.Get("error.type").String() != errInvalid {
					t.Errorf("not the Anthropic error shape: %s", b)
				}
			}
			if !strings.Contains(msg, tc.field) || !strings.HasPrefix(msg, "agentbox bridge: ") {
				t.Errorf("message %q does not name %s", msg, tc.field)
			}
		})
	}
	if n := up.count(); n != 0 {
		t.Fatalf("the upstream got %d refused requests", n)
	}
	mu.Lock()
	defer mu.Unlock()
	fields := map[string]int{}
	for _, r := range told {
		if r.Reason != RefusedField || !strings.Contains(r.Message, r.Field) {
			t.Errorf("refusal %+v", r)
		}
		fields[r.Field]++
	}
	// Once per field in a turn: the three tools[0].type refusals of
	// Messages, and Responses', are one notice.
	if fields["tools[0].type"] != 1 || fields["mcp_servers"] != 1 || fields["anthropic-beta"] != 1 {
		t.Errorf("refusals told %v", fields)
	}
}

// TestRefusalsToldBounded: an agent inventing fields is told of at most
// maxTold of them in a turn (each is still refused and logged).
func TestRefusalsToldBounded(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	var told atomic.Int32
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, OnRefuse: func(Refusal) { told.Add(1) }})
	c := unixClient(s)
	for i := range 2 * maxTold {
		resp := post(t, c, "http://bridge", "/v1/messages", s.Token(), fmt.Sprintf(`{"model":"m","x%d":1}`, i))
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("x%d: status %d", i, resp.StatusCode)
		}
	}
	if n := told.Load(); n != maxTold {
		t.Errorf("told %d refusals in a turn, want %d", n, maxTold)
	}
}

// TestLongContext: the 1M-token context's beta passes when the turn's
// model asks for it ("[1m]", which the upstream does not get in the model
// name) or when the turn sets no model, and is refused otherwise.
func TestLongContext(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport})
	c := unixClient(s)
	send := func() int {
		req, _ := http.NewRequest("POST", "http://bridge/v1/messages?beta=true", strings.NewReader(`{"model":"claude-opus-4-8","messages":[]}`))
		req.Header.Set("X-Api-Key", s.Token())
		req.Header.Set("Anthropic-Beta", "claude-code-20250219,context-1m-2025-08-07")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		model  string
		status int
	}{{"", 200}, {"claude-opus-4-8[1m]", 200}, {"claude-opus-4-8", 400}} {
		if err := s.SetLimits(Limits{Model: tc.model}); err != nil {
			t.Fatal(err)
		}
		if st := send(); st != tc.status {
			t.Errorf("model %q: status %d, want %d", tc.model, st, tc.status)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.bodies) != 2 || gjson.Get(up.bodies[1], "model").String() != "claude-opus-4-8" {
		t.Errorf("upstream bodies %q: want the model without [1m]", up.bodies)
	}
}

// TestHeadersForwarded: each API's requests reach the upstream with the
// headers of that API only; none that picks an account, project or
// organisation to bill, and none to a translated (OpenAI-compatible)
// host but the common ones.
func TestHeadersForwarded(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport})
	c := unixClient(s)
	send := func(path, body string) http.Header {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://bridge"+path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", s.Token())
		for k, v := range map[string]string{
			"Content-Type": "application/json", "User-Agent": "cli/1", "Anthropic-Version": "2023-06-01",
			"Anthropic-Beta": "claude-code-20250219", "X-Stainless-Lang": "js", "Originator": "codex_exec",
			"X-Goog-Api-Client": "genai", "OpenAI-Organization": "org-other", "OpenAI-Project": "proj-other",
			"X-Goog-User-Project": "billed-project", "Cookie": "a=b", "Accept-Language": "*", "Anthropic-Admin-Key": "x",
		} {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		return up.last().Header
	}
	names := func(h http.Header) []string {
		var out []string
		for k := range h {
			if k != "Content-Length" && k != "Accept-Encoding" && k != "X-Api-Key" && k != "X-Goog-Api-Key" && k != "Authorization" && k != "X-Forwarded-For" {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		path, body string
		want       []string
	}{
		{"/v1/messages", `{"model":"m"}`, []string{"Anthropic-Beta", "Anthropic-Version", "Content-Type", "User-Agent", "X-Stainless-Lang"}},
		{"/v1/responses", `{"model":"m"}`, []string{"Content-Type", "Originator", "User-Agent", "X-Stainless-Lang"}},
		{"/v1beta/models/g:generateContent", `{}`, []string{"Content-Type", "User-Agent", "X-Goog-Api-Client"}},
	} {
		if got := names(send(tc.path, tc.body)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: forwarded %v, want %v", tc.path, got, tc.want)
		}
	}
}
