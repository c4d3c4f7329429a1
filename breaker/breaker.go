// Package breaker holds agentbox's circuit breakers (seed 000's "circuit
// breaker" over sony/gobreaker): one per connector, shared by every call to
// that connector's upstream, the direct ones (package connector) and the
// model calls a sandboxed CLI makes through its bridge (package bridge).
//
// A breaker counts calls by what they say about the upstream's health:
// network errors, 5xx and 529 answers and timeouts are failures; an answer
// about the request itself (2xx, 4xx: a bad key, an unknown model) is a
// success; a call the caller canceled or the provider rate limited says
// nothing and is not counted. A rate limit is not a failure on purpose:
// the upstream is healthy, says when to come back (Retry-After, which the
// retries honour), and concerns one account, so opening the breaker would
// turn a throttle into an outage for everyone.
//
// Settings.Failures failures in a row open the breaker: every call then
// fails at once with a *chat.Error of code chat.ErrCircuitOpen (the HTTP
// server answers 503 with Retry-After) until Settings.Cooldown has passed.
// Then one call goes through as a probe (half-open): its success closes the
// breaker, its failure opens it for another cooldown.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/agentbox/agentbox/chat"
)

// Defaults of Settings.
const (
	DefaultFailures = 5
	DefaultCooldown = 30 * time.Second
)

// ErrOpen is the cause of the error a call refused by an open (or probing)
// breaker fails with.
var ErrOpen = errors.New("circuit breaker open")

// Settings tune the breakers of a Set. Zero fields take the defaults.
type Settings struct {
	// Failures is how many failed calls in a row open a breaker.
	Failures int
	// Cooldown is how long an open breaker refuses calls before it lets a
	// probe through.
	Cooldown time.Duration
}

func (s Settings) withDefaults() Settings {
	if s.Failures <= 0 {
		s.Failures = DefaultFailures
	}
	if s.Cooldown <= 0 {
		s.Cooldown = DefaultCooldown
	}
	return s
}

// Outcome is what a finished call tells about its upstream's health.
type Outcome int

// Outcomes.
const (
	// Success: the upstream answered (also with an error about the
	// request).
	Success Outcome = iota
	// Failure: the upstream looks unhealthy (network error, 5xx, timeout).
	Failure
	// Ignore: the call says nothing about the upstream (the caller gave
	// up, the provider rate limited).
	Ignore
)

// OfCode classifies a call that failed with a chat error code; "" is a
// success.
func OfCode(code string) Outcome {
	switch code {
	case "":
		return Success
	case chat.ErrNetwork, chat.ErrUpstream, chat.ErrTimeout:
		return Failure
	case chat.ErrRateLimit, chat.ErrCanceled, chat.ErrCircuitOpen:
		return Ignore
	}
	return Success
}

// OfStatus classifies an upstream's HTTP answer by its status.
func OfStatus(status int) Outcome {
	switch {
	case status == http.StatusTooManyRequests:
		return Ignore
	case status == http.StatusRequestTimeout, status >= 500:
		return Failure
	}
	return Success
}

// State is a breaker's state.
type State string

// States.
const (
	Closed   State = "closed"
	HalfOpen State = "half-open"
	Open     State = "open"
)

// States lists every state, for metrics.
var States = []State{Closed, HalfOpen, Open}

