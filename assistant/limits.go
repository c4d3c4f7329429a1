package assistant

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/units"
)

// Limits protect a server from a heavy user and from a hostile agent
// (app.jsonc "limits"). Every field has a default (DefaultLimits); a zero
// Limits, as in an AppConfig built by hand, means the defaults.
type Limits struct {
	// TurnsPerUser bounds the turns and terminals one user has at once,
	// turns running or waiting for their chat; one more is refused (HTTP
	// 429 with Retry-After), so that one user never holds more than this
	// many of the server's sandboxes.
	TurnsPerUser int
	// TerminalsPerUser bounds the terminals one user has open at once
	// (each also counts against TurnsPerUser); one more is refused.
	TerminalsPerUser int
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
	// KeptChats bounds the chats kept between turns (sandbox.keep_alive)
	// at once; KeptMemory the memory they hold together, in bytes, or,
	// when it is 0, KeptMemoryShare of the host's memory. Over either,
	// the least recently used idle kept chats stop.
	KeptChats       int
	KeptMemory      int64
	KeptMemoryShare float64
	// Pool bounds the warm pool (sandbox.pool of the assistants).
	Pool PoolLimits
	// WorkspacesPerUser bounds the workspaces one user has (a chat's is
	// made by its first sandboxed turn, terminal or upload); a new one past
	// it is refused (HTTP 507), existing ones go on.
	WorkspacesPerUser int
	// DiskPerUser bounds what one user's workspaces take on disk together,
	// in bytes, or, when it is 0, DiskPerUserShare of the data root's
	// filesystem: past it new workspaces and uploads are refused (HTTP
	// 507); each workspace is bounded by its own sandbox.max_disk.
	DiskPerUser      int64
	DiskPerUserShare float64
	// Uploads bounds the uploads the server takes at once (more wait in
	// line, up to SandboxWait); UploadsPerUser those of one user (more are
	// refused, HTTP 429).
	Uploads        int
	UploadsPerUser int
	// Breaker tunes the circuit breaker of every connector.
	Breaker BreakerLimits
	// ModelProxy bounds what sandboxes ask of the bridge's model proxy.
	ModelProxy ModelProxyLimits
	// RequestBody bounds the body of one API request, in bytes: a
	// message's images travel in it as data: URLs, base64, 4/3 of their
	// size. Over it the request is refused (HTTP 413) with the limit and
	// how to raise it.
	RequestBody int64
}

// PoolLimits bound the warm pool: the sandboxes made ahead of demand for
// the assistants with sandbox.pool (app.jsonc "limits.pool"). Pooled
// sandboxes count with the kept chats against KeptChats and KeptMemory:
// the pool fills only the room the kept chats leave.
type PoolLimits struct {
	// Total bounds the pooled sandboxes of every assistant together.
	Total int
	// Memory bounds the memory they hold together, in bytes (0: only the
	// kept chats' cap).
	Memory int64
	// Refill is how many pooled sandboxes are made per second at most,
	// one at a time, and only while no turn waits for a sandbox.
	Refill int
}

