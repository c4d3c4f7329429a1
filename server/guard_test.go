package server

import (
	"strings"
	"testing"
)

// TestGuardDevMode: without tokens the server trusts every request, so
// only its own pages and clients that are not browsers may reach it: a
// rebinding name is refused whatever it asks, and a page of any other
// origin (another port of localhost too) may not start a turn, cancel
// one or change a chat. Nothing refused reaches the backend.
func TestGuardDevMode(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, func(c *Config) { c.Tokens = nil; c.Addr = "127.0.0.1:8080" })
	port := ts.URL[strings.LastIndex(ts.URL, ":"):]
	turn := `{"chat_id":"c1","message":"hi"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		want                     string
	}{
		{"curl", "POST", "/api/assistants/qa/chat", turn, nil, 200, "event: done"},
		{"own page", "POST", "/api/assistants/qa/chat", turn, []string{"Sec-Fetch-Site", "same-origin", "Origin", ts.URL}, 200, "event: done"},
		{"own page by Origin", "POST", "/api/assistants/qa/chat", turn, []string{"Origin", ts.URL}, 200, "event: done"},
		{"localhost", "GET", "/api/assistants", "", []string{"Host", "localhost" + port}, 200, `"object":"list"`},
		{"LOCALHOST.", "GET", "/api/assistants", "", []string{"Host", "LOCALHOST." + port}, 200, `"object":"list"`},
		{"ipv6 loopback", "GET", "/api/assistants", "", []string{"Host", "[::1]" + port}, 200, `"object":"list"`},
		{"other loopback address", "GET", "/api/assistants", "", []string{"Host", "127.0.0.2" + port}, 200, `"object":"list"`},

		{"rebinding read", "GET", "/api/chats", "", []string{"Host", "rebind.evil.example" + port}, 403, `Host \"rebind.evil.example` + port + `\" is refused`},
		{"rebinding turn", "POST", "/api/assistants/qa/chat", turn, []string{"Host", "rebind.evil.example" + port, "Origin", "http://rebind.evil.example" + port, "Sec-Fetch-Site", "same-origin"}, 403, "allowed_hosts in app.jsonc"},
		{"rebinding page", "GET", "/", "", []string{"Host", "rebind.evil.example"}, 403, "host_not_allowed"},
		{"localhost subdomain", "GET", "/api/chats", "", []string{"Host", "a.localhost" + port}, 403, "host_not_allowed"},

		{"no-cors text/plain", "POST", "/api/assistants/qa/chat", turn, []string{"Content-Type", "text/plain;charset=UTF-8", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "Sec-Fetch-Site: cross-site, Origin https://evil.example"},
		{"form post", "POST", "/api/assistants/qa/chat", "message=hi", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "null", "Sec-Fetch-Site", "cross-site"}, 403, "allowed_origins in app.jsonc"},
		{"other port of localhost", "POST", "/api/assistants/qa/chat", turn, []string{"Origin", "http://localhost:3000", "Sec-Fetch-Site", "same-site"}, 403, "cross_origin"},
		{"old browser, other origin", "POST", "/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"hi"}]}`, []string{"Origin", "http://127.0.0.1:9"}, 403, "Origin http://127.0.0.1:9, not this server's"},
		{"cancel", "POST", "/api/chats/c1/cancel", "", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "cross_origin"},
		{"delete", "DELETE", "/api/chats/c1", "", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "cross_origin"},
		{"responses", "POST", "/v1/responses", `{"model":"qa","input":"hi"}`, []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "cross_origin"},
		{"websocket", "GET", "/api/chats/c1/terminal", "", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "GET a WebSocket from a page of another origin is refused"},
		{"websocket, old browser", "GET", "/api/chats/c1/terminal", "", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Origin", "http://localhost:3000"}, 403, "cross_origin"},
		// Reading is left to CORS: a page of another origin cannot read the answer.
		{"cross-site read", "GET", "/api/assistants", "", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 200, `"object":"list"`},
	} {
		before := fb.numCalls()
		resp, body := do(t, ts, tc.method, tc.path, "", tc.body, tc.hdr...)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want %d and %q", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
		if tc.status == 403 {
			if e := apiErr(t, body); e.Type != "permission_error" {
				t.Errorf("%s: error type %q", tc.name, e.Type)
			}
			if fb.numCalls() != before {
				t.Errorf("%s: the refused request ran a turn", tc.name)
			}
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS header without allowed origins: %v", tc.name, resp.Header)
		}
	}
}

