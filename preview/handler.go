package preview

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Handler serves the preview hosts (see Owns): the ticket exchange, the
// access checks, and the relay to the sandbox's port. Put it in front of
// the API for the hosts Owns says yes to, and only for those.
func (m *Manager) Handler() http.Handler {
	return http.HandlerFunc(m.serve)
}

func (m *Manager) serve(w http.ResponseWriter, r *http.Request) {
	token, ok := m.tokenOf(r.Host)
	if !ok {
		page(w, http.StatusNotFound, "No such preview", "This address is not a preview of this server.", false)
		return
	}
	m.mu.Lock()
	t := m.byToken[token]
	m.mu.Unlock()
	if t == nil {
		page(w, http.StatusNotFound, "No such preview",
			"This preview does not exist, or it ended long ago. Open the preview again from its chat.", false)
		return
	}
	if why := t.sb.endedWhy(); why != "" {
		page(w, http.StatusGone, "Preview ended",
			"The sandbox that served this preview has stopped ("+why+"). Send the chat a message to start it again, then open the preview from the chat.", false)
		return
	}
	user := t.sb.owner.User
	// A preview embedded in the web app (the desktop) is a frame of
	// another site, where a browser sends only a SameSite=None cookie,
	// which must be Secure: over HTTPS, and on *.localhost, which browsers
	// trust as a secure context over plain HTTP too; Partitioned (the
	// cookie is kept for the embedding site alone) lets it through where
	// third-party cookies are blocked. Elsewhere on plain HTTP the cookie
	// is Lax: the preview opens in a tab of its own.
	secure := r.TLS != nil || isLocalhost(r.Host)
	sameSite := http.SameSiteLaxMode
	if secure {
		sameSite = http.SameSiteNoneMode
	}
	if tk := r.URL.Query().Get(TicketParam); tk != "" {
		if err := m.verify(tk, token, user); err != nil {
			page(w, http.StatusForbidden, "Preview refused", err.Error()+": open the preview again from its chat.", false)
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: m.sign(token, user, time.Now().Add(m.cfg.CookieTTL)),
			Path: "/", MaxAge: int(m.cfg.CookieTTL / time.Second),
			HttpOnly: true, Secure: secure, SameSite: sameSite, Partitioned: secure,
		})
		q := r.URL.Query()
		q.Del(TicketParam)
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		if u.Path == "" {
			u.Path = "/"
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		page(w, http.StatusForbidden, "Preview refused", "This preview is private to its chat's user: open it from the chat.", false)
		return
	}
	if err := m.verify(c.Value, token, user); err != nil {
		page(w, http.StatusForbidden, "Preview refused", err.Error()+": open the preview again from its chat.", false)
		return
	}
	m.proxy(t, w, r)
}

// proxy relays r to t's port in the sandbox. The app sees the Host it was
// started for ("localhost:PORT", as the agent reached it) and the path
// as requested; X-Forwarded-Host and -Proto tell it the preview's. The
// preview's cookie never reaches it.
func (m *Manager) proxy(t *target, w http.ResponseWriter, r *http.Request) {
	inner := "localhost:" + strconv.Itoa(t.port.Port)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	outer := scheme + "://" + r.Host
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = inner
			pr.Out.Host = inner
			pr.Out.Header.Set("X-Forwarded-Host", r.Host)
			stripCookie(pr.Out.Header)
			// A WebSocket server that checks Origin expects its own.
			if o := pr.Out.Header.Get("Origin"); o == outer {
				pr.Out.Header.Set("Origin", "http://"+inner)
			}
		},
		Transport:     t.sb.tr,
		FlushInterval: -1, // stream: server-sent events, chunked output
		BufferPool:    copyBuffers,
		ModifyResponse: func(resp *http.Response) error {
			// Redirects the app makes to itself stay on the preview.
			if loc := resp.Header.Get("Location"); loc != "" {
				if u, err := url.Parse(loc); err == nil && u.IsAbs() && isInner(u.Host, t.port.Port) {
					u.Scheme, u.Host = scheme, r.Host
					resp.Header.Set("Location", u.String())
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			switch {
			case t.sb.endedWhy() != "":
				page(w, http.StatusGone, "Preview ended", "The sandbox that served this preview has stopped ("+t.sb.endedWhy()+").", false)
			case errors.Is(err, ErrNotListening):
				page(w, http.StatusBadGateway, "Nothing here yet",
					fmt.Sprintf("Nothing listens on port %d in the sandbox yet. This page retries every few seconds.", t.port.Port), true)
			case errors.Is(err, context.Canceled):
				// The client went away.
			default:
				page(w, http.StatusBadGateway, "Preview unavailable",
					fmt.Sprintf("The app on port %d did not answer: %v", t.port.Port, err), true)
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// copyBuffers are the proxy's copy buffers, 256 KiB: a large answer
// takes an eighth of the system calls of the default 32 KiB (through the
// handler, 16 MiB took 1.3 times the direct time instead of 1.5:
// BenchmarkHandlerLargeBody).
var copyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}}

// bufferPool is a sync.Pool as an httputil.BufferPool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(p []byte) { b.p.Put(&p) }

// isInner reports whether host names the app's own address.
func isInner(host string, port int) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != strconv.Itoa(port) {
		return false
	}
	return h == "localhost" || h == "127.0.0.1" || h == "0.0.0.0" || h == "::1"
}

// stripCookie removes the preview's own cookie from a Cookie header.
func stripCookie(h http.Header) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != CookieName && strings.TrimSpace(part) != "" {
				keep = append(keep, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Retry}}<meta http-equiv="refresh" content="3">{{end}}
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}p{color:#555}</style></head>
<body><h1 data-agentbox-preview="{{.Status}}">{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// page answers with one of the preview's own pages.
func page(w http.ResponseWriter, status int, title, text string, retry bool) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if retry {
		h.Set("Retry-After", "3")
	}
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct {
		Title, Text string
		Status      int
		Retry       bool
	}{title, text, status, retry})
}

// isLocalhost reports whether host (with or without a port) is localhost
// or a name under it.
func isLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
