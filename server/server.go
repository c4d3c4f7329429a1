// Package server is agentbox's HTTP API: an OpenAI-compatible
// /v1/chat/completions endpoint, a native server-sent event stream with
// every chat event, assistant listings and a chat's workspace files.
//
// The server authenticates requests (bearer tokens mapped to user ids),
// validates them, and hands each chat turn to a Backend (the pipeline);
// it never decides who a user is from the request body, so one user can
// never reach another user's chats, history or files.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/preview"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/web"
)

// Backend runs chat turns and owns apps and workspaces. *pipeline.Pipeline
// implements it. Implementations are safe for concurrent use.
type Backend interface {
	// Chat runs one turn, calling emit with its events in order, and
	// returns the final response. A failed turn returns an error, a
	// *chat.Error when the failure is understood. The turn ends when
	// ctx ends (the client went away).
	Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error)
	// App returns the current app (assistants and settings).
	App() *assistant.App
	// Workspace acquires the workspace of (user, chat); the caller calls
	// release when done. Errors wrapping sandbox.ErrNotFound become 404,
	// sandbox.ErrInvalidID 400.
	Workspace(ctx context.Context, user, chat string) (ws *sandbox.Workspace, release func(), err error)
}

// Defaults of Config.
const (
	DefaultAddr         = assistant.DefaultListen
	DefaultDrainTimeout = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// Backend runs the turns. Required.
	Backend Backend
	// Chats lists and manages chats, and opens terminals (the /api/chats
	// routes, the files API's uploads); nil answers them with 501.
	Chats Chats
	// Assets are the web app's files served at / (default web.Assets(),
	// the bundle embedded in the binary).
	Assets fs.FS
	// Tokens maps bearer tokens to user ids, already resolved (see
	// ResolveTokens). Empty means development mode, allowed only when Addr
	// is a loopback address: every request is user DevUser, or the user
	// named by the X-User-ID header.
	Tokens map[string]string
	// Teams maps bearer tokens to the team their holder acts for (see
	// ResolveIdentities); a token not in it names no team. The team of a
	// request owns its hooks' ctx.memory.team; no field of a request
	// chooses it.
	Teams map[string]string
	// Addr is the listen address (default DefaultAddr).
	Addr string
	// AllowedHosts are the host names requests may name in Host besides
	// IP addresses, localhost and Addr's host ("*.example.com" for every
	// name under example.com). Without tokens only those pass, so that no
	// page of another site reaches a development server through a name
	// pointed at it (DNS rebinding); with tokens and no AllowedHosts, any
	// name passes.
	AllowedHosts []string
	// AllowedOrigins are the origins of web pages besides the server's own
	// ("https://app.example.com") that may send state-changing requests
	// and open WebSockets; they get CORS answers. Others are refused
	// (browsers tell them by Sec-Fetch-Site and Origin).
	AllowedOrigins []string
	// BodyLimit caps request bodies in bytes; 0: the app's
	// limits.request_body (app.jsonc), read per request, so a reload
	// changes it.
	BodyLimit int64
	// DrainTimeout bounds how long a shutdown waits for running requests
	// before it cancels them (default DefaultDrainTimeout; Abort ends the
	// wait at once).
	DrainTimeout time.Duration
	// Heartbeat is the idle time after which event streams get a ": ping"
	// comment (default DefaultHeartbeat).
	Heartbeat time.Duration
	// Logger receives the access log and errors (default slog.Default()).
	Logger *slog.Logger
	// Metrics is where the server registers its own metrics and what GET
	// /metrics serves (nil: a registry of the server's, with Go's and the
	// process's collectors).
	Metrics *prometheus.Registry
	// MetricsToken is the operator's bearer token for GET /metrics. Without
	// one, /metrics is served only in development mode.
	MetricsToken string
	// Responses keeps the Responses API's stored responses (nil: in
	// memory, the newest 10,000, for the life of the server).
	Responses ResponseStore
	// TerminalIdle is how long a terminal may go without input or output
	// before it is closed (default DefaultTerminalIdle).
	TerminalIdle time.Duration
	// UploadLimit bounds one file uploaded to a workspace, in bytes
	// (default DefaultUploadLimit).
	UploadLimit int64
	// ResumeBuffer bounds the events of one native turn kept for clients
	// that resume its stream, in bytes (default DefaultResumeBuffer);
	// ResumeRetention is how long they are kept after the turn ended
	// (default DefaultResumeRetention).
	ResumeBuffer    int
	ResumeRetention time.Duration
	// Skills is the approval gate of the skills agents propose (nil: the
	// Backend when it is one, else the skill routes answer 404).
	Skills SkillGate
	// Tests runs the app's assistant tests for the web app (nil: the test
	// routes answer 404).
	Tests TestRunner
	// Previews serves the previews of sandbox ports on their own hosts
	// (before every other route and check) and lists a chat's in GET
	// /api/chats/{chat}/ports (nil: no previews; the list is empty).
	Previews *preview.Manager
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg       Config
	log       *slog.Logger
	responses ResponseStore
	routeList []Route
	auth      *authenticator
	guard     *guard
	handler   http.Handler
	started   time.Time
	// runs are the native turns whose events clients can follow.
	runs *runs
	// closing is closed when a shutdown starts: terminals end at once.
	closing     chan struct{}
	closingOnce sync.Once

	// backend is the Backend as configured (cfg.Backend wraps it).
	backend      Backend
	metricsToken []byte // SHA-256 of Config.MetricsToken; nil when none
	promHandler  http.Handler
	smetrics     *serverMetrics

	// inflight counts running handlers, so a shutdown can wait for the
	// backend to finish cleaning up after the connections closed.
	inflight sync.WaitGroup
	// draining is set once a shutdown began; abort ends its drain.
	draining  atomic.Bool
	abort     chan struct{}
	abortOnce sync.Once
}

