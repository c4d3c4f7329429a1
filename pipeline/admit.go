package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/sandbox"
)

// admit is a turn's first phase: it checks the request (its ids, its
// assistant, its messages, the options and connector the assistant lets it
// choose), then lets the turn in under the app's limits (takeChat) and,
// for a turn whose model calls go through the model proxy, past its
// connector's circuit breaker. Nothing is started before it passes.
func (t *turn) admit(ctx context.Context, app *assistant.App) error {
	req := t.req
	if err := validateIDs(req.UserID, req.ChatID); err != nil {
		return err
	}
	t.p.hooks.Prune(app)
	a, err := findAssistant(app, req.AssistantID)
	if err != nil {
		return err
	}
	t.asst = a
	t.meta = maps.Clone(req.Metadata)
	if t.trial == nil {
		// Only a skill's test turn carries it, so hooks may trust it.
		delete(t.meta, SkillTestMetadata)
	}
	if err := checkMessages(req.Messages); err != nil {
		return err
	}
	if err := t.checkRequest(app, a); err != nil {
		return err
	}
	if err := t.fetchImages(ctx, app); err != nil {
		return err
	}
	if t.connID, err = t.initialConnector(app, a); err != nil {
		return err
	}
	if c, ok := app.Connectors[t.connID]; ok && a.Sandbox == nil {
		// What the client asks of the model is checked before anything
		// runs (again when the connector is called: Create may change it).
		model := a.Options.Merge(req.Options).Model
		caps := c.ModelCapabilities(model)
		if model == "" {
			model, _ = assistant.ResolveValue(c.Options.Model)
		}
		if err := connector.CheckOptions(c.Type, caps, req.Options); err != nil {
			return fieldError(err)
		}
		if err := t.checkVision(split(req.Messages).input, model, caps); err != nil {
			return err
		}
	}
	t.p.breakers.Configure(breakerSettings(app))
	release, err := t.takeChat(ctx, limits(app))
	if err != nil {
		t.refused = true
		return err
	}
	// Released last, after the sandbox is gone: the chat's next turn never
	// meets this one's sandbox.
	t.defer_(release)
	if t.proxied(a) {
		// A sandboxed turn whose model calls would only meet an open
		// breaker fails before it starts a sandbox.
		return t.p.breakers.Get(t.connID).Check()
	}
	return nil
}

// findAssistant returns the app's assistant id, or the error a request
// for it fails with: chat.ErrUnavailable with the *assistant.Failed that
// says why, when its definition has errors; chat.ErrInvalidRequest with
// ErrUnknownAssistant when the app has no such assistant.
func findAssistant(app *assistant.App, id string) (*assistant.Assistant, error) {
	if a, ok := app.Assistants[id]; ok {
		return a, nil
	}
	if f := app.Failed[id]; f != nil {
		return nil, &chat.Error{Code: chat.ErrUnavailable, Message: f.Error(), Err: f}
	}
	return nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: ErrUnknownAssistant,
		Message: fmt.Sprintf("unknown assistant %q (have: %s)", id, strings.Join(sortedKeys(app.Assistants), ", "))}
}

