package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/assistant"
)

// Error codes of the guard.
const (
	// CodeHostNotAllowed: the Host header names a host the server does
	// not answer to (a DNS-rebinding page, or a name missing from
	// allowed_hosts).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeCrossOrigin: a browser sent a state-changing request or a
	// WebSocket upgrade for a page of another origin.
	CodeCrossOrigin = "cross_origin"
)

// guard refuses what a web page the user visits could make their browser
// send to this server. Browsers attach no bearer token on their own, but a
// development server (no tokens) trusts every request, and even with
// tokens a page must not start work in a user's name. Two checks:
//
//   - Host: a page on rebind.evil.example whose name the attacker points
//     at 127.0.0.1 is same-origin with this server in the browser's eyes,
//     so it could read every answer. Only names the server answers to
//     pass: IP addresses (an address cannot be rebound), localhost, the
//     listen address's host and allowed_hosts; with tokens and no
//     allowed_hosts, any name (a rebinding page holds no token).
//   - Origin: a state-changing request (any method but GET, HEAD and
//     OPTIONS) and every WebSocket upgrade must come from the server's own
//     pages or an allowed_origins page, as the browser tells with
//     Sec-Fetch-Site, else Origin (http.CrossOriginProtection). Clients
//     that are not browsers send neither header and pass.
//
// Pages of allowed_origins also get CORS answers, so that they can send
// the JSON requests and headers the API takes.
type guard struct {
	// anyHost: every Host passes (tokens and no allowed_hosts).
	anyHost bool
	// hosts are the names that pass, lower case; "*.example.com" matches
	// every name under example.com.
	hosts []string
	// dev words the Host error for development mode.
	dev     bool
	origins map[string]bool
	cop     *http.CrossOriginProtection
	// wsPatterns are the allowed origins' hosts, for the WebSocket
	// library's own Origin check.
	wsPatterns []string
}

func newGuard(cfg Config, dev bool) (*guard, error) {
	g := &guard{dev: dev, anyHost: !dev && len(cfg.AllowedHosts) == 0, origins: map[string]bool{}, cop: http.NewCrossOriginProtection()}
	g.hosts = []string{"localhost"}
	if h := hostOnly(cfg.Addr); h != "" && net.ParseIP(h) == nil {
		g.hosts = append(g.hosts, h)
	}
	for _, h := range cfg.AllowedHosts {
		n, err := assistant.CheckAllowedHost(h)
		if err != nil {
			return nil, err
		}
		g.hosts = append(g.hosts, n)
	}
	for _, o := range cfg.AllowedOrigins {
		n, err := assistant.CheckAllowedOrigin(o)
		if err != nil {
			return nil, err
		}
		if err := g.cop.AddTrustedOrigin(n); err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		g.origins[n] = true
		u, _ := url.Parse(n)
		g.wsPatterns = append(g.wsPatterns, u.Host)
	}
	return g, nil
}

// hostOnly is the host of a "host:port" or a host, without brackets, in
// lower case and without a trailing dot.
func hostOnly(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// hostAllowed reports whether requests may name host (the Host header).
func (g *guard) hostAllowed(host string) bool {
	if g.anyHost {
		return true
	}
	h := hostOnly(host)
	if h == "" || net.ParseIP(h) != nil {
		// No name (an HTTP/1.0 client; browsers always send one), or an
		// address: nothing a page could have rebound.
		return true
	}
	for _, a := range g.hosts {
		if a == h {
			return true
		}
		if sfx, ok := strings.CutPrefix(a, "*"); ok && strings.HasSuffix(h, sfx) {
			return true
		}
	}
	return false
}

// check returns the guard's refusal of r, or nil.
func (g *guard) check(r *http.Request) *httpError {
	if !g.hostAllowed(r.Host) {
		allowed := "localhost, 127.0.0.1, [::1]"
		if len(g.hosts) > 1 {
			allowed += ", " + strings.Join(g.hosts[1:], ", ")
		}
		why := "this server answers only to IP addresses and " + allowed
		if g.dev {
			why = "in development mode (no auth tokens) the server answers only to " + allowed + " and other IP addresses, so that no other site's page reaches it through a name pointed at this host"
		}
		return errorf(http.StatusForbidden, CodeHostNotAllowed,
			"Host %q is refused: %s; add the name to allowed_hosts in app.jsonc to serve it", r.Host, why)
	}
	if !isWebSocket(r) {
		if err := g.cop.Check(r); err != nil {
			return g.crossOrigin(r)
		}
		return nil
	}
	// A WebSocket upgrade is a GET, which the check lets through; it
	// opens a terminal, so it is checked as a state-changing request.
	up := new(http.Request)
	*up = *r
	up.Method = http.MethodPost
	if err := g.cop.Check(up); err != nil {
		return g.crossOrigin(r)
	}
	return nil
}

// crossOrigin is the refusal of a cross-origin request.
func (g *guard) crossOrigin(r *http.Request) *httpError {
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = "none"
	}
	what := "a request that changes state"
	if isWebSocket(r) {
		what = "a WebSocket"
	}
	from := fmt.Sprintf("Origin %s, not this server's %s", origin, r.Host)
	if sfs := r.Header.Get("Sec-Fetch-Site"); sfs != "" {
		from = fmt.Sprintf("Sec-Fetch-Site: %s, Origin %s", sfs, origin)
	}
	return errorf(http.StatusForbidden, CodeCrossOrigin,
		"%s %s from a page of another origin is refused (%s): only the server's own pages may send it; add the page's origin to allowed_origins in app.jsonc to allow it", r.Method, what, from)
}

// corsMethods and corsHeaders are what pages of allowed origins may send;
// corsExpose what they may read.
const (
	corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Last-Event-ID, X-Chat-ID, X-Request-ID, X-User-ID, Accept-Language"
	corsExpose  = "X-Chat-ID, X-Turn-ID, X-Request-ID, Retry-After"
)

// cors answers a preflight of an allowed origin's page (and reports that
// it did), or marks the answer to an allowed origin's request readable
// by it. Credentials are never allowed: the API takes bearer tokens, not
// cookies.
func (g *guard) cors(w http.ResponseWriter, r *http.Request) (answered bool) {
	origin := r.Header.Get("Origin")
	if len(g.origins) == 0 {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if !g.origins[origin] {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", corsExpose)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", strconv.Itoa(600))
	w.WriteHeader(http.StatusNoContent)
	return true
}

// guarded runs next for the requests the guard lets through.
func (s *Server) guarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.guard.check(r); err != nil {
			if s.guard.origins[r.Header.Get("Origin")] {
				// An allowed page learns why (it passed the Origin check,
				// so this is its Host).
				w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			}
			s.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host,
				"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "code", err.Err.Code)
			writeError(w, nil, err)
			return
		}
		if s.guard.cors(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonContentType reports whether a Content-Type header names JSON
// (application/json, with any parameters).
func jsonContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}
