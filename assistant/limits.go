package assistant

import (
	"fmt"
	"strings"
	"time"
)

// Limits protect a server from a heavy user and from a hostile agent
// (app.jsonc "limits"). Every field has a default (DefaultLimits); a zero
// Limits, as in an AppConfig built by hand, means the defaults.
type Limits struct {
	// TurnsPerUser bounds the turns one user has at once, running or
	// waiting for their chat; one more is refused (HTTP 429 with
	// Retry-After).
	TurnsPerUser int
	// ChatQueue bounds the turns that may wait while another turn of the
	// same chat runs: turns of one chat run one at a time, in the order
	// they came. One more is refused (HTTP 409); 0 refuses every turn that
	// would have to wait.
	ChatQueue int
	// ChatWait bounds how long a turn waits for its chat; then it fails
	// with HTTP 409 (or an error event when the stream already started).
	ChatWait time.Duration
	// Sandboxes bounds the live sandboxes of the server. A turn that needs
	// one more waits in line, up to SandboxWait, then fails with HTTP 503
	// and Retry-After.
	Sandboxes   int
	SandboxWait time.Duration
	// Breaker tunes the circuit breaker of every connector.
	Breaker BreakerLimits
}

// BreakerLimits tune the connectors' circuit breakers.
type BreakerLimits struct {
	// Failures is how many failed calls in a row (network errors, 5xx,
	// timeouts) open a connector's breaker.
	Failures int
	// Cooldown is how long an open breaker fails calls at once before it
	// lets a probe call through.
	Cooldown time.Duration
}

// Defaults of Limits and of AppConfig.DrainTimeout.
const (
	DefaultTurnsPerUser    = 4
	DefaultChatQueue       = 4
	DefaultChatWait        = 10 * time.Minute
	DefaultSandboxes       = 16
	DefaultSandboxWait     = time.Minute
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
	DefaultDrainTimeout    = 30 * time.Second
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		TurnsPerUser: DefaultTurnsPerUser,
		ChatQueue:    DefaultChatQueue,
		ChatWait:     DefaultChatWait,
		Sandboxes:    DefaultSandboxes,
		SandboxWait:  DefaultSandboxWait,
		Breaker:      BreakerLimits{Failures: DefaultBreakerFailures, Cooldown: DefaultBreakerCooldown},
	}
}

// WithDefaults returns l with its unset fields set to the defaults: all of
// them for a zero Limits; otherwise every zero field but ChatQueue, whose
// zero means no waiting.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l == (Limits{}) {
		return d
	}
	if l.TurnsPerUser <= 0 {
		l.TurnsPerUser = d.TurnsPerUser
	}
	l.ChatQueue = max(l.ChatQueue, 0)
	if l.ChatWait <= 0 {
		l.ChatWait = d.ChatWait
	}
	if l.Sandboxes <= 0 {
		l.Sandboxes = d.Sandboxes
	}
	if l.SandboxWait <= 0 {
		l.SandboxWait = d.SandboxWait
	}
	if l.Breaker.Failures <= 0 {
		l.Breaker.Failures = d.Breaker.Failures
	}
	if l.Breaker.Cooldown <= 0 {
		l.Breaker.Cooldown = d.Breaker.Cooldown
	}
	return l
}

// rawLimits is app.jsonc's "limits" as written.
type rawLimits struct {
	TurnsPerUser *int       `json:"turns_per_user"`
	ChatQueue    *int       `json:"chat_queue"`
	ChatWait     string     `json:"chat_wait"`
	Sandboxes    *int       `json:"sandboxes"`
	SandboxWait  string     `json:"sandbox_wait"`
	Breaker      rawBreaker `json:"breaker"`
}

type rawBreaker struct {
	Failures *int   `json:"failures"`
	Cooldown string `json:"cooldown"`
}

// limits checks app.jsonc's "limits" and returns them with defaults for
// what is left out.
func (d *doc) limits(r rawLimits) Limits {
	l := DefaultLimits()
	intIn := func(path string, v *int, lo, hi int, dst *int) {
		switch {
		case v == nil || !d.has(path):
		case *v < lo || *v > hi:
			d.errPath(path, "%s: %d is out of range: want %d to %d", path, *v, lo, hi)
		default:
			*dst = *v
		}
	}
	durIn := func(path, s string, lo, hi time.Duration, dst *time.Duration) {
		if !d.has(path) {
			return
		}
		if v := parseDurationIn(d, path, s, lo, hi); v > 0 {
			*dst = v
		}
	}
	intIn("limits.turns_per_user", r.TurnsPerUser, 1, 10000, &l.TurnsPerUser)
	intIn("limits.chat_queue", r.ChatQueue, 0, 1000, &l.ChatQueue)
	durIn("limits.chat_wait", r.ChatWait, time.Second, 24*time.Hour, &l.ChatWait)
	intIn("limits.sandboxes", r.Sandboxes, 1, 10000, &l.Sandboxes)
	durIn("limits.sandbox_wait", r.SandboxWait, time.Second, time.Hour, &l.SandboxWait)
	intIn("limits.breaker.failures", r.Breaker.Failures, 1, 1000, &l.Breaker.Failures)
	durIn("limits.breaker.cooldown", r.Breaker.Cooldown, time.Second, time.Hour, &l.Breaker.Cooldown)
	return l
}

// drainTimeout checks app.jsonc's "drain_timeout".
func (d *doc) drainTimeout(s string) time.Duration {
	if !d.has("drain_timeout") {
		return DefaultDrainTimeout
	}
	if v := parseDurationIn(d, "drain_timeout", s, time.Second, time.Hour); v > 0 {
		return v
	}
	return DefaultDrainTimeout
}

// checkMetricsToken checks auth.metrics_token: a token or $ENV.NAME, not a
// user's token too.
func (d *doc) checkMetricsToken(tok string, users []TokenConfig) {
	if !d.has("auth.metrics_token") {
		return
	}
	if strings.TrimSpace(tok) == "" {
		d.errPath("auth.metrics_token", "auth.metrics_token is empty (leave it out to serve /metrics only in development mode)")
		return
	}
	if msg := checkEnvRef(tok); msg != "" {
		d.errPath("auth.metrics_token", "%s", msg)
		return
	}
	for i, u := range users {
		if u.Token == tok {
			d.errPath("auth.metrics_token", "auth.metrics_token: the same token as auth.tokens[%d]: the operator's token must differ from every user's", i)
		}
	}
}

// ResolveMetricsToken returns the operator's token for GET /metrics
// (auth.metrics_token, resolved), or "" when none is set.
func (c *AppConfig) ResolveMetricsToken() (string, error) {
	if c.Auth.MetricsToken == "" {
		return "", nil
	}
	v, err := ResolveValue(c.Auth.MetricsToken)
	if err != nil {
		return "", fmt.Errorf("app.jsonc: auth.metrics_token: %w", err)
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", fmt.Errorf("app.jsonc: auth.metrics_token is empty")
	}
	return v, nil
}
