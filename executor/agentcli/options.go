package agentcli

import (
	"log/slog"
	"time"
)

// Defaults for Options.
const (
	DefaultMaxTurns    = 30
	DefaultGracePeriod = 3 * time.Second
	DefaultIdleTimeout = 5 * time.Minute
)

// Options configure an Executor (the codex, gemini and opencode
// executors take them as they are; claude and cursor map theirs onto
// them). The zero value is usable.
type Options struct {
	// Binary is the CLI inside the sandbox (found on PATH; the CLI's own
	// name when empty).
	Binary string
	// DefaultMaxTurns applies when the assistant sets no max_turns.
	DefaultMaxTurns int
	// GracePeriod is how long the CLI may run after its turn completed.
	GracePeriod time.Duration
	// IdleTimeout stops a CLI silent this long while no tool runs
	// (negative: never).
	IdleTimeout time.Duration
	// AckWait is how long a CLI kept between turns (Keeper) has to print
	// its first line after a turn's message; one that does not is hung,
	// and a new CLI takes the turn (0 or negative: not checked, for a CLI
	// that prints nothing on reading a message).
	AckWait time.Duration
	// Logger receives run diagnostics (never secrets). Nil: slog.Default.
	Logger *slog.Logger
}

// WithDefaults returns o with every unset field set to its default;
// binary is the CLI's own name.
func (o Options) WithDefaults(binary string) Options {
	if o.Binary == "" {
		o.Binary = binary
	}
	if o.DefaultMaxTurns <= 0 {
		o.DefaultMaxTurns = DefaultMaxTurns
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Configured lists the MCP servers names as "configured": what a CLI
// that reports no server status in its stream starts its session with.
func Configured(names []string) []ServerStatus {
	servers := make([]ServerStatus, 0, len(names))
	for _, n := range names {
		servers = append(servers, ServerStatus{Name: n, Status: "configured"})
	}
	return servers
}