// ModelProxyLimits bound what sandboxes ask of the bridge's model proxy
// (app.jsonc "limits.model_proxy"). A zero field is the bridge's default
// (bridge.DefaultCalls, DefaultParallel, DefaultConnections,
// DefaultRequestMemory).
type ModelProxyLimits struct {
	// CallsPerTurn bounds the model calls of one turn; one more is refused
	// (a 429 in the API's shape, which the CLI reports).
	CallsPerTurn int
	// ParallelCalls bounds a turn's model calls in flight at once; more
	// wait for one to end.
	ParallelCalls int
	// Connections bounds one sandbox's open connections to the proxy.
	Connections int
	// RequestMemory bounds the request bodies the proxies of every sandbox
	// of the server hold at once, in bytes; a request past it waits, then
	// gets a 429.
	RequestMemory int64
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
	DefaultTurnsPerUser = 4
	// DefaultTerminalsPerUser leaves a user who keeps terminals open
	// half of their turns.
	DefaultTerminalsPerUser = 2
	DefaultChatQueue        = 4
	DefaultChatWait         = 10 * time.Minute
	DefaultSandboxes        = 16
	DefaultSandboxWait      = time.Minute
	DefaultBreakerFailures  = 5
	DefaultBreakerCooldown  = 30 * time.Second
	// DefaultKeptChats: 32 idle kept chats hold about 9 GiB (some 280 MiB
	// each, measured); the memory share below is the tighter cap on a
	// small host.
	DefaultKeptChats = 32
	// DefaultKeptMemoryShare: idle kept chats are a cache of started
	// CLIs; half the host's memory leaves the other half to the turns
	// that run (limits.sandboxes of them) and the server.
	DefaultKeptMemoryShare = 0.5
	DefaultDrainTimeout    = 30 * time.Second
	// DefaultPoolTotal and DefaultPoolRefill: a pooled sandbox holds some
	// 10 MiB idle (a container's init and sleep), so the bound is on what
	// the engine makes at once, not on memory.
	DefaultPoolTotal  = 8
	DefaultPoolRefill = 2
	// DefaultWorkspacesPerUser: a week of chats (cleanup.retention) for a
	// heavy user, far from what fills a disk with images.
	DefaultWorkspacesPerUser = 1000
	// DefaultDiskPerUserShare: no one user fills the disk the others'
	// workspaces share.
	DefaultDiskPerUserShare = 0.1
	// DefaultUploads and DefaultUploadsPerUser: an upload holds 256 KiB of
	// the server's memory while it streams to disk.
	DefaultUploads        = 16
	DefaultUploadsPerUser = 4
	// DefaultRequestBody admits two images at the largest size a message
	// may carry (10 MiB each, 13.4 MiB as base64) with their text, or
	// any number of the web app's (scaled, under 1 MB together); it is
	// also the Messages API's own request limit.
	DefaultRequestBody = 32 << 20
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		TurnsPerUser:      DefaultTurnsPerUser,
		TerminalsPerUser:  DefaultTerminalsPerUser,
		ChatQueue:         DefaultChatQueue,
		ChatWait:          DefaultChatWait,
		Sandboxes:         DefaultSandboxes,
		SandboxWait:       DefaultSandboxWait,
		KeptChats:         DefaultKeptChats,
		KeptMemoryShare:   DefaultKeptMemoryShare,
		Pool:              PoolLimits{Total: DefaultPoolTotal, Refill: DefaultPoolRefill},
		WorkspacesPerUser: DefaultWorkspacesPerUser,
		DiskPerUserShare:  DefaultDiskPerUserShare,
		Uploads:           DefaultUploads,
		UploadsPerUser:    DefaultUploadsPerUser,
		Breaker:           BreakerLimits{Failures: DefaultBreakerFailures, Cooldown: DefaultBreakerCooldown},
		RequestBody:       DefaultRequestBody,
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
	if l.TerminalsPerUser <= 0 {
		l.TerminalsPerUser = d.TerminalsPerUser
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
	if l.KeptChats <= 0 {
		l.KeptChats = d.KeptChats
	}
	if l.KeptMemory <= 0 && l.KeptMemoryShare <= 0 {
		l.KeptMemoryShare = d.KeptMemoryShare
	}
	if l.Pool.Total <= 0 {
		l.Pool.Total = d.Pool.Total
	}
	if l.Pool.Refill <= 0 {
		l.Pool.Refill = d.Pool.Refill
	}
	if l.WorkspacesPerUser <= 0 {
		l.WorkspacesPerUser = d.WorkspacesPerUser
	}
	if l.DiskPerUser <= 0 && l.DiskPerUserShare <= 0 {
		l.DiskPerUserShare = d.DiskPerUserShare
	}
	if l.Uploads <= 0 {
		l.Uploads = d.Uploads
	}
	if l.UploadsPerUser <= 0 {
		l.UploadsPerUser = d.UploadsPerUser
	}
	if l.Breaker.Failures <= 0 {
		l.Breaker.Failures = d.Breaker.Failures
	}
	if l.Breaker.Cooldown <= 0 {
		l.Breaker.Cooldown = d.Breaker.Cooldown
	}
	if l.RequestBody <= 0 {
		l.RequestBody = d.RequestBody
	}
	return l
}

// rawLimits is app.jsonc's "limits" as written.
type rawLimits struct {
	TurnsPerUser     *int   `json:"turns_per_user"`
	TerminalsPerUser *int   `json:"terminals_per_user"`
	ChatQueue        *int   `json:"chat_queue"`
	ChatWait         string `json:"chat_wait"`
	Sandboxes        *int   `json:"sandboxes"`
	SandboxWait      string `json:"sandbox_wait"`
	KeptChats        *int   `json:"kept_chats"`
	KeptMemory       string `json:"kept_memory"`
	Pool             struct {
		Total  *int   `json:"total"`
		Memory string `json:"memory"`
		Refill *int   `json:"refill"`
	} `json:"pool"`
	WorkspacesPerUser *int       `json:"workspaces_per_user"`
	DiskPerUser       string     `json:"disk_per_user"`
	Uploads           *int       `json:"uploads"`
	UploadsPerUser    *int       `json:"uploads_per_user"`
	Breaker           rawBreaker `json:"breaker"`
	RequestBody       string     `json:"request_body"`
	ModelProxy        struct {
		CallsPerTurn  *int   `json:"calls_per_turn"`
		ParallelCalls *int   `json:"parallel_calls"`
		Connections   *int   `json:"connections"`
		RequestMemory string `json:"request_memory"`
	} `json:"model_proxy"`
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
	intIn("limits.terminals_per_user", r.TerminalsPerUser, 1, 1000, &l.TerminalsPerUser)
	intIn("limits.chat_queue", r.ChatQueue, 0, 1000, &l.ChatQueue)
	durIn("limits.chat_wait", r.ChatWait, time.Second, 24*time.Hour, &l.ChatWait)
	intIn("limits.sandboxes", r.Sandboxes, 1, 10000, &l.Sandboxes)
	durIn("limits.sandbox_wait", r.SandboxWait, time.Second, time.Hour, &l.SandboxWait)
	intIn("limits.kept_chats", r.KeptChats, 1, 10000, &l.KeptChats)
	if d.has("limits.kept_memory") {
		n, share, err := ParseMemoryCap(r.KeptMemory)
		if err != nil {
			d.errPath("limits.kept_memory", "limits.kept_memory: %v", err)
		} else {
			l.KeptMemory, l.KeptMemoryShare = n, share
		}
	}
	intIn("limits.pool.total", r.Pool.Total, 1, 1000, &l.Pool.Total)
	intIn("limits.pool.refill", r.Pool.Refill, 1, 100, &l.Pool.Refill)
	if d.has("limits.pool.memory") {
		n, err := units.ParseBytes(strings.TrimSpace(r.Pool.Memory))
		if err != nil || n < minMemory || n > maxDisk {
			d.errPath("limits.pool.memory", "limits.pool.memory: %q: want a size from 64m to 16t, like \"4g\"", r.Pool.Memory)
		} else {
			l.Pool.Memory = n
		}
	}
	intIn("limits.workspaces_per_user", r.WorkspacesPerUser, 1, 1000000, &l.WorkspacesPerUser)
	if d.has("limits.disk_per_user") {
		n, share, err := ParseDiskCap(r.DiskPerUser)
		if err != nil {
			d.errPath("limits.disk_per_user", "limits.disk_per_user: %v", err)
		} else {
			l.DiskPerUser, l.DiskPerUserShare = n, share
		}
	}
	intIn("limits.uploads", r.Uploads, 1, 10000, &l.Uploads)
	intIn("limits.uploads_per_user", r.UploadsPerUser, 1, 10000, &l.UploadsPerUser)
	intIn("limits.breaker.failures", r.Breaker.Failures, 1, 1000, &l.Breaker.Failures)
	durIn("limits.breaker.cooldown", r.Breaker.Cooldown, time.Second, time.Hour, &l.Breaker.Cooldown)
	if d.has("limits.request_body") {
		n, err := units.ParseBytes(strings.TrimSpace(r.RequestBody))
		if err != nil || n < minRequestBody || n > maxRequestBody {
			d.errPath("limits.request_body", "limits.request_body: %q: want a size from 64k to 1g, like \"32m\"", r.RequestBody)
		} else {
			l.RequestBody = n
		}
	}
	mp := r.ModelProxy
	intIn("limits.model_proxy.calls_per_turn", mp.CallsPerTurn, 1, 1000000, &l.ModelProxy.CallsPerTurn)
	intIn("limits.model_proxy.parallel_calls", mp.ParallelCalls, 1, 1000, &l.ModelProxy.ParallelCalls)
	intIn("limits.model_proxy.connections", mp.Connections, 4, 10000, &l.ModelProxy.Connections)
	if d.has("limits.model_proxy.request_memory") {
		// At least two of the largest requests (the Messages API's 32 MB).
		n, err := units.ParseBytes(strings.TrimSpace(mp.RequestMemory))
		if err != nil || n < 64<<20 || n > maxDisk {
			d.errPath("limits.model_proxy.request_memory", "limits.model_proxy.request_memory: %q: want a size from 64m to 16t, like \"256m\"", mp.RequestMemory)
		} else {
			l.ModelProxy.RequestMemory = n
		}
	}
	return l
}

// Bounds of limits.request_body: room for a message of text, and no more
// than a server should hold of one request.
const (
	minRequestBody = 64 << 10
	maxRequestBody = 1 << 30
)

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

// ParseMemoryCap parses limits.kept_memory: a size ("8g", "512m"; 64m to
// 16t) or a share of the host's memory ("50%"; 1% to 100%). It returns
// the bytes or the share (0 to 1), the other 0.
func ParseMemoryCap(s string) (bytes int64, share float64, err error) {
	return parseCap(s, "the host's memory", "50%")
}

// ParseDiskCap parses limits.disk_per_user: a size ("20g"; 64m to 16t) or
// a share of the data root's filesystem ("10%"; 1% to 100%). It returns
// the bytes or the share (0 to 1), the other 0.
func ParseDiskCap(s string) (bytes int64, share float64, err error) {
	return parseCap(s, "the data root's disk", "10%")
}

// parseCap parses a size or a share ("NN%") of what of names.
func parseCap(s, of, example string) (bytes int64, share float64, err error) {
	t := strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || v < 1 || v > 100 {
			return 0, 0, fmt.Errorf("%q: want a share of %s from 1%% to 100%%, like %q", s, of, example)
		}
		return 0, v / 100, nil
	}
	n, err := units.ParseBytes(t)
	if err != nil || n < minMemory || n > maxDisk {
		return 0, 0, fmt.Errorf("%q: want a size from 64m to 16t (like \"8g\") or a share of %s (like %q)", s, of, example)
	}
	return n, 0, nil
}
