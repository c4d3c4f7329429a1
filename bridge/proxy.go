package bridge

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

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
	token   atomic.Pointer[string]
	revoked atomic.Bool
	meter   meter
	// refused is the first circuit-open error a request of this session
	// was refused with.
	refused atomic.Pointer[chat.Error]
	limits  atomic.Pointer[Limits]
	// calls are the model calls of the turn at hand (BeginTurn starts a
	// new count); memory bounds the request bodies held at once.
	calls  atomic.Pointer[turnCalls]
	memory *memoryBudget
}

func newModelServer(s *Session, up *upstreamTarget, ln net.Listener) *modelServer {
	conns := s.opts.Connections
	if conns <= 0 {
		conns = DefaultConnections
	}
	ln = &connLimiter{Listener: ln, max: int64(conns), server: s.opts.Server}
	m := &modelServer{s: s, ln: ln, memory: newMemoryBudget(s.opts.Server)}
	tok := NewToken()
	m.token.Store(&tok)
	m.up.Store(up)
	m.calls.Store(newTurnCalls())
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
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext:       connContext,
	}
	return m
}

func (m *modelServer) serve() {
	if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		m.s.log.Warn("bridge model proxy: serve", "err", err)
	}
}

// NewToken makes a model token: what a sandbox presents to a session's
// model proxy (Session.Token, Session.UseToken).
func NewToken() string { return "agentbox-bridge-" + randomName(24) }

// revoke makes the token stale: every later request gets 401.
func (m *modelServer) revoke() { m.revoked.Store(true) }

func (m *modelServer) close() error {
	m.revoke()
	if err := m.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge model proxy close: %w", err)
	}
	return nil
}

// ServeHTTP checks the token, the deadline, the route, the turn's budget,
// the headers and the body, then forwards.
func (m *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		// Claude Code probes its base URL before the first request; the
		// answer reveals nothing and needs no upstream.
		w.WriteHeader(http.StatusOK)
		return
	}
	a := apiOf(r.URL.Path)
	if r.Context().Value(overKey{}) != nil {
		m.refuse(w, r, a, &refusal{status: http.StatusTooManyRequests, typ: errRateLimit, reason: RefusedConnections, retryAfter: 1, close: true,
			msg: "the sandbox holds as many connections to the model proxy as it may; reuse one (keep-alive) or retry once one closed"})
		return
	}
	if m.revoked.Load() || !m.validToken(r) {
		m.refuse(w, r, a, &refusal{status: http.StatusUnauthorized, typ: errAuth, msg: "invalid or expired token for this request"})
		return
	}
	if err := m.s.active().Err(); err != nil {
		m.refuse(w, r, a, &refusal{status: http.StatusForbidden, typ: errPermission, msg: "the request's deadline has passed"})
		return
	}
	rt, clean, f := checkRoute(r)
	if f != nil {
		m.refuse(w, r, a, f)
		return
	}
	a = rt.api
	l := m.limits.Load()
	if ferr := checkBetas(r.Header, l.longContext()); ferr != nil {
		m.refuse(w, r, a, ferr.refusal())
		return
	}
	// The call, and its waits, end with the sandbox's connection or the
	// session (Close, the turn's deadline), whichever comes first.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(m.s.active(), cancel)
	defer stop()
	// Every call counts against the turn's, as it arrives; past the bound
	// none reaches the provider, and the CLI is told not to retry (Claude
	// Code retries a 429 otherwise).
	calls := m.calls.Load()
	if !calls.admit(l.calls()) {
		m.refuse(w, r, a, &refusal{status: http.StatusTooManyRequests, typ: errRateLimit, reason: RefusedCalls, noRetry: true,
			msg: fmt.Sprintf("this turn made the %d model calls it may (limits.model_proxy.calls_per_turn)", l.calls())})
		return
	}
	// In flight at once: the rest wait, holding only their connection
	// (their bodies are not read yet).
	if err := calls.enter(ctx, l.parallel()); err != nil {
		m.refuse(w, r, a, &refusal{status: http.StatusForbidden, typ: errPermission, msg: "the request's deadline has passed"})
		return
	}
	defer calls.leave()
	// The connector's breaker: while it is open the CLI's call is refused
	// with a status it does not retry, so the turn fails at once with a
	// clear error instead of piling retries on a failing upstream. Not a
	// 503: Claude Code retries 5xx answers whatever x-should-retry says
	// (seen: 10 attempts over 3 minutes), and every retry after the
	// cooldown would be another probe; a 400 it reports at once.
	up := m.up.Load()
	done, err := up.breaker.Allow()
	if err != nil {
		f := &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: err.Error(), noRetry: true}
		var ce *chat.Error
		if errors.As(err, &ce) {
			m.refused.CompareAndSwap(nil, ce)
			f.retryAfter = int(ce.RetryAfter.Seconds() + 0.999)
		}
		m.s.log.Warn("bridge model proxy: refused", "path", clean, "reason", "circuit breaker open")
		writeRefusal(w, a, f)
		return
	}
	// Whatever path the call takes, it reports its outcome once; a call
	// that never reached the upstream (refused here, cut by the sandbox)
	// says nothing about it.
	defer done(breaker.Ignore)
	// What is forwarded is what was checked, with the turn's model in a
	// Gemini path.
	if want := l.model(); want != "" && GeminiRoute(clean) {
		model, method, _ := strings.Cut(strings.TrimPrefix(clean, "/v1beta/models/"), ":")
		if model != want {
			clean = "/v1beta/models/" + want + ":" + method
			m.s.log.Info("bridge model proxy: request held to the assistant's limits", "path", clean, "changed", []string{"model " + model + " -> " + want})
		}
	}
	r.URL.Path, r.URL.RawPath = clean, ""
	chatUp := up.chat && messagesRoute(clean)
	if rt.body == nil {
		if up.chat {
			m.refuse(w, r, a, &refusal{status: http.StatusNotFound, typ: errNotFound, msg: clean + " has no counterpart on the assistant's OpenAI-compatible connector"})
			return
		}
		r.Body, r.ContentLength = http.NoBody, 0
	} else {
		body, release, err := m.memory.readBody(ctx, w, r, rt.maxBody)
		defer release()
		if err != nil {
			m.refuse(w, r, a, m.memory.refusal(err, rt.maxBody))
			return
		}
		if !gjson.ValidBytes(body) {
			m.refuse(w, r, a, &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: "the request body is not valid JSON"})
			return
		}
		if ferr := rt.body(gjson.ParseBytes(body)); ferr != nil {
			m.refuse(w, r, a, ferr.refusal())
			return
		}
		var changed []string
		if body, changed = l.apply(body); len(changed) > 0 {
			m.s.log.Info("bridge model proxy: request held to the assistant's limits", "path", clean, "changed", changed)
		}
		if chatUp {
			if clean == "/v1/messages/count_tokens" {
				// Chat Completions has no token count: an estimate (four
				// bytes a token) serves the CLI's context bookkeeping.
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4+1)
				return
			}
			if body, err = messagesToChat(body, up.model); err != nil {
				m.refuse(w, r, a, &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: err.Error()})
				return
			}
			// Messages API query parameters (beta=true) mean nothing there.
			r.URL.Path, r.URL.RawQuery = "/v1/chat/completions", ""
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Length")
	}
	if dropped := filterHeaders(r.Header, a, chatUp); len(dropped) > 0 {
		m.s.log.Debug("bridge model proxy: headers not forwarded", "path", clean, "headers", dropped)
	}
	m.meter.forwarded()
	r = r.WithContext(context.WithValue(ctx, reqInfoKey{}, reqInfo{start: start, path: clean, rt: rt, up: up, done: done}))
	m.proxy.ServeHTTP(w, r)
}

