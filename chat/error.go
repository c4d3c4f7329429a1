package chat

// Error codes carried by error events, the done event's error and the
// error bodies of the HTTP API.
const (
	ErrTimeout        = "timeout"
	ErrRateLimit      = "rate_limit"
	ErrAuth           = "auth"
	ErrNetwork        = "network"
	ErrInvalidRequest = "invalid_request"
	ErrUpstream       = "upstream"
	ErrSandbox        = "sandbox"
	ErrExecutor       = "executor"
	ErrHook           = "hook"
	ErrCanceled       = "canceled"
	ErrInternal       = "internal"
	ErrMaxTurns       = "max_turns"
)