// New checks cfg and builds a Server. Without tokens it runs in
// development mode, which it refuses on a non-loopback address.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("server: no backend")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Assets == nil {
		cfg.Assets = web.Assets()
	}
	if cfg.TerminalIdle <= 0 {
		cfg.TerminalIdle = DefaultTerminalIdle
	}
	if cfg.UploadLimit <= 0 {
		cfg.UploadLimit = DefaultUploadLimit
	}
	if cfg.ResumeBuffer <= 0 {
		cfg.ResumeBuffer = DefaultResumeBuffer
	}
	if cfg.ResumeRetention <= 0 {
		cfg.ResumeRetention = DefaultResumeRetention
	}
	for tok, user := range cfg.Tokens {
		if strings.TrimSpace(tok) == "" {
			return nil, errors.New("server: empty bearer token")
		}
		if err := validateID("user", user); err != nil {
			return nil, fmt.Errorf("server: token user: %w", err)
		}
	}
	dev := len(cfg.Tokens) == 0
	if dev {
		if !isLoopback(cfg.Addr) {
			return nil, fmt.Errorf("server: no auth tokens configured and %s is not a loopback address: "+
				"add bearer tokens to auth.tokens in app.jsonc, or listen on 127.0.0.1", cfg.Addr)
		}
		cfg.Logger.Warn("development mode: no auth tokens configured, every request is trusted (loopback only)",
			"addr", cfg.Addr, "user", DevUser)
	}
	if cfg.Responses == nil {
		cfg.Responses = newMemResponses()
	}
	if cfg.Skills == nil {
		cfg.Skills, _ = cfg.Backend.(SkillGate)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = newRegistry()
	}
	g, err := newGuard(cfg, dev)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	sm, err := newServerMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger,
		auth:        newAuthenticator(cfg.Tokens, cfg.Teams, dev),
		guard:       g,
		started:     time.Now(),
		backend:     cfg.Backend,
		promHandler: newPromHandler(cfg.Metrics),
		responses:   cfg.Responses,
		smetrics:    sm,
		abort:       make(chan struct{}),
		runs:        newRuns(cfg.ResumeBuffer, cfg.ResumeRetention),
		closing:     make(chan struct{}),
	}
	if tok := strings.TrimSpace(cfg.MetricsToken); tok != "" {
		if _, clash := cfg.Tokens[tok]; clash {
			return nil, errors.New("server: the metrics token is also a user's token: give the operator a token of their own")
		}
		sum := sha256.Sum256([]byte(tok))
		s.metricsToken = sum[:]
	}
	s.cfg.Backend = notingBackend{cfg.Backend}
	s.handler = s.routes()
	return s, nil
}