// refuse answers r with f in its API's shape, logs it, and tells the
// session's OnRefuse of a refusal with a reason, once per reason and field
// in a turn.
func (m *modelServer) refuse(w http.ResponseWriter, r *http.Request, a api, f *refusal) {
	m.s.log.Warn("bridge model proxy: refused", "method", r.Method, "path", r.URL.Path, "status", f.status,
		"reason", cmp.Or(f.reason, f.typ), "field", f.field, "message", f.msg)
	writeRefusal(w, a, f)
	if f.reason != "" && m.s.opts.OnRefuse != nil && m.calls.Load().first(f.reason+"\x00"+f.field) {
		m.s.opts.OnRefuse(Refusal{Reason: f.reason, Field: f.field, Message: "agentbox bridge: " + f.msg})
	}
}

// messagesRoute reports a (checked) Messages API path: what an openai
// upstream gets translated. The Responses API (Codex, opencode) and the
// Gemini API pass as they are.
func messagesRoute(p string) bool { return strings.HasPrefix(p, "/v1/messages") }

// reqInfo is what the response side needs to know of the incoming request.
type reqInfo struct {
	start time.Time
	path  string
	rt    *route
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
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(*m.token.Load())) == 1
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
	// Only answered model calls count; errors, token counts and model
	// listings pass through unmetered.
	if resp.StatusCode/100 == 2 && info.rt != nil {
		mb.usage = info.rt.usage
	}
	resp.Body = mb
	return nil
}

func (m *modelServer) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	info, _ := r.Context().Value(reqInfoKey{}).(reqInfo)
	if info.done != nil && m.s.active().Err() == nil && r.Context().Err() == nil {
		info.done(breaker.Failure) // the upstream could not be reached
	}
	a := apiOf(r.URL.Path)
	if info.rt != nil {
		a = info.rt.api
	}
	switch {
	case m.s.active().Err() != nil:
		m.s.log.Warn("bridge model proxy: request ended by the session", "path", r.URL.Path)
		writeRefusal(w, a, &refusal{status: http.StatusGatewayTimeout, typ: errTimeout, msg: "the request's deadline has passed"})
	case errors.Is(err, context.Canceled):
		// The sandbox went away; nobody reads the answer.
	default:
		// The error names the upstream host, never the key.
		m.s.log.Warn("bridge model proxy: upstream", "err", err)
		writeRefusal(w, a, &refusal{status: http.StatusBadGateway, typ: errAPI, msg: "the model host could not be reached"})
	}
}
