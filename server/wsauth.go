package server

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// WebSocketTokenPrefix marks a bearer token offered as a WebSocket
// subprotocol: browsers cannot set headers on a WebSocket, so the web app
// offers "agentbox.bearer.<the token, base64url without padding>" beside
// TerminalProtocol (as Kubernetes does for its exec streams). The server
// never selects it, so it is not echoed back.
const WebSocketTokenPrefix = "agentbox.bearer."

// headerTokens returns the comma-separated values of the header name,
// trimmed.
func headerTokens(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

// headerHasToken reports whether the header name lists token (case
// insensitive).
func headerHasToken(h http.Header, name, token string) bool {
	for _, t := range headerTokens(h, name) {
		if strings.EqualFold(t, token) {
			return true
		}
	}
	return false
}

// webSocketToken returns the bearer token a WebSocket request offers as
// a subprotocol, or "" when it offers none (or one that is not base64url).
func webSocketToken(r *http.Request) string {
	if !isWebSocket(r) {
		return ""
	}
	for _, p := range headerTokens(r.Header, "Sec-WebSocket-Protocol") {
		if enc, ok := strings.CutPrefix(p, WebSocketTokenPrefix); ok {
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				return ""
			}
			return string(b)
		}
	}
	return ""
}