// TestGuardAllowLists: allowed_hosts and allowed_origins open the server
// to the names and pages an operator lists, and those pages get CORS
// answers; with tokens and no allowed_hosts, any name passes.
func TestGuardAllowLists(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, func(c *Config) {
		c.Addr = "agentbox.localtest:8080"
		c.AllowedHosts = []string{"dev.example.org", "*.tunnel.example"}
		c.AllowedOrigins = []string{"http://localhost:5173", "https://App.Example.com/"}
	})
	turn := `{"chat_id":"c1","message":"hi"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		acao                     string
	}{
		{"listen host", "GET", "/api/assistants", "", []string{"Host", "agentbox.localtest:8080"}, 200, ""},
		{"allowed host", "GET", "/api/assistants", "", []string{"Host", "dev.example.org"}, 200, ""},
		{"wildcard host", "GET", "/api/assistants", "", []string{"Host", "abc.tunnel.example"}, 200, ""},
		{"wildcard is not its domain", "GET", "/api/assistants", "", []string{"Host", "tunnel.example"}, 403, ""},
		{"suffix is not a subdomain", "GET", "/api/assistants", "", []string{"Host", "eviltunnel.example"}, 403, ""},
		{"localhost", "GET", "/api/assistants", "", []string{"Host", "localhost:8080"}, 200, ""},
		{"allowed origin", "POST", "/api/assistants/qa/chat", turn, []string{"Origin", "http://localhost:5173", "Sec-Fetch-Site", "same-site"}, 200, "http://localhost:5173"},
		{"allowed origin, case", "POST", "/api/assistants/qa/chat", turn, []string{"Origin", "https://app.example.com", "Sec-Fetch-Site", "cross-site"}, 200, "https://app.example.com"},
		{"other origin", "POST", "/api/assistants/qa/chat", turn, []string{"Origin", "http://localhost:5174", "Sec-Fetch-Site", "same-site"}, 403, ""},
		{"websocket, allowed origin", "GET", "/api/chats/c1/terminal", "", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Origin", "http://localhost:5173", "Sec-Fetch-Site", "same-site"}, 501, "http://localhost:5173"},
	} {
		resp, body := do(t, ts, tc.method, tc.path, tokenAlice, tc.body, tc.hdr...)
		if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.acao {
			t.Errorf("%s: %d %v %s; want %d, Access-Control-Allow-Origin %q", tc.name, resp.StatusCode, resp.Header, body, tc.status, tc.acao)
		}
	}

	// A preflight of an allowed page is answered; another page's is not.
	resp, _ := do(t, ts, "OPTIONS", "/api/assistants/qa/chat", "", "", "Origin", "http://localhost:5173",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "http://localhost:5173" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || h.Get("Access-Control-Allow-Credentials") != "" || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Errorf("preflight: %d %v", resp.StatusCode, h)
	}
	resp, _ = do(t, ts, "OPTIONS", "/api/assistants/qa/chat", "", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = do(t, ts, "GET", "/api/assistants", tokenAlice, "", "Origin", "http://localhost:5173")
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Chat-ID") {
		t.Errorf("allowed page's read: %v", resp.Header)
	}

	// With tokens, any name passes unless allowed_hosts lists names.
	open := startServer(t, newFake(t), func(c *Config) { c.Addr = ":8080" })
	if resp, body := do(t, open, "GET", "/api/chats", tokenAlice, "", "Host", "agentbox.example.net"); resp.StatusCode != 501 {
		t.Errorf("tokens, any host: %d %s", resp.StatusCode, body)
	}
	strict := startServer(t, newFake(t), func(c *Config) { c.Addr = ":8080"; c.AllowedHosts = []string{"agentbox.example.net"} })
	if resp, body := do(t, strict, "GET", "/api/chats", tokenAlice, "", "Host", "other.example.net"); resp.StatusCode != 403 ||
		!strings.Contains(body, "answers only to IP addresses and localhost, 127.0.0.1, [::1], agentbox.example.net") {
		t.Errorf("tokens, allowed hosts: %d %s", resp.StatusCode, body)
	}
}

func TestGuardConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hosts, origins []string
		want           string
	}{
		{[]string{"*"}, nil, `allowed host "*"`},
		{[]string{"example.com:8080"}, nil, "without scheme, port or path"},
		{[]string{"https://example.com"}, nil, "without scheme, port or path"},
		{[]string{"a..b"}, nil, "not a valid host name"},
		{nil, []string{"example.com"}, "want http:// or https://"},
		{nil, []string{"https://example.com/app"}, "scheme://host[:port] and nothing more"},
		{nil, []string{"*"}, "want http:// or https://"},
	} {
		_, err := New(Config{Backend: newFake(t), Logger: quietLogger(), AllowedHosts: tc.hosts, AllowedOrigins: tc.origins})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v; want %q", tc.hosts, tc.origins, err, tc.want)
		}
	}
}
