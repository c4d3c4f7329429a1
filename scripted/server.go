package scripted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/sse"
)

// Model is the model name the server answers with when a request names
// none, and the last of the models it lists. It is also the prefix of the
// ids it makes ("msg_llmtest...", "toolu_llmtest...") and of its error
// messages: the name scripts, recordings and clients know it by.
const Model = "llmtest"

// exhaustedMessage is the error message once every turn is used. It comes
// with status 400, which the Anthropic and OpenAI SDKs do not retry.
const exhaustedMessage = "llmtest: script has no more turns"

// Server is a scripted model server. It is safe for concurrent use.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:PORT", without a trailing
	// slash. Point ANTHROPIC_BASE_URL at it (Anthropic SDKs add /v1/...);
	// OpenAI clients want URL + "/v1".
	URL string

	script  *Script
	prefix  string // random per server, keeps ids unique across servers
	handler http.Handler
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
	serveWG sync.WaitGroup

	mu       sync.Mutex
	used     []bool
	requests []Request
	seq      int
	closed   bool
}

// NewServer starts a server answering with s on 127.0.0.1 (a free port).
// A nil s answers every turn-consuming request with the "no more turns"
// error. It panics when it cannot listen or s is invalid, like
// httptest.NewServer; call Close when done (t.Cleanup(srv.Close)).
func NewServer(s *Script) *Server {
	srv := newServer(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("llmtest: listen: %v", err))
	}
	srv.ln = ln
	srv.URL = "http://" + ln.Addr().String()
	srv.srv = &http.Server{Handler: srv.handler, ReadHeaderTimeout: 10 * time.Second}
	srv.serveWG.Add(1)
	go func() {
		defer srv.serveWG.Done()
		_ = srv.srv.Serve(ln)
	}()
	return srv
}

func newServer(s *Script) *Server {
	if s == nil {
		s = &Script{}
	}
	if err := s.Validate(); err != nil {
		panic(fmt.Sprintf("llmtest: invalid script: %v", err))
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	srv := &Server{
		script: s,
		prefix: hex.EncodeToString(b[:]),
		done:   make(chan struct{}),
		used:   make([]bool, len(s.Turns)),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", srv.serveAnthropic)
	mux.HandleFunc("POST /v1/messages/count_tokens", srv.serveCountTokens)
	mux.HandleFunc("POST /v1/chat/completions", srv.serveOpenAI)
	mux.HandleFunc("POST /chat/completions", srv.serveOpenAI)
	mux.HandleFunc("POST /v1/responses", srv.serveResponses)
	mux.HandleFunc("POST /responses", srv.serveResponses)
	mux.HandleFunc("POST /v1beta/models/{spec}", srv.serveGemini)
	mux.HandleFunc("POST /v1/models/{spec}", srv.serveGemini)
	mux.HandleFunc("GET /v1/models", srv.serveModels)
	mux.HandleFunc("GET /models", srv.serveModels)
	mux.HandleFunc("/", srv.serveOther)
	srv.handler = mux
	return srv
}

// Handler returns the server's HTTP handler, to mount it in another server.
// It shares the script, recorded requests and turn state with s.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the server: stalled responses return, connections close, and
// Close waits for the serving goroutine. It is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.serveWG.Wait()
	}
}

// Requests returns a copy of every request received so far, in arrival
// order (side requests included; see Request.Side).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// TurnRequests returns the requests that consumed a turn, in order.
func (s *Server) TurnRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Turn >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// Remaining returns how many turns have not been used yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.used {
		if !u {
			n++
		}
	}
	return n
}

// record reads the body, classifies the request and, unless it is a side
// request, takes the first unused turn whose When matches. It returns the
// recorded request and the turn (nil for side requests and when none is
// left).
func (s *Server) record(r *http.Request, api string) (Request, *Turn, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Time:     time.Now(),
		Body:     body,
		API:      api,
		Turn:     -1,
	}
	req.Side = isSide(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	var turn *Turn
	if err == nil && !req.Side {
		for i := range s.script.Turns {
			if !s.used[i] && s.script.Turns[i].When.matches(&req) {
				s.used[i] = true
				req.Turn = i
				turn = &s.script.Turns[i]
				break
			}
		}
	}
	s.requests = append(s.requests, req)
	return req, turn, err
}

// remainingLocked describes the unused turns for the no-match error.
func (s *Server) unmatched() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.used {
		if !u {
			n++
		}
	}
	if n == 0 {
		return exhaustedMessage
	}
	return fmt.Sprintf("llmtest: none of the %d remaining turns matches the request (check their when: conditions)", n)
}

// isSide reports a request that must not consume a turn: a helper call of
// a CLI, recognized by what only those calls carry. Claude Code
// (User-Agent claude-cli/... or X-App: cli) titles sessions, probes quotas
// and detects topics; opencode titles sessions with its "title
// generator" agent; the Gemini CLI asks for JSON (model routing,
// next-speaker and loop checks) and counts tokens. Every other request is
// an agent turn.
func isSide(r *Request) bool {
	switch r.API {
	case "anthropic", "openai", "responses":
		if strings.HasPrefix(r.Header.Get("User-Agent"), "opencode/") && strings.HasPrefix(r.System(), titleAgent) {
			return true
		}
		if r.API != "anthropic" {
			return false
		}
	case "gemini":
		return geminiSide(r)
	default:
		return true
	}
	return claudeSide(r)
}