func stateOf(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// Set is the breakers of a server, one per name (a connector id), made on
// first use. It is safe for concurrent use.
type Set struct {
	log *slog.Logger

	mu       sync.Mutex
	settings Settings
	m        map[string]*Breaker
}

// NewSet returns an empty set with settings; log (nil: discarded) gets a
// line whenever a breaker changes state.
func NewSet(settings Settings, log *slog.Logger) *Set {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Set{log: log, settings: settings.withDefaults(), m: map[string]*Breaker{}}
}

// Configure changes the settings (an app reload). Breakers made with other
// settings are replaced, closed, when next asked for.
func (s *Set) Configure(settings Settings) {
	s.mu.Lock()
	s.settings = settings.withDefaults()
	s.mu.Unlock()
}

// Get returns the breaker called name, making it (closed) when new. A nil
// Set returns a nil Breaker, which lets every call through.
func (s *Set) Get(name string) *Breaker {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[name]; ok && b.settings == s.settings {
		return b
	}
	b := newBreaker(name, s.settings, s.log)
	s.m[name] = b
	return b
}

// Status is one breaker's state, for /health and metrics.
type Status struct {
	Name  string `json:"connector"`
	State State  `json:"state"`
	// RetryAfter is how long an open breaker still refuses calls.
	RetryAfter time.Duration `json:"-"`
	// Opened counts how often it opened; Rejected the calls it refused.
	Opened   uint64 `json:"-"`
	Rejected uint64 `json:"-"`
}

// Statuses returns every breaker's status, sorted by name.
func (s *Set) Statuses() []Status {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	bs := make([]*Breaker, 0, len(s.m))
	for _, b := range s.m {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	out := make([]Status, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Breaker guards one upstream. A nil *Breaker lets every call through. It
// is safe for concurrent use.
type Breaker struct {
	name     string
	settings Settings
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]

	openedAt atomic.Int64 // unix nanoseconds of the last opening
	opened   atomic.Uint64
	rejected atomic.Uint64
}

// errFailure and errIgnored carry an Outcome through gobreaker, which
// classifies calls by their error.
var (
	errFailure = errors.New("upstream failure")
	errIgnored = errors.New("not counted")
)

func newBreaker(name string, st Settings, log *slog.Logger) *Breaker {
	b := &Breaker{name: name, settings: st}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1, // one probe at a time when half-open
		Timeout:     st.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(st.Failures) },
		IsExcluded:  func(err error) bool { return err == errIgnored },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
				b.opened.Add(1)
			}
			level := slog.LevelInfo
			if to == gobreaker.StateOpen {
				level = slog.LevelWarn
			}
			log.Log(context.Background(), level, "circuit breaker", "connector", name, "from", stateOf(from), "to", stateOf(to))
		},
	})
	return b
}

// Name is the breaker's name (the connector id).
func (b *Breaker) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// State is the breaker's state now.
func (b *Breaker) State() State {
	if b == nil {
		return Closed
	}
	return stateOf(b.cb.State())
}

// Status is the breaker's status now.
func (b *Breaker) Status() Status {
	if b == nil {
		return Status{State: Closed}
	}
	st := Status{Name: b.name, State: b.State(), Opened: b.opened.Load(), Rejected: b.rejected.Load()}
	if st.State == Open {
		st.RetryAfter = b.retryAfter()
	}
	return st
}

// retryAfter is how long the breaker still refuses calls: the rest of the
// cooldown when open, a second while a probe runs.
func (b *Breaker) retryAfter() time.Duration {
	left := b.settings.Cooldown - time.Since(time.Unix(0, b.openedAt.Load()))
	return max(left, time.Second)
}

// Allow asks to make a call. When the breaker lets it through, the caller
// must call done exactly once with the call's outcome. When it does not
// (open, or half-open with its probe under way), Allow returns a
// *chat.Error with code chat.ErrCircuitOpen, cause ErrOpen and RetryAfter.
func (b *Breaker) Allow() (done func(Outcome), err error) {
	if b == nil {
		return func(Outcome) {}, nil
	}
	d, err := b.cb.Allow()
	if err != nil {
		b.rejected.Add(1)
		return nil, b.openError(errors.Is(err, gobreaker.ErrTooManyRequests))
	}
	var once sync.Once
	return func(o Outcome) {
		once.Do(func() {
			switch o {
			case Success:
				d(nil)
			case Failure:
				d(errFailure)
			default:
				d(errIgnored)
			}
		})
	}, nil
}

// Check reports the error Allow would fail with, without making a call or
// using up a probe: nil unless the breaker is open.
func (b *Breaker) Check() error {
	if b == nil || b.State() != Open {
		return nil
	}
	b.rejected.Add(1)
	return b.openError(false)
}

func (b *Breaker) openError(probing bool) *chat.Error {
	ra := b.retryAfter()
	what := fmt.Sprintf("retry in %s", ra.Round(time.Second))
	if probing {
		ra = time.Second
		what = "a probe call is testing it now; retry in a moment"
	}
	return &chat.Error{Code: chat.ErrCircuitOpen, Err: ErrOpen, RetryAfter: ra,
		Message: fmt.Sprintf("connector %s is failing (%d calls in a row failed with network errors, 5xx answers or timeouts): "+
			"its calls fail fast until a probe call succeeds; %s", b.name, b.settings.Failures, what)}
}
