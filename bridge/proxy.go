package bridge

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// MaxModelRequest caps a model request body (the Messages API's own limit).
const MaxModelRequest = 32 << 20

// DefaultAnthropicHost is the upstream of an anthropic connector without a
// host; DefaultOpenAIHost an openai connector's.
const (
	DefaultAnthropicHost = "https://api.anthropic.com"
	DefaultOpenAIHost    = "https://api.openai.com"
)

// sharedTransport carries upstream requests of every session, so TLS
// connections to the model API are reused across requests.
var sharedTransport http.RoundTripper = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	t.IdleConnTimeout = 90 * time.Second
	return t
}()

// upstreamTarget is where the proxy forwards, with the real key, and the
// connector's circuit breaker.
type upstreamTarget struct {
	url     *url.URL
	key     string
	auth    string
	breaker *breaker.Breaker
	// chat is set for an openai connector: the CLI's Messages calls are
	// translated to Chat Completions (openaicompat.go); model is the
	// connector's model, which they name.
	chat  bool
	model string
}

func newUpstream(c executor.Connection, auth string, b *breaker.Breaker) (*upstreamTarget, error) {
	host := c.Host
	if host == "" {
		switch c.Type {
		case "anthropic":
			host = DefaultAnthropicHost
		case "openai":
			host = DefaultOpenAIHost
		default:
			return nil, fmt.Errorf("model proxy: connector %s has no host", c.Type)
		}
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("model proxy: connector host: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("model proxy: connector host %q: want http(s)://HOST[:PORT][/PATH]", host)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("model proxy: connector host %q: no credentials, query or fragment allowed", u.Redacted())
	}
	switch auth {
	case "":
		auth = AuthAPIKey
	case AuthAPIKey, AuthBearer:
	default:
		return nil, fmt.Errorf("model proxy: upstream auth %q: want %q or %q", auth, AuthAPIKey, AuthBearer)
	}
	if c.Type == "openai" {
		// OpenAI-compatible hosts take the key as a bearer token.
		return &upstreamTarget{url: u, key: c.Key, auth: AuthBearer, breaker: b, chat: true, model: c.Model}, nil
	}
	return &upstreamTarget{url: u, key: c.Key, auth: auth, breaker: b}, nil
}

// modelServer is the host side of the model proxy: an HTTP server on the
// model socket.
type modelServer struct {
	s       *Session
	up      atomic.Pointer[upstreamTarget]
	ln      net.Listener
	srv     *http.Server
	proxy   *httputil.ReverseProxy
	token   string
	revoked atomic.Bool
	meter   meter
	// refused is the first circuit-open error a request of this session
	// was refused with.
	refused atomic.Pointer[chat.Error]
	limits  atomic.Pointer[Limits]
}

func newModelServer(s *Session, up *upstreamTarget, ln net.Listener) *modelServer {
	m := &modelServer{s: s, ln: ln, token: "agentbox-bridge-" + randomName(24)}
	m.up.Store(up)
	tr := s.opts.Transport
	if tr == nil {
		tr = sharedTransport
	}
	m.proxy = &httputil.ReverseProxy{
		Rewrite:        m.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // stream every chunk as it arrives
		ModifyResponse: m.modifyResponse,
		ErrorHandler:   m.errorHandler,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	m.srv = &http.Server{
		Handler:           m,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	return m
}

func (m *modelServer) serve() {
	if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		m.s.log.Warn("bridge model proxy: serve", "err", err)
	}
}

// revoke makes the token stale: every later request gets 401.
func (m *modelServer) revoke() { m.revoked.Store(true) }

func (m *modelServer) close() error {
	m.revoke()
	if err := m.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge model proxy close: %w", err)
	}
	return nil
}

// ServeHTTP checks the token, the deadline, the route and the body, then
// forwards.
func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		// Claude Code probes its base URL before the first request; the
		// answer reveals nothing and needs no upstream.
		w.WriteHeader(http.StatusOK)
		return
	}
	if m.revoked.Load() || !m.validToken(r) {
		m.s.log.Warn("bridge model proxy: refused", "path", r.URL.Path, "reason", "bad or stale token")
		apiError(w, http.StatusUnauthorized, "authentication_error", "agentbox bridge: invalid or expired token for this request")
		return
	}
	if err := m.s.active().Err(); err != nil {
		apiError(w, http.StatusForbidden, "permission_error", "agentbox bridge: the request's deadline has passed")
		return
	}
	clean, rerr := checkRoute(r)
	if rerr != nil {
		m.s.log.Warn("bridge model proxy: refused", "method", r.Method, "path", r.URL.Path, "reason", rerr.msg)
		if rerr.allow != "" {
			w.Header().Set("Allow", rerr.allow)
		}
		apiError(w, rerr.status, rerr.typ, "agentbox bridge: "+rerr.msg)
		return
	}
	// The connector's breaker: while it is open the CLI's call is refused
	// with a status it does not retry, so the turn fails at once with a
	// clear error instead of piling retries on a failing upstream. Not a
	// 503: Claude Code retries 5xx answers whatever x-should-retry says
	// (seen: 10 attempts over 3 minutes), and every retry after the
	// cooldown would be another probe; a 400 it reports at once.
	up := m.up.Load()
	done, err := up.breaker.Allow()
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) {
			m.refused.CompareAndSwap(nil, ce)
			w.Header().Set("Retry-After", fmt.Sprint(int(ce.RetryAfter.Seconds()+0.999)))
		}
		w.Header().Set("X-Should-Retry", "false")
		m.s.log.Warn("bridge model proxy: refused", "path", r.URL.Path, "reason", "circuit breaker open")
		apiError(w, http.StatusBadRequest, "invalid_request_error", "agentbox bridge: "+err.Error())
		return
	}
	// Whatever path the call takes, it reports its outcome once; a call
	// that never reached the upstream (refused here, cut by the sandbox)
	// says nothing about it.
	defer done(breaker.Ignore)
	// What is forwarded is what was checked, with the turn's model in a
	// Gemini path.
	if l := m.limits.Load(); l != nil && l.Model != "" && GeminiRoute(clean) {
		model, method, _ := strings.Cut(strings.TrimPrefix(clean, "/v1beta/models/"), ":")
		if model != l.Model {
			clean = "/v1beta/models/" + l.Model + ":" + method
			m.s.log.Info("bridge model proxy: request held to the assistant's limits", "path", clean, "changed", []string{"model " + model + " -> " + l.Model})
		}
	}
	r.URL.Path, r.URL.RawPath = clean, ""
	r.Body = http.MaxBytesReader(w, r.Body, MaxModelRequest)
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				apiError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("agentbox bridge: request body exceeds %d bytes", mbe.Limit))
				return
			}
			apiError(w, http.StatusBadRequest, "invalid_request_error", "agentbox bridge: the request body could not be read")
			return
		}
		if l := m.limits.Load(); l != nil {
			var changed []string
			if body, changed = l.apply(body); len(changed) > 0 {
				m.s.log.Info("bridge model proxy: request held to the assistant's limits", "path", clean, "changed", changed)
			}
		}
		if up.chat && messagesRoute(clean) {
			if clean == "/v1/messages/count_tokens" {
				// Chat Completions has no token count: an estimate (four
				// bytes a token) serves the CLI's context bookkeeping.
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4+1)
				return
			}
			if body, err = messagesToChat(body, up.model); err != nil {
				apiError(w, http.StatusBadRequest, "invalid_request_error", "agentbox bridge: "+err.Error())
				return
			}
			// Messages API query parameters (beta=true) mean nothing there.
			r.URL.Path, r.URL.RawQuery = "/v1/chat/completions", ""
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Length")
	} else if up.chat {
		apiError(w, http.StatusNotFound, "not_found_error", "agentbox bridge: "+clean+" has no counterpart on the assistant's OpenAI-compatible connector")
		return
	}
	// The call ends with the sandbox's connection or the session (Close,
	// request deadline), whichever comes first.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(m.s.active(), cancel)
	defer stop()
	r = r.WithContext(context.WithValue(ctx, reqInfoKey{}, reqInfo{start: start, path: clean, up: up, done: done}))
	m.proxy.ServeHTTP(w, r)
}

