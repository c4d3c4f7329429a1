package agentcli

import (
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// Turn is what an executor's Run sets up before anything else: its events
// serialized (and dropped once Run returned), and the way it reports a
// failure before or instead of running the CLI.
type Turn struct {
	// Emit is the request's Emit, serialized (chat.Serial): safe for a
	// parser goroutine and the run, and silent once the turn ended.
	Emit    chat.EmitFunc
	stream  *chat.Serial
	errorID string
}

// NewTurn starts a turn that emits through emit; its error events have
// id errorID. The caller defers End.
func NewTurn(emit chat.EmitFunc, errorID string) *Turn {
	t := &Turn{errorID: errorID, stream: chat.NewSerial(emit)}
	t.Emit = t.stream.Emit
	return t
}

// End stops the turn's events: nothing is emitted after it.
func (t *Turn) End() { t.stream.Close() }

// Fail emits an error event and returns the failure as Run does: no
// result and a *chat.Error with code, message and cause (err may be nil).
func (t *Turn) Fail(code, message string, err error) (*executor.Result, error) {
	chat.ErrorEvent(t.Emit, t.errorID, code, message)
	return nil, &chat.Error{Code: code, Message: message, Err: err}
}

// Check fails a request that has no sandbox (or a sandbox without a
// workspace) or no assistant, as an internal error of the executor called
// name ("claude executor"); the error event is emitted. It returns nil for
// a request an executor can start with.
func (t *Turn) Check(req *executor.Request, name string) error {
	switch {
	case req.Sandbox == nil || req.Sandbox.Workspace() == nil:
		_, err := t.Fail(chat.ErrInternal, name+": request has no sandbox", nil)
		return err
	case req.Assistant == nil:
		_, err := t.Fail(chat.ErrInternal, name+": request has no assistant", nil)
		return err
	}
	return nil
}

// Secrets lists the values a run must never show in events or errors:
// the connector's key and the values of the CLI's MCP environment
// (MCPConfig.Env). Values shorter than four bytes are left out: redacting
// them would mangle ordinary text and they protect nothing.
func Secrets(key string, mcpEnv map[string]string) []string {
	var out []string
	if len(key) >= 4 {
		out = append(out, key)
	}
	for _, v := range mcpEnv {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	return out
}
