package pipeline

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
)

// assemble is the phase that gathers what the turn runs with: its
// conversation, from this point held by the chat (a failure is stored
// with it), its options before a Create hook, and the assistant's hooks
// with the context they run in.
func (t *turn) assemble(ctx context.Context, app *assistant.App) error {
	start := time.Now()
	if err := t.startFrom(ctx); err != nil {
		return err
	}
	conv, err := t.buildConversation(ctx)
	t.phase(phaseAssemble, start)
	if err != nil {
		return err
	}
	t.conv = &conv
	t.opts = t.options(t.asst)
	if t.hooks, err = t.p.hooks.Get(app, t.asst); err != nil {
		return &chat.Error{Code: chat.ErrHook, Message: "hooks do not compile: " + err.Error(), Err: err}
	}
	t.hc = t.hookContext(t.asst)
	return nil
}

// buildConversation builds the turn's conversation before the Create
// hook: either the stored history (when the client sent only the new
// message) or the client's whole conversation. The prompts come later
// (withPrompts): as in Yao, Create sees the conversation without them,
// and may pick a preset.
func (t *turn) buildConversation(ctx context.Context) (conversation, error) {
	client := split(t.req.Messages)
	c := conversation{system: client.system, input: client.input}
	if len(client.history) > 0 && !t.req.Continue {
		c.replace = true
		c.history = client.history
		return c, nil
	}
	stored, err := t.p.cfg.History.History(ctx, t.req.UserID, t.req.ChatID)
	if err != nil {
		return c, historyError(ctx, err)
	}
	c.history = append(answered(stored), client.history...)
	c.added = client.history
	return c, nil
}

// answered is a stored history as a model sees it: what was said, not
// what went wrong. An exchange whose turn failed before it answered
// anything (the messages it added and its failure) is left out; a failed
// answer cut short keeps its text.
func answered(msgs []chat.Message) []chat.Message {
	out := make([]chat.Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Failure.Code == "":
			out = append(out, m)
		case m.Content != "" || len(m.ToolCalls) > 0:
			m.Failure = chat.Failure{}
			out = append(out, m)
		default:
			for len(out) > 0 && out[len(out)-1].Role != chat.RoleAssistant {
				out = out[:len(out)-1]
			}
		}
	}
	return out
}

// options are the turn's options before a Create hook: the assistant's
// model options with the request's over them, the assistant's connector
// and, for a sandboxed assistant, its sandbox arguments (a copy: the turn
// may change them).
func (t *turn) options(a *assistant.Assistant) chat.Options {
	// Yao passes the request's metadata in Create's options too.
	o := chat.Options{ModelOptions: a.Options.Merge(t.req.Options), Connector: t.connID, Metadata: t.meta}
	if a.Sandbox != nil {
		args := a.Sandbox.Arguments.Clone()
		o.Sandbox = &chat.SandboxOptions{Arguments: &args}
	}
	return o
}

func (t *turn) hookContext(a *assistant.Assistant) *jsapi.Context {
	return &jsapi.Context{
		ChatID:      t.req.ChatID,
		AssistantID: a.ID,
		UserID:      t.req.UserID,
		TeamID:      t.req.TeamID,
		Locale:      t.req.Locale,
		Metadata:    t.meta,
		Client:      t.req.Client,
		Emit:        t.emit,
		Agents:      t,
		LLM:         t,
		MCP:         t,
		Memory:      t.p.cfg.Memory,
		Logger:      t.p.log.With("assistant", a.ID, "user", t.req.UserID, "chat", t.req.ChatID),
	}
}

// conversation is a turn's messages, split the way executors need them.
type conversation struct {
	// prompts are the assistant's prompts once withPrompts put them in:
	// agent/prompts.yml's, then the assistant's or a preset's, each as
	// written (any role, its name kept), as Yao puts them before the
	// conversation.
	prompts []chat.Message
	// system are the conversation's own leading system messages (the
	// client's, or those Create returned).
	system []chat.Message
	// history is what came before this turn (stored or client-sent
	// history, system messages in it where they were), oldest first.
	history []chat.Message
	// input is this turn's trailing user message(s).
	input []chat.Message
	// replace is set when the client sent the whole conversation, which
	// then replaces the stored history.
	replace bool
	// added are messages before the input that this turn adds to the
	// stored history (Request.Continue).
	added []chat.Message
}

// systemPrompt is every system message of the prompts and the
// conversation's leading ones, joined: the system prompt of an executor,
// which takes it apart from the conversation.
func (c conversation) systemPrompt() string {
	var parts []string
	for _, m := range slices.Concat(c.prompts, c.system) {
		if isSystem(m.Role) {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, "\n\n")
}

// examples are the prompts that are not system messages (example
// exchanges), which an executor gets before the history.
func (c conversation) examples() []chat.Message {
	var out []chat.Message
	for _, m := range c.prompts {
		if !isSystem(m.Role) {
			out = append(out, m)
		}
	}
	return out
}

// all is the conversation as one list, in the order a model gets it: the
// prompts, the leading system messages, the history and the input. Before
// withPrompts it is what the Create hook sees.
func (c conversation) all() []chat.Message {
	return slices.Concat(c.prompts, c.system, c.history, c.input)
}

// isSystem reports whether a role gives instructions (system, or OpenAI's
// newer developer).
func isSystem(role string) bool { return role == chat.RoleSystem || role == chat.RoleDeveloper }

// split turns a flat message list back into a conversation: its leading
// system messages, the history, and the trailing user (or tool) input.
func split(msgs []chat.Message) conversation {
	var c conversation
	i := 0
	for i < len(msgs) && isSystem(msgs[i].Role) {
		i++
	}
	c.system, msgs = msgs[:i], msgs[i:]
	j := len(msgs)
	for j > 0 && (msgs[j-1].Role == chat.RoleUser || msgs[j-1].Role == chat.RoleTool) {
		j--
	}
	c.history, c.input = msgs[:j], msgs[j:]
	return c
}

// withPrompts puts the turn's prompts in front of the conversation (Yao
// agent/assistant/build.go buildMessages).
func (c conversation) withPrompts(prompts []chat.Message) conversation {
	c.prompts = prompts
	return c
}
