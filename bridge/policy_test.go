package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

func TestCheckRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, target string
		want           string // the forwarded path, or "status N"
	}{
		{"POST", "/v1/messages", "/v1/messages"},
		{"POST", "/v1/messages?beta=true", "/v1/messages"},
		{"POST", "/v1/messages/count_tokens?beta=true", "/v1/messages/count_tokens"},
		{"GET", "/v1/models?limit=5&after_id=x", "/v1/models"},
		{"GET", "/v1/models/claude-sonnet-4-5", "/v1/models/claude-sonnet-4-5"},
		{"POST", "//v1/messages", "/v1/messages"},
		{"POST", "/v1//messages", "/v1/messages"},
		{"POST", "/v1/./messages/", "/v1/messages"},
		{"POST", "/v1/x/../messages", "/v1/messages"},
		{"POST", "/v1%2Fmessages", "/v1/messages"},
		{"POST", "/v1/../x", "status 404"},
		{"POST", "/v1/messages/../files", "status 404"},
		{"POST", "/v1/messages/..%2F..%2Fv1%2Ffiles", "status 404"},
		{"GET", "/v1/models/..", "status 404"},
		{"GET", "/v1/models/%2E%2E", "status 404"},
		{"GET", "/v1/models/a/b", "status 404"},
		{"GET", "/v1/models/a%2Fb", "status 404"},
		{"POST", "/v1/files", "status 404"},
		{"POST", "/v1/messages/batches", "status 404"},
		{"GET", "/v1/messages", "status 405"},
		{"DELETE", "/v1/models/x", "status 405"},
		{"POST", "/v1/models", "status 405"},
		{"POST", "/v1/messages?beta=true&x=1", "status 400"},
		{"GET", "/v1/models/x?limit=1", "status 400"},
		{"POST", "/v1/messages?%zz", "status 400"},
		{"POST", "/v1/responses", "/v1/responses"},
		{"GET", "/v1/responses", "status 405"},
		{"POST", "/v1/responses/x/cancel", "status 404"},
		{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"},
		{"POST", "/v1beta/models/gemini-2.5-pro:generateContent", "/v1beta/models/gemini-2.5-pro:generateContent"},
		{"POST", "/v1beta/models/gemini-2.5-pro:countTokens", "/v1beta/models/gemini-2.5-pro:countTokens"},
		{"POST", "/v1beta/models/gemini-2.5-pro:batchGenerateContent", "status 404"},
		{"POST", "/v1beta/models/gemini-2.5-pro", "status 404"},
		{"POST", "/v1beta/models/a/b:generateContent", "status 404"},
		{"POST", "/v1beta/files", "status 404"},
		{"POST", "/v1beta/models/m:generateContent?key=x", "status 400"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, "http://bridge"+tt.target, nil)
			_, got, err := checkRoute(r)
			if err != nil {
				got = "status " + strconv.Itoa(err.status)
				if err.status == http.StatusMethodNotAllowed && err.allow == "" {
					t.Error("405 without Allow")
				}
			}
			if got != tt.want {
				t.Errorf("checkRoute = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzCheckRoute: whatever the path, what is forwarded is a clean path
// that is one of the allowed routes.
func FuzzCheckRoute(f *testing.F) {
	for _, s := range []string{"/v1/messages", "//v1/../v1/messages", "/v1/models/%2e%2e/files", "/v1/models/a%00b", "/%2F%2F"} {
		f.Add("POST", s)
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		r, err := http.NewRequest(method, "http://bridge"+target, nil)
		if err != nil {
			return
		}
		rt, got, rerr := checkRoute(r)
		if rerr != nil {
			return
		}
		if rt.method != method {
			t.Fatalf("%s %q matched the %s route %s", method, target, rt.method, rt.path)
		}
		if path.Clean(got) != got || strings.Contains(got, "..") {
			t.Fatalf("forwarded %q for %s %q", got, method, target)
		}
		switch {
		case got == "/v1/messages", got == "/v1/messages/count_tokens", got == "/v1/models", got == "/v1/responses":
		case strings.HasPrefix(got, "/v1/models/") && modelID.MatchString(strings.TrimPrefix(got, "/v1/models/")):
		case GeminiRoute(got) && strings.Count(got, "/") == 3 && strings.Contains(got, ":"):
		default:
			t.Fatalf("forwarded %q, which no route allows", got)
		}
	})
}

func TestLimitsApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		limits  Limits
		body    string
		want    string
		changed int
	}{
		{"none", Limits{}, `{"model":"x","max_tokens":64000}`, `{"model":"x","max_tokens":64000}`, 0},
		{"model and tokens", Limits{Model: "claude-sonnet-4-5", MaxTokens: 2048},
			`{"model": "claude-haiku-4-5", "max_tokens": 64000, "messages": [{"role":"user","content":"model max_tokens"}]}`,
			`{"model": "claude-sonnet-4-5", "max_tokens": 2048, "messages": [{"role":"user","content":"model max_tokens"}]}`, 2},
		{"within the limits", Limits{Model: "m", MaxTokens: 2048}, `{"model":"m","max_tokens":100}`, `{"model":"m","max_tokens":100}`, 0},
		{"thinking budget kept under the cap", Limits{MaxTokens: 4096},
			`{"max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":10000}}`,
			`{"max_tokens":4096,"thinking":{"budget_tokens":4095,"type":"enabled"}}`, 2},
		{"no room to think", Limits{MaxTokens: 1000},
			`{"max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":10000},"stream":true}`,
			`{"max_tokens":1000,"thinking":{"type":"disabled"},"stream":true}`, 2},
		{"a smaller budget stays", Limits{MaxTokens: 4096}, `{"max_tokens":8000,"thinking":{"type":"enabled","budget_tokens":2000}}`,
			`{"max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2000}}`, 1},
		{"token counting has no max_tokens", Limits{Model: "m", MaxTokens: 10}, `{"model":"x","messages":[]}`, `{"model":"m","messages":[]}`, 1},
		{"not JSON", Limits{Model: "m"}, `{"model":`, `{"model":`, 0},
		{"a repeated key", Limits{Model: "m", MaxTokens: 10}, `{"model":"m","max_tokens":5,"model":"opus","max_tokens":99}`,
			`{"model":"m","max_tokens":5,"model":"m","max_tokens":10}`, 2},
		{"a model that is not a string", Limits{Model: "m"}, `{"model":{"id":"opus"}}`, `{"model":"m"}`, 1},
		{"responses", Limits{Model: "m", MaxTokens: 100}, `{"model":"x","max_output_tokens":5000,"input":[]}`, `{"model":"m","max_output_tokens":100,"input":[]}`, 2},
		{"gemini", Limits{MaxTokens: 100}, `{"contents":[],"generationConfig":{"temperature":1,"maxOutputTokens":5000}}`, `{"contents":[],"generationConfig":{"temperature":1,"maxOutputTokens":100}}`, 1},
		{"nested keys stay", Limits{Model: "m"}, `{"model":"m","metadata":{"model":"x"}}`, `{"model":"m","metadata":{"model":"x"}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, changed := tt.limits.apply([]byte(tt.body))
			if string(got) != tt.want || len(changed) != tt.changed {
				t.Errorf("apply = %s %v, want %s (%d changes)", got, changed, tt.want, tt.changed)
			}
		})
	}
}

// TestProxyHoldsLimits: the upstream sees the assistant's model and token
// limit whatever the sandbox sends, and only on the routes it may use.
func TestProxyHoldsLimits(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var paths []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		paths = append(paths, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"m","type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	t.Cleanup(up.Close)
	s := startSession(t, Options{Upstream: testUpstream(up.URL), Transport: up.Client().Transport, Limits: Limits{Model: "first"}})
	if err := s.SetLimits(Limits{Model: "claude-sonnet-4-5", MaxTokens: 1024}); err != nil {
		t.Fatal(err)
	}
	c := unixClient(s)
	resp := post(t, c, "http://bridge", "//v1/./messages?beta=true", s.Token(), `{"model":"claude-haiku-4-5","max_tokens":32000,"stream":false}`)
	_, _ = io.Copy(io.Discard, resp.Body) // the meter counts the answer as it passes
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || bodies[0] != `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":false}` || paths[0] != "/v1/messages?beta=true" {
		t.Errorf("upstream got %q at %q", bodies, paths)
	}
	if u := s.Usage(); u.InputTokens != 1 {
		t.Errorf("usage = %+v: a rewritten request must still be metered", u)
	}
	req, _ := http.NewRequest("GET", "http://bridge/v1/messages", nil)
	req.Header.Set("X-Api-Key", s.Token())
	r2, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusMethodNotAllowed || r2.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/messages = %d Allow %q", r2.StatusCode, r2.Header.Get("Allow"))
	}
}

// FuzzLimitsApply: holding any body to the limits never panics, and a JSON
// body stays JSON with the model and the cap in it.
func FuzzLimitsApply(f *testing.F) {
	for _, s := range []string{`{"model":"x","max_tokens":99999,"thinking":{"type":"enabled","budget_tokens":50000}}`,
		`{"max_tokens":1e9}`, `{"model":1}`, `{"thinking":{"budget_tokens":"x"},"max_tokens":5}`, `[`, `{"a":{"model":"x"}}`} {
		f.Add([]byte(s))
	}
	l := Limits{Model: "m", MaxTokens: 2048}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, _ := l.apply(body)
		if !gjson.ValidBytes(body) {
			return
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("apply(%s) = %s, not JSON", body, out)
		}
		if !gjson.ParseBytes(body).IsObject() {
			return
		}
		gjson.ParseBytes(out).ForEach(func(k, v gjson.Result) bool {
			switch k.String() {
			case "model":
				if v.Raw != `"m"` {
					t.Fatalf("apply(%s) kept model %s", body, v.Raw)
				}
			case "max_tokens":
				if v.Type != gjson.Number || v.Float() > 2048 {
					t.Fatalf("apply(%s) kept max_tokens %s", body, v.Raw)
				}
			}
			return true
		})
	})
}
