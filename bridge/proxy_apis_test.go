package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestProxyOtherAPIs: Codex's Responses call and the Gemini CLI's
// streamGenerateContent pass with the token in each CLI's header, reach
// the upstream with the key in the header its API wants, and are held to
// the turn's model and token limit (Gemini's model is in its path).
func TestProxyOtherAPIs(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(up.Close)
	// An openai connector: its Responses and Gemini calls pass as they
	// are (only Messages calls are translated).
	conn := testUpstream(up.URL)
	conn.Type = "openai"
	s := startSession(t, Options{Upstream: conn, UpstreamAuth: AuthBearer, Transport: up.Client().Transport})
	if err := s.SetLimits(Limits{Model: "m-turn", MaxTokens: 100}); err != nil {
		t.Fatal(err)
	}
	c := unixClient(s)
	send := func(path, header, value, body string) int {
		req, _ := http.NewRequest("POST", "http://bridge"+path, strings.NewReader(body))
		req.Header.Set(header, value)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send("/v1/responses", "Authorization", "Bearer "+s.Token(), `{"model":"gpt-x","max_output_tokens":5000,"stream":true}`); st != 200 {
		t.Fatalf("responses: %d", st)
	}
	if st := send("/v1beta/models/gemini-x:streamGenerateContent?alt=sse", "X-Goog-Api-Key", s.Token(), `{"generationConfig":{"maxOutputTokens":9000}}`); st != 200 {
		t.Fatalf("gemini: %d", st)
	}
	if st := send("/v1beta/models/gemini-x:streamGenerateContent", "X-Goog-Api-Key", "guessed", `{}`); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("upstream requests %d", len(got))
	}
	r := got[0]
	if r.URL.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer "+realKey || bodies[0] != `{"model":"m-turn","max_output_tokens":100,"stream":true}` {
		t.Errorf("responses upstream: %s %q %s", r.URL.Path, r.Header.Get("Authorization"), bodies[0])
	}
	r = got[1]
	if r.URL.Path != "/v1beta/models/m-turn:streamGenerateContent" || r.URL.Query().Get("alt") != "sse" ||
		r.Header.Get("X-Goog-Api-Key") != realKey || r.Header.Get("Authorization") != "" ||
		bodies[1] != `{"generationConfig":{"maxOutputTokens":100}}` {
		t.Errorf("gemini upstream: %s?%s key %q auth %q %s", r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Goog-Api-Key"), r.Header.Get("Authorization"), bodies[1])
	}
}