// DevMode reports whether the server runs without authentication.
func (s *Server) DevMode() bool { return s.auth.dev }

// Addr returns the configured listen address.
func (s *Server) Addr() string { return s.cfg.Addr }

// isLoopback reports whether addr ("host:port" or a host) only listens on
// loopback. An empty host means every interface.
func isLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler returns the API's handler, for embedding in another server.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, h func(http.ResponseWriter, *http.Request, string), public bool) {
		mux.Handle(method+" "+path, s.authed(h, public))
		mux.Handle(path, methodNotAllowed(method))
		s.routeList = append(s.routeList, Route{Method: method, Path: path, Public: public})
	}
	handle("GET", "/health", s.health, true)
	handle("GET", "/metrics", s.metrics, true) // the operator's token, checked by the handler
	handle("GET", "/openapi.json", s.openapi, true)
	handle("GET", "/v1/models", s.models, false)
	handle("GET", "/v1/models/{id}", s.modelByID, false)
	handle("POST", "/v1/chat/completions", s.completions, false)
	handle("POST", "/v1/responses", s.responsesCreate, false)
	handle("GET", "/v1/responses/{id}", s.responsesGet, false)
	handle("GET", "/api/assistants", s.assistants, false)
	handle("GET", "/api/assistants/{id}", s.assistant, false)
	handle("POST", "/api/assistants/{id}/chat", s.nativeChat, false)
	s.chatRoutes(mux, handle)
	s.skillRoutes(handle)
	s.testRoutes(handle)
	s.webRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, nil, notFound("no route for %s %s", r.Method, r.URL.Path))
	})
	return s.logged(s.previews(s.guarded(mux)))
}

func methodNotAllowed(allow string) http.Handler {
	if allow == "GET" || strings.HasPrefix(allow, "GET, ") {
		allow = "GET, HEAD" + strings.TrimPrefix(allow, "GET")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, nil, chat.Errorf(CodeMethodNotAllowed,
			"method %s is not allowed on %s: use %s", r.Method, r.URL.Path, allow))
	})
}

// authed authenticates the request (unless public) and runs h with the
// user id. It also recovers a panicking handler into a 500.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, string), public bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if rec, ok := w.(*recorder); !ok || !rec.wrote {
					writeError(w, nil, chat.Errorf(chat.ErrInternal, "internal error"))
				}
			}
		}()
		user := ""
		if !public {
			id, err := s.auth.user(r)
			if err != nil {
				writeError(w, s.log, err)
				return
			}
			user = id.user
			r = withTeam(r, id.team)
			if rec, ok := w.(*recorder); ok {
				rec.user = user
			}
		}
		h(w, r, user)
	})
}

// recorder notes the status for the access log. It unwraps to the real
// ResponseWriter so http.ResponseController can flush through it.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	user   string
	// code is the error code the client was told ("" when none).
	code string
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// noteError records the error code a response tells its client, for the
// access log and the error metrics (w is the recorder the handlers get).
func noteError(w http.ResponseWriter, code string) {
	if rec, ok := w.(*recorder); ok && rec.code == "" {
		rec.code = code
	}
}