// messagesRoute reports a (checked) Messages API path: what an openai
// upstream gets translated. The Responses API (Codex, opencode) and the
// Gemini API pass as they are.
func messagesRoute(p string) bool { return strings.HasPrefix(p, "/v1/messages") }

// reqInfo is what the response side needs to know of the incoming request.
type reqInfo struct {
	start time.Time
	path  string
	// up is the upstream the request goes to (SetUpstream may change the
	// session's meanwhile); done reports the outcome to its breaker.
	up   *upstreamTarget
	done func(breaker.Outcome)
}

type reqInfoKey struct{}

// validToken compares the presented token in constant time. Claude Code
// sends ANTHROPIC_API_KEY as x-api-key, ANTHROPIC_AUTH_TOKEN (and Codex and
// opencode their key) as a bearer token, the Gemini CLI x-goog-api-key.
func (m *modelServer) validToken(r *http.Request) bool {
	got := r.Header.Get("X-Api-Key")
	if got == "" {
		got = r.Header.Get("X-Goog-Api-Key")
	}
	if got == "" {
		if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			got = a[7:]
		}
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(m.token)) == 1
}

// rewrite points the request at the upstream and swaps the token for the
// real key.
func (m *modelServer) rewrite(pr *httputil.ProxyRequest) {
	up := m.up.Load()
	if info, ok := pr.In.Context().Value(reqInfoKey{}).(reqInfo); ok && info.up != nil {
		up = info.up
	}
	pr.SetURL(up.url)
	pr.Out.URL.Path, pr.Out.URL.RawPath = upstreamPath(up.url.Path, pr.In.URL.Path), ""
	h := pr.Out.Header
	h.Del("X-Api-Key")
	h.Del("X-Goog-Api-Key")
	h.Del("Authorization")
	h.Del("Cookie")
	// Let the transport negotiate compression and decompress, so the meter
	// reads plain JSON and SSE.
	h.Del("Accept-Encoding")
	if up.key != "" {
		switch {
		case GeminiRoute(pr.In.URL.Path):
			// The Gemini API takes a key in this header only.
			h.Set("X-Goog-Api-Key", up.key)
		case up.auth == AuthBearer:
			h.Set("Authorization", "Bearer "+up.key)
		default:
			h.Set("X-Api-Key", up.key)
		}
	}
}