func validateIDs(user, chatID string) error {
	if err := sandbox.ValidateID("user", user); err != nil {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	if err := sandbox.ValidateID("chat", chatID); err != nil {
		return &chat.Error{Code: chat.ErrInvalidRequest, Message: err.Error(), Err: err}
	}
	return nil
}

// maxMessages bounds how many messages one request may carry.
const maxMessages = 10000

func checkMessages(msgs []chat.Message) error {
	if len(msgs) == 0 {
		return badRequest("messages: at least one message is required")
	}
	if len(msgs) > maxMessages {
		return badRequest("messages: %d messages, at most %d are allowed", len(msgs), maxMessages)
	}
	for i, m := range msgs {
		switch m.Role {
		case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return badRequest("messages[%d].role: %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleUser && last.Role != chat.RoleTool {
		return badRequest("messages: the last message must be from the user (or a tool result), got %q", last.Role)
	}
	return nil
}

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

// initialConnector is the connector a turn starts with: the request's
// choice when the assistant's connector_options allow it, else the
// assistant's ("$ENV.NAME" resolved now when it was not set at load).
func (t *turn) initialConnector(app *assistant.App, a *assistant.Assistant) (string, error) {
	if c := t.req.Connector; c != "" {
		if err := allowedConnector(app, a, c); err != nil {
			return "", badRequest("connector: %v", err)
		}
		return c, nil
	}
	if a.ConnectorEnv != "" {
		id := os.Getenv(a.ConnectorEnv)
		if id == "" {
			return "", chat.Errorf(chat.ErrInternal, "assistant %q: its connector is $ENV.%s, which is not set", a.ID, a.ConnectorEnv)
		}
		if _, ok := app.Connectors[id]; !ok {
			return "", chat.Errorf(chat.ErrInternal, "assistant %q: $ENV.%s names connector %q, which is not defined", a.ID, a.ConnectorEnv, id)
		}
		return id, nil
	}
	return a.Connector, nil
}

// allowedConnector checks a request's choice of connector against the
// assistant's connector_options.
func allowedConnector(app *assistant.App, a *assistant.Assistant, id string) error {
	if id == a.Connector {
		return nil
	}
	c := a.ConnectorOptions
	if c == nil || (c.Optional != nil && !*c.Optional) {
		return fmt.Errorf("assistant %q does not let a request choose its connector (package.yao connector_options)", a.ID)
	}
	conn, ok := app.Connectors[id]
	if !ok {
		return fmt.Errorf("unknown connector %q", id)
	}
	if len(c.Connectors) > 0 {
		if !slices.Contains(c.Connectors, id) {
			return fmt.Errorf("assistant %q lets a request choose among %s, not %q", a.ID, strings.Join(c.Connectors, ", "), id)
		}
		return nil
	}
	for _, f := range c.Filters {
		v, declared := conn.Options.Capabilities[f]
		if b, isBool := v.(bool); !declared || (isBool && !b) {
			return fmt.Errorf("connector %q does not declare the capability %s that assistant %q requires", id, f, a.ID)
		}
	}
	return nil
}

// takeChat lets the turn of user on chat in under the app's limits: a
// slot of the user's, then the chat (waiting in line behind its running
// turn), then the chat's claim by the turn's assistant. release gives back
// what was taken; the caller calls it when the turn ends.
func (t *turn) takeChat(ctx context.Context, lim assistant.Limits) (release func(), err error) {
	p, req := t.p, t.req
	if t.nested && t.asst.Sandbox == nil {
		// Its caller holds the user's slot, and a direct assistant's
		// turns in one chat share nothing that needs them one at a time:
		// a hook may call it several times at once.
		return func() {}, nil
	}
	releaseUser, ok := func() {}, true
	if !t.nested {
		releaseUser, ok = p.users.acquire(req.UserID, lim.TurnsPerUser)
	}
	if !ok {
		p.metrics.rejected("turns_per_user")
		return nil, &chat.Error{Code: chat.ErrTooManyTurns, RetryAfter: retryAfter,
			Message: fmt.Sprintf("user %s already has %d turns and terminals running or waiting, the most this server allows at once (limits.turns_per_user); retry when one ends, or close a terminal", req.UserID, lim.TurnsPerUser)}
	}
	p.metrics.waiting.Inc()
	start := time.Now()
	unlock, err := p.chatLocks.Lock(ctx, req.UserID, req.ChatID, lim.ChatQueue, lim.ChatWait)
	p.metrics.waiting.Dec()
	t.phase(phaseChatWait, start)
	switch {
	case errors.Is(err, ErrChatQueueFull):
		releaseUser()
		p.metrics.rejected("chat_queue")
		return nil, &chat.Error{Code: chat.ErrChatBusy, RetryAfter: retryAfter, Err: err,
			Message: fmt.Sprintf("chat %s is busy: a turn runs on it and %d more wait (limits.chat_queue); turns of one chat run one at a time: retry when they are done", req.ChatID, lim.ChatQueue)}
	case errors.Is(err, ErrChatWait):
		releaseUser()
		p.metrics.rejected("chat_wait")
		return nil, &chat.Error{Code: chat.ErrChatBusy, RetryAfter: retryAfter, Err: err,
			Message: fmt.Sprintf("chat %s is busy: this turn waited %s for the turn before it to end (limits.chat_wait); retry later", req.ChatID, lim.ChatWait)}
	case err != nil:
		releaseUser()
		return nil, err
	}
	release = func() { unlock(); releaseUser() }
	if t.trial != nil || t.nested {
		// A skill's test runs in a throwaway chat, a called assistant in
		// its caller's chat's: claimed by nobody.
		return release, nil
	}
	owner, err := p.cfg.History.ClaimChat(ctx, req.UserID, req.ChatID, t.asst.ID)
	if err != nil {
		release()
		return nil, historyError(ctx, err)
	}
	if owner != t.asst.ID {
		release()
		return nil, chat.Errorf(chat.ErrChatAssistant,
			"chat %s belongs to assistant %q, and this request names %q: a chat stays with the assistant that started it (its history, memory and workspace are that assistant's); use another chat id to talk to %q",
			req.ChatID, owner, t.asst.ID, t.asst.ID)
	}
	return release, nil
}