// logged writes one access log line per request and gives every request
// an X-Request-ID (the client's when it sent a sane one).
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-ID")
		if validateID("request", id) != nil {
			id = newID("req-")
		}
		w.Header().Set("X-Request-ID", id)
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), recorderKey{}, rec)))
		level := slog.LevelInfo
		if rec.status >= 500 && !refusal[rec.code] {
			level = slog.LevelError
		}
		if rec.code != "" {
			s.smetrics.errors.WithLabelValues(rec.code).Inc()
		}
		s.log.Log(r.Context(), level, "http",
			"method", r.Method, "path", r.URL.Path, "status", rec.status, "bytes", rec.bytes,
			"user", rec.user, "request_id", id, "duration_ms", time.Since(start).Milliseconds(),
			"canceled", r.Context().Err() != nil, "error", rec.code)
	})
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ListenAndServe listens on the configured address and serves until ctx
// ends; see Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// CancelGrace bounds how long a shutdown waits, after it canceled the
// requests still running, for their handlers to clean up (remove their
// sandboxes) and return.
const CancelGrace = 10 * time.Second

// Abort ends a shutdown's drain at once: running requests are canceled
// without waiting for DrainTimeout (a second SIGTERM or Ctrl-C). Before a
// shutdown began it only takes effect when one does. It is idempotent.
func (s *Server) Abort() { s.abortOnce.Do(func() { close(s.abort) }) }

// Serve serves on ln until ctx ends, then stops accepting, lets running
// requests finish for up to DrainTimeout (or until Abort), cancels those
// still running (their turns end with a shutting_down error and remove
// their sandboxes), waits up to CancelGrace for their handlers to return,
// closes the connections, and returns nil. It closes ln.
// In development mode ln must be a loopback address.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.auth.dev && !isLoopback(ln.Addr().String()) {
		ln.Close()
		return fmt.Errorf("server: development mode (no auth tokens) refuses to serve on non-loopback %s", ln.Addr())
	}
	// Requests get a context that a shutdown does not cancel: draining
	// means letting them finish. They end when their client goes away or
	// when the drain ends and their connection is closed.
	base := context.WithoutCancel(ctx)
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("serving", "addr", ln.Addr().String(), "dev_mode", s.auth.dev)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down: draining running requests", "timeout", s.cfg.DrainTimeout)
	s.closingOnce.Do(func() { close(s.closing) })
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.abort:
			s.log.Warn("shutdown: drain aborted, canceling running requests now")
			cancel()
		case <-dctx.Done():
		}
	}()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	err := hs.Shutdown(dctx)
	if err == nil {
		// Detached turns have no connection to wait for: the drain waits
		// for them as it does for requests.
		select {
		case <-done:
		case <-dctx.Done():
			err = fmt.Errorf("detached turns still running: %w", dctx.Err())
		}
	}
	if err != nil {
		s.log.Warn("shutdown: canceling running requests", "reason", err)
		grace := CancelGrace
		if c, ok := s.backend.(turnCanceler); ok {
			// The turns end with an error event that tells their clients
			// why, while the connections are still open.
			c.CancelTurns()
			s.waitHandlers(done, CancelGrace)
			grace = time.Second
		}
		// Detached turns of another backend end with their own context.
		s.runs.cancelAll()
		// Closed connections cancel the requests still running.
		_ = hs.Close()
		s.waitHandlers(done, grace)
	}
	<-errc // Serve returned ErrServerClosed
	select {
	case <-done:
	case <-time.After(time.Second):
		// A handler stuck where cancellation does not reach must not keep
		// the process alive: the backend's close deals with its turn.
		s.log.Error("shutdown: handlers still running after they were canceled; leaving them to the backend's close")
	}
	s.log.Info("stopped")
	return nil
}

// turnCanceler is a Backend that can cancel its running turns so they
// end telling their clients why (*pipeline.Pipeline).
type turnCanceler interface {
	CancelTurns()
}

// waitHandlers waits until done is closed (every handler returned) or for
// d.
func (s *Server) waitHandlers(done <-chan struct{}, d time.Duration) {
	select {
	case <-done:
	case <-time.After(d):
	}
}
