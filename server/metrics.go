package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// GET /metrics is the operator's, not the users': it shows every user's
// traffic in aggregate, the assistants and connectors and what they cost.
// So it takes its own bearer token (auth.metrics_token in app.jsonc), not
// a user's; without one it is served only in development mode (loopback,
// no tokens). A loopback-only rule was not enough on its own: behind a
// reverse proxy on the same host, every client arrives from loopback.

// newRegistry is the registry of a server built without one: its own
// metrics, Go's and the process's.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serverMetrics are the metrics the server itself keeps.
type serverMetrics struct {
	errors *prometheus.CounterVec
}

func newServerMetrics(reg prometheus.Registerer) (*serverMetrics, error) {
	m := &serverMetrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_errors_total",
			Help: "Requests that ended in an error, by the error code the client was told (an HTTP error, or an error at the end of a stream)."},
			[]string{"code"}),
	}
	if err := reg.Register(m.errors); err != nil {
		return nil, err
	}
	return m, nil
}

// metrics is GET /metrics, in the Prometheus text format.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ string) {
	switch {
	case s.auth.dev:
	case s.metricsToken == nil:
		writeError(w, s.log, errorf(http.StatusForbidden, chat.ErrAuth,
			"GET /metrics needs the operator's token, and none is configured: set auth.metrics_token in app.jsonc"))
		return
	default:
		h := r.Header.Get("Authorization")
		scheme, tok, _ := strings.Cut(h, " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], s.metricsToken) != 1 {
			msg := "GET /metrics needs the operator's token (auth.metrics_token): send Authorization: Bearer <token>"
			if h != "" {
				msg = msgInvalidToken
			}
			writeError(w, s.log, errorf(http.StatusUnauthorized, chat.ErrAuth, "%s", msg))
			return
		}
	}
	s.promHandler.ServeHTTP(w, r)
}

func newPromHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, MaxRequestsInFlight: 4})
}

// breakerReporter is a Backend that has circuit breakers to report
// (*pipeline.Pipeline).
type breakerReporter interface {
	Breakers() []breaker.Status
}

// poolReporter is a Backend with a warm pool (*pipeline.Pipeline).
type poolReporter interface {
	Pool() pipeline.PoolStatus
}

// healthBody is GET /health: cheap (no I/O), and safe without
// authentication: it names connectors whose breakers are not closed, never
// hosts, keys or users.
type healthBody struct {
	// Status is "ok"; "degraded" (still HTTP 200: the others serve) when
	// some assistants do not run; or "shutting_down" (HTTP 503) while the
	// server drains.
	Status string `json:"status"`
	// Assistants counts the assistants that serve, and lists those whose
	// definition has errors.
	Assistants *assistantsHealth `json:"assistants,omitempty"`
	// Breakers lists the connectors whose circuit breaker is open or
	// half-open: their calls fail fast until a probe succeeds.
	Breakers []breakerHealth `json:"breakers,omitempty"`
	// Pool is the warm pool, when an assistant has sandbox.pool.
	Pool *pipeline.PoolStatus `json:"pool,omitempty"`
}

type assistantsHealth struct {
	Serving int            `json:"serving"`
	Failed  []failedHealth `json:"failed,omitempty"`
}

// failedHealth is an assistant whose definition has errors: its first
// error, and whether its last good version still serves.
type failedHealth struct {
	ID              string `json:"id"`
	Error           string `json:"error"`
	ServingLastGood bool   `json:"serving_last_good,omitempty"`
}

type breakerHealth struct {
	Connector string `json:"connector"`
	State     string `json:"state"`
	// RetryAfter is the seconds an open breaker still refuses calls.
	RetryAfter int `json:"retry_after,omitempty"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ string) {
	body := healthBody{Status: "ok"}
	status := http.StatusOK
	if app := s.cfg.Backend.App(); app != nil {
		h := &assistantsHealth{Serving: len(app.Assistants)}
		for _, id := range slices.Sorted(maps.Keys(app.Failed)) {
			f := app.Failed[id]
			h.Failed = append(h.Failed, failedHealth{ID: id, Error: f.Error(), ServingLastGood: f.Serving()})
			if !f.Serving() {
				body.Status = "degraded"
			}
		}
		body.Assistants = h
	}
	if s.draining.Load() {
		body.Status, status = "shutting_down", http.StatusServiceUnavailable
	}
	if br, ok := s.backend.(breakerReporter); ok {
		for _, st := range br.Breakers() {
			if st.State != breaker.Closed {
				body.Breakers = append(body.Breakers, breakerHealth{Connector: st.Name, State: string(st.State),
					RetryAfter: int(st.RetryAfter.Seconds() + 0.999)})
			}
		}
	}
	if pr, ok := s.backend.(poolReporter); ok {
		if st := pr.Pool(); st.Target > 0 {
			body.Pool = &st
		}
	}
	writeJSON(w, status, body)
}

// notingBackend notes the error code of every failed turn on the request's
// recorder, whatever route ran it, for the error metrics and the access
// log.
type notingBackend struct {
	Backend
}

func (b notingBackend) Chat(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	resp, err := b.Backend.Chat(ctx, req, emit)
	if err != nil {
		if rec, ok := ctx.Value(recorderKey{}).(*recorder); ok && rec.code == "" {
			rec.code = asAPIError(err).Err.Code
		}
	}
	return resp, err
}

// recorderKey is the context key of the request's recorder.
type recorderKey struct{}
