package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequests feeds arbitrary bodies to both chat endpoints: the answer
// is always a 200 stream or a 4xx JSON error that says what was wrong,
// never a 5xx or a panic.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		`{"model":"qa","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"qa","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"message":"hi","chat_id":"c1"}`,
		`{"message":{"role":"user","content":"x"},"options":{"a":1}}`,
		`{"messages":[{"role":"developer","content":null},{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"model":"qa","n":2,"messages":"x"}`,
		"{\n\"model\": [}", `[]`, `null`, `"x"`, ``,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	fb := &fakeBackend{app: testApp()}
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger(), BodyLimit: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body string, native bool) {
		path := "/v1/chat/completions"
		if native {
			path = "/api/assistants/qa/chat"
		}
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusOK:
			ct := rec.Header().Get("Content-Type")
			if ct != "application/json" && !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("200 with content type %q", ct)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("%d error is not an error body: %s", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}

// FuzzPosition: any offset maps to a line and column inside the body.
func FuzzPosition(f *testing.F) {
	f.Add("{\n\"a\":\n1}", int64(5))
	f.Add("", int64(0))
	f.Fuzz(func(t *testing.T, body string, off int64) {
		line, col := position([]byte(body), off)
		if line < 1 || col < 1 || line > strings.Count(body, "\n")+1 || col > len(body)+1 {
			t.Fatalf("position(%q, %d) = %d:%d", body, off, line, col)
		}
	})
}
