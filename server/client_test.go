package server

import (
	"net/http/httptest"
	"testing"

	"github.com/agentbox/agentbox/jsapi"
)

// TestClientOf: the request's client by Yao's rules: the query before
// the X-Yao-* header before the metadata, Yao's defaults for a referer or
// accept it does not know, the type from the User-Agent.
func TestClientOf(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/api/chat?theme=Dark&referer=agent", nil)
	r.RemoteAddr = "192.0.2.7:4711"
	r.Header.Set("User-Agent", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0)")
	r.Header.Set("X-Yao-Theme", "light")
	r.Header.Set("X-Yao-Route", "/chat/1")
	r.Header.Set("X-Yao-Accept", "bogus")
	got := clientOf(r, map[string]any{"route": "/other", "accept": "cui-web"})
	want := jsapi.Client{Type: "macos", UserAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0)", IP: "192.0.2.7",
		Theme: "dark", Referer: "agent", Accept: "standard", Route: "/chat/1"}
	if got != want {
		t.Errorf("clientOf = %+v\nwant %+v", got, want)
	}
	r = httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("User-Agent", "")
	got = clientOf(r, map[string]any{"referer": "made-up", "accept": "cui-native", "theme": "dark"})
	if got.Type != "web" || got.Referer != "api" || got.Accept != "cui-native" || got.Theme != "dark" {
		t.Errorf("clientOf = %+v", got)
	}
	for ua, want := range map[string]string{"yao-jssdk/1": "jssdk", "Mozilla/5.0 (Linux; Android 14)": "android", "Mozilla/5.0 (iPhone)": "ios", "curl/8.5": "web"} {
		if got := clientType(ua); got != want {
			t.Errorf("clientType(%q) = %q, want %q", ua, got, want)
		}
	}
}
