package chat

import (
	"math"
	"time"
)

// How a sandboxed turn got its sandbox (Timings.Sandbox).
const (
	// SandboxCold: the turn created its sandbox and started the CLI.
	SandboxCold = "cold"
	// SandboxPooled: the turn claimed a sandbox made ahead of demand (the
	// assistant's warm pool, sandbox.pool) and started the CLI.
	SandboxPooled = "pooled"
	// SandboxPrimed: the turn claimed a pooled sandbox whose CLI was
	// started ahead of demand too, and sent its message to that CLI.
	SandboxPrimed = "primed"
	// SandboxWarm: the turn ran on its chat's live sandbox and CLI
	// (sandbox.keep_alive).
	SandboxWarm = "warm"
	// SandboxRestart: the turn ran in its chat's live sandbox, on a new
	// CLI (the one kept was gone, unhealthy, or started differently).
	SandboxRestart = "restart"
)

// Timings say where a turn's time went, in milliseconds. Phases a turn did
// not go through are left out (0). Durations are of the phase alone,
// except FirstByteMS and FirstTextMS, which count from the turn's start
// (the request's arrival): what a user waits for.
type Timings struct {
	// Sandbox is how a sandboxed turn got its sandbox: SandboxCold,
	// SandboxPooled, SandboxPrimed, SandboxWarm or SandboxRestart ("" for
	// a direct assistant).
	Sandbox string `json:"sandbox,omitempty"`
	// ChatWaitMS is the wait for the chat's previous turn, SandboxWaitMS
	// the wait for a sandbox slot (limits).
	ChatWaitMS    float64 `json:"chat_wait_ms,omitempty"`
	SandboxWaitMS float64 `json:"sandbox_wait_ms,omitempty"`
	// AssembleMS is loading the history and assembling the messages.
	AssembleMS float64 `json:"assemble_ms,omitempty"`
	// SandboxCreateMS is getting the sandbox: the workspace, the bridge
	// and the container (a live chat's: finding and checking it).
	SandboxCreateMS float64 `json:"sandbox_create_ms,omitempty"`
	// HookCreateMS and HookNextMS are the Create and Next hooks.
	HookCreateMS float64 `json:"hook_create_ms,omitempty"`
	HookNextMS   float64 `json:"hook_next_ms,omitempty"`
	// ExecuteMS is the answer: the executor's run or the connector's
	// call.
	ExecuteMS float64 `json:"execute_ms,omitempty"`
	// CLIStartMS is from starting the CLI to its first line (init); 0
	// when the turn used a CLI already running.
	CLIStartMS float64 `json:"cli_start_ms,omitempty"`
	// FirstByteMS is when the model's answer began (its first streamed
	// event), FirstTextMS when the first text of the answer was sent to
	// the client, both from the turn's start.
	FirstByteMS float64 `json:"first_byte_ms,omitempty"`
	FirstTextMS float64 `json:"first_text_ms,omitempty"`
	// ToolsMS is the time the agent's tool calls took, added up (from the
	// model's call to its result), and Tools how many there were.
	ToolsMS float64 `json:"tools_ms,omitempty"`
	Tools   int     `json:"tools,omitempty"`
	// SandboxRemoveMS is removing the sandbox: the sandbox goes after the
	// done event, so the event has 0 (the turn's log line and trace have
	// it), as for a sandbox kept for the chat's next turn.
	SandboxRemoveMS float64 `json:"sandbox_remove_ms,omitempty"`
	// TotalMS is the whole turn, from the request to the done event.
	TotalMS float64 `json:"total_ms"`
}

// MS is d in milliseconds, to the hundredth (the precision of Timings).
func MS(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(d)/1e4) / 100
}
