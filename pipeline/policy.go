package pipeline

import (
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
)

// checkRequest holds the request to what the assistant allows: only the
// model options its Overridable lists, within their bounds, and, for a
// sandboxed assistant, no function-calling messages (its coding agent runs
// its own tools; a client's functions cannot be offered to it). A refusal
// is a chat.ErrInvalidRequest error whose cause is a *chat.FieldError
// naming the option or message.
func (t *turn) checkRequest(app *assistant.App, a *assistant.Assistant) error {
	if err := a.CheckOverride(t.req.Options, t.tokenCeiling(app, a)); err != nil {
		return fieldError(err)
	}
	if a.Sandbox == nil {
		return nil
	}
	for i, m := range t.req.Messages {
		if m.Role == chat.RoleTool || len(m.ToolCalls) > 0 {
			return fieldError(&chat.FieldError{Path: fmt.Sprintf("messages[%d]", i), Problem: fmt.Sprintf(
				"assistant %q runs a coding agent in a sandbox, which runs its own tools: it makes no function calls for a client to answer, "+
					"so tool results and tool calls cannot be sent to it; use a direct assistant for function calling", a.ID)})
		}
	}
	return nil
}

// tokenCeiling is the token limit a direct assistant's answers have when
// the assistant's options set none: the connector's own max_tokens, or
// the limit the Anthropic client sends by default (0: the provider's,
// which any request value only lowers). Sandboxed assistants have none:
// the model proxy caps the agent's own limit with the request's.
func (t *turn) tokenCeiling(app *assistant.App, a *assistant.Assistant) int {
	if a.Sandbox != nil {
		return 0
	}
	c, ok := app.Connectors[a.Connector]
	if !ok {
		return 0
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if n, ok := c.Options.Extra[k].(float64); ok && n > 0 {
			return int(n)
		}
	}
	if c.Type == connector.TypeAnthropic || c.Type == connector.TypeScripted {
		return connector.DefaultAnthropicMaxTokens
	}
	return 0
}

// fieldError is the invalid_request error for a refused request field.
func fieldError(err error) error {
	var fe *chat.FieldError
	if errors.As(err, &fe) {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: fe.Error(), Err: fe}
	}
	return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
}