// titleAgent starts the system prompt of opencode's session titles.
const titleAgent = "You are a title generator"

// geminiSide reports the Gemini CLI's helper calls: token counts and
// non-streamed calls that ask for JSON.
func geminiSide(r *Request) bool {
	_, method := geminiMethod(r.Path[strings.LastIndexByte(r.Path, '/')+1:])
	if method == "countTokens" {
		return true
	}
	if method != "generateContent" {
		return false
	}
	var b struct {
		GenerationConfig struct {
			MimeType   string          `json:"responseMimeType"`
			JSONSchema json.RawMessage `json:"responseJsonSchema"`
			Schema     json.RawMessage `json:"responseSchema"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return false
	}
	g := b.GenerationConfig
	return g.MimeType == "application/json" || len(g.JSONSchema) > 0 || len(g.Schema) > 0
}

// claudeSide reports Claude Code's helper calls.
func claudeSide(r *Request) bool {
	if !strings.HasPrefix(r.Header.Get("User-Agent"), "claude-cli/") && r.Header.Get("X-App") != "cli" {
		return false
	}
	var b struct {
		MaxTokens    int               `json:"max_tokens"`
		Tools        []json.RawMessage `json:"tools"`
		Context      json.RawMessage   `json:"context_management"`
		OutputConfig struct {
			Format json.RawMessage `json:"format"`
		} `json:"output_config"`
	}
	if json.Unmarshal(r.Body, &b) != nil {
		return false
	}
	switch {
	case len(b.OutputConfig.Format) > 0 && string(b.OutputConfig.Format) != "null":
		return true // structured output: session title generation
	case b.MaxTokens == 1:
		return true // quota / reachability probe
	case len(b.Tools) == 0 && len(b.Context) == 0:
		return true // tool-less helper call (topic detection, summaries)
	}
	return false
}

// wait sleeps d, returning false when the client or the server went away.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// hang blocks until the client or the server goes away.
func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
}

// id returns a new unique id with the given prefix.
func (s *Server) id(prefix string) string {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	return fmt.Sprintf("%sllmtest%s%04d", prefix, s.prefix, n)
}

// eventStream writes server-sent events, flushing each, and aborts the connection
// after cut events when cut > 0.
type eventStream struct {
	w     http.ResponseWriter
	n     int
	cut   int
	named bool // Anthropic "event:" lines; OpenAI sends data only
}

func newEventStream(w http.ResponseWriter, cut int, named bool) *eventStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &eventStream{w: w, cut: cut, named: named}
}

// send writes one event; data is JSON-encoded unless it is a string.
func (e *eventStream) send(event string, data any) {
	if e.cut > 0 && e.n >= e.cut {
		// Drop the connection without the closing chunk: the client sees a
		// broken stream, not a clean end.
		panic(http.ErrAbortHandler)
	}
	var b []byte
	if s, ok := data.(string); ok {
		b = []byte(s)
	} else {
		b, _ = json.Marshal(data)
	}
	frame := sse.Event{Data: b}
	if e.named {
		frame.Type = event
	}
	_, _ = e.w.Write(sse.Frame(frame))
	e.n++
	_ = http.NewResponseController(e.w).Flush()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorType is the usual Anthropic error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (e *HTTPError) resolved() HTTPError {
	out := *e
	if out.Type == "" {
		out.Type = errorType(out.Status)
	}
	if out.Message == "" {
		out.Message = fmt.Sprintf("llmtest: scripted %s (%d)", out.Type, out.Status)
	}
	return out
}

func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	req, _, err := s.record(r, "count_tokens")
	if err != nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": tokens(len(req.Body))})
}

// models is the model list GET /v1/models answers, in both the Anthropic
// and the OpenAI shape.
var models = []string{"claude-opus-4-8", "claude-sonnet-4-5", "claude-haiku-4-5", Model}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.record(r, "models"); err != nil {
		return
	}
	data := make([]map[string]any, 0, len(models))
	for _, m := range models {
		data = append(data, map[string]any{
			"id": m, "type": "model", "object": "model", "display_name": m,
			"created_at": "2025-01-01T00:00:00Z", "created": 1735689600, "owned_by": Model,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "has_more": false,
		"first_id": models[0], "last_id": models[len(models)-1],
	})
}

// serveOther answers reachability probes (Claude Code sends HEAD /) and
// reports unknown endpoints as 404 in the Anthropic error shape.
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.record(r, "other"); err != nil {
		return
	}
	if r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		w.WriteHeader(http.StatusOK)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": "not_found_error", "message": fmt.Sprintf("llmtest: no endpoint %s %s", r.Method, r.URL.Path)},
	})
}

// tokens estimates a token count from a byte count (about four bytes a
// token, at least one).
func tokens(n int) int {
	if n < 4 {
		return 1
	}
	return n / 4
}

// chunks splits s into pieces of about size bytes at rune boundaries, so
// streamed deltas exercise the client's reassembly.
func chunks(s string, size int) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > size {
		cut := size
		for cut < len(s) && !startsRune(s[cut]) {
			cut++
		}
		// Prefer a space near the cut for text.
		if i := strings.LastIndexByte(s[:cut], ' '); i > size/2 {
			cut = i + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// inputJSON encodes a tool call input, {} when nil.
func inputJSON(in any) string {
	if in == nil {
		return "{}"
	}
	b, err := json.Marshal(normalize(in))
	if err != nil {
		return "{}"
	}
	return string(b)
}