// upstreamPath is where a request the CLI sent to path goes under the
// connector host's base path, by Yao's rule for hosts (connector.endpoint
// for direct calls): a host ending in "/" is the API's base as it is
// ("https://h/api/" → https://h/api/messages for /v1/messages), one ending
// in /v1 already holds the version (no /v1/v1), any other gets the path
// as the CLI sent it.
func upstreamPath(base, path string) string {
	rest, versioned := strings.CutPrefix(path, "/v1/")
	switch {
	case base == "":
		return path
	case versioned && strings.HasSuffix(base, "/"):
		return base + rest
	case versioned && strings.HasSuffix(base, "/v1"):
		return base + "/" + rest
	}
	return strings.TrimSuffix(base, "/") + path
}

// modifyResponse meters successful responses as they stream through.
func (m *modelServer) modifyResponse(resp *http.Response) error {
	req := resp.Request
	info, _ := req.Context().Value(reqInfoKey{}).(reqInfo)
	if info.up != nil && info.up.chat && messagesRoute(info.path) {
		if err := fromChat(resp, info.up.model); err != nil {
			return err
		}
	}
	mb := &meterBody{rc: resp.Body, m: &m.meter, sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	outcome := breaker.OfStatus(resp.StatusCode)
	if outcome != breaker.Success && info.done != nil {
		info.done(outcome)
	}
	mb.onDone = func(u usageFields) {
		m.s.log.Info("bridge model request", "path", info.path, "status", resp.StatusCode,
			"duration", time.Since(info.start), "input_tokens", u.input, "output_tokens", u.output)
		if info.done == nil {
			return
		}
		// An answer the upstream cut short is its failure; one the
		// sandbox or the session stopped reading says nothing.
		switch {
		case mb.readErr == nil:
			info.done(breaker.Success)
		case req.Context().Err() == nil:
			info.done(breaker.Failure)
		}
	}
	// Only answered Messages calls count; errors, token counts and model
	// listings pass through unmetered.
	mb.metered = resp.StatusCode/100 == 2 && info.path == "/v1/messages"
	resp.Body = mb
	return nil
}

func (m *modelServer) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	if info, ok := r.Context().Value(reqInfoKey{}).(reqInfo); ok && info.done != nil &&
		m.s.active().Err() == nil && r.Context().Err() == nil && !errors.As(err, &mbe) {
		info.done(breaker.Failure) // the upstream could not be reached
	}
	switch {
	case m.s.active().Err() != nil:
		m.s.log.Warn("bridge model proxy: request ended by the session", "path", r.URL.Path)
		apiError(w, http.StatusGatewayTimeout, "timeout_error", "agentbox bridge: the request's deadline has passed")
	case errors.Is(err, context.Canceled):
		// The sandbox went away; nobody reads the answer.
	default:
		if errors.As(err, &mbe) {
			apiError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("agentbox bridge: request body exceeds %d bytes", mbe.Limit))
			return
		}
		// The error names the upstream host, never the key.
		m.s.log.Warn("bridge model proxy: upstream", "err", err)
		apiError(w, http.StatusBadGateway, "api_error", "agentbox bridge: the model host could not be reached")
	}
}

// apiError writes an error in the Anthropic API's shape, which the CLI
// reports as it is.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// meter sums usage over a session's model requests.
type meter struct {
	mu sync.Mutex
	u  usageFields
	n  int
}

func (m *meter) add(u usageFields, counted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.input += u.input
	m.u.output += u.output
	m.u.cacheRead += u.cacheRead
	m.u.cacheCreation += u.cacheCreation
	if counted {
		m.n++
	}
}
