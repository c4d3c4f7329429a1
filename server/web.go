package server

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/testrun"
)

// pagePolicy is the Content-Security-Policy of the web app's page: its own
// scripts only (nothing from elsewhere, no inline script but the test
// report's, which runs in a sandboxed frame of the page), connections to
// this server only, images from it and from blobs (the file viewer),
// inline styles, which the terminal emulator and the test report set, and
// frames of its own and, when the server serves previews, of the preview
// hosts (*.previewDomain, any port): the embedded desktop.
func pagePolicy(previewDomain string) string {
	frames := "frame-src 'self'"
	if previewDomain != "" {
		frames += " *." + previewDomain + ":*"
	}
	return "default-src 'self'; script-src 'self' " + testrun.ReportScriptHash + "; style-src 'self' 'unsafe-inline'; img-src 'self' blob: data:; " +
		"font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " + frames
}

// notBuilt is the page of a binary built without the web app.
const notBuilt = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>agentbox</title></head>
<body><h1>agentbox</h1><p>This binary was built without its web app: build it with <code>make build</code>
(which bundles web/src), or use the HTTP API.</p></body></html>
`

// webAssets serves the web app's files, compressing them once when a
// client takes gzip.
type webAssets struct {
	files  fs.FS
	policy string // pagePolicy
	mu     sync.Mutex
	gz     map[string][]byte
}

func (s *Server) webRoutes(mux *http.ServeMux) {
	domain := ""
	if s.cfg.Previews != nil {
		domain = s.cfg.Previews.Domain()
	}
	a := &webAssets{files: s.cfg.Assets, policy: pagePolicy(domain), gz: map[string][]byte{}}
	mux.Handle("GET /{$}", s.authed(a.page, true))
	mux.Handle("GET /assets/{file...}", s.authed(a.asset, true))
	s.routeList = append(s.routeList, Route{Method: "GET", Path: "/", Public: true}, Route{Method: "GET", Path: "/assets/{file}", Public: true})
}

func pageHeaders(h http.Header, policy string) {
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// page is GET /: the web app (it asks for the bearer token itself; the
// page holds no data).
func (a *webAssets) page(w http.ResponseWriter, r *http.Request, _ string) {
	h := w.Header()
	pageHeaders(h, a.policy)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	b, err := fs.ReadFile(a.files, "index.html")
	if err != nil {
		b = []byte(notBuilt)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// asset is GET /assets/NAME: the bundle's files, whose names hold a hash
// of their content, so they are cached for good.
func (a *webAssets) asset(w http.ResponseWriter, r *http.Request, _ string) {
	name := r.PathValue("file")
	if strings.Contains(name, "..") {
		writeError(w, nil, notFound("no asset %q", name))
		return
	}
	p := path.Join("assets", name)
	b, err := fs.ReadFile(a.files, p)
	if err != nil {
		writeError(w, nil, notFound("no asset %q", name))
		return
	}
	h := w.Header()
	pageHeaders(h, a.policy)
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Add("Vary", "Accept-Encoding")
	if headerHasToken(r.Header, "Accept-Encoding", "gzip") && len(b) > 1024 {
		h.Set("Content-Encoding", "gzip")
		b = a.gzipped(p, b)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

func (a *webAssets) gzipped(p string, b []byte) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if z, ok := a.gz[p]; ok {
		return z
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	a.gz[p] = buf.Bytes()
	return a.gz[p]
}
