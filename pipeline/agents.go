package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// MaxAgentDepth bounds how deep assistants call assistants (a hook's
// ctx.agent, a Create or Next hook's delegate): the turn a client started
// is depth 0, an assistant it calls depth 1, and so on.
const MaxAgentDepth = 4

// ErrAgentCycle and ErrAgentDepth are the causes of a refused call of
// another assistant (code chat.ErrInvalidRequest).
var (
	ErrAgentCycle = errors.New("assistant call cycle")
	ErrAgentDepth = errors.New("assistant calls too deep")
)

// chainKey carries the assistants whose turns run above a turn, outermost
// first, the turn's own last.
type chainKey struct{}

func callChain(ctx context.Context) []string {
	c, _ := ctx.Value(chainKey{}).([]string)
	return c
}

func withChain(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, chainKey{}, append(slices.Clip(callChain(ctx)), id))
}

// checkCall refuses a call of callee from a turn whose chain is chain: a
// cycle (callee already runs above) or one level too many.
func checkCall(chain []string, callee string) error {
	path := strings.Join(append(slices.Clone(chain), callee), " → ")
	if slices.Contains(chain, callee) {
		return &chat.Error{Code: chat.ErrInvalidRequest, Err: ErrAgentCycle,
			Message: fmt.Sprintf("assistant %q is already running in this turn (%s): a call that comes back to an assistant above it would never end; call another assistant, or answer in this one", callee, path)}
	}
	if len(chain) > MaxAgentDepth {
		return &chat.Error{Code: chat.ErrInvalidRequest, Err: ErrAgentDepth,
			Message: fmt.Sprintf("calling assistant %q would be %d calls deep (%s), more than the %d allowed", callee, len(chain), path, MaxAgentDepth)}
	}
	return nil
}

// CallAgent runs another assistant's whole turn for a hook of t (ctx.agent):
// as t's user, bounded by ctx (t's cancellation and deadline, the hook's
// timeout), refused when it would close a cycle or go past MaxAgentDepth.
// The callee answers in a chat of its own beside t's (its memory.chat and
// workspace are its own, the same for every call from this chat) and its
// turn is not stored: a call's history is the caller's to keep.
func (t *turn) CallAgent(ctx context.Context, call jsapi.AgentCall) jsapi.AgentResult {
	res := jsapi.AgentResult{AssistantID: call.AssistantID}
	resp, chatID, err := t.callAgent(ctx, call.AssistantID, call.Messages, call.Connector, call.Metadata, jsapi.RefererAgentFork, call.Emit)
	res.ChatID = chatID
	if err != nil {
		res.Err = err
		return res
	}
	res.Content, res.FinishReason, res.Usage = resp.Content, resp.FinishReason, resp.Usage
	if resp.Data != nil {
		res.Data, res.HasData = resp.Data, true
	}
	return res
}

var _ jsapi.Agents = (*turn)(nil)

// callAgent runs assistant id's turn nested in t's.
// referer is what its hooks see as ctx.referer: jsapi.RefererAgentFork
// for ctx.agent's calls, jsapi.RefererAgent for a delegated turn, as
// Yao's.
func (t *turn) callAgent(ctx context.Context, id string, msgs []chat.Message, connector string, meta map[string]any, referer string, emit chat.EmitFunc) (*Response, string, error) {
	if err := checkCall(callChain(ctx), id); err != nil {
		return nil, "", err
	}
	chatID := nestedChatID(t.req.ChatID, id)
	req := &Request{UserID: t.req.UserID, TeamID: t.req.TeamID, ChatID: chatID, AssistantID: id, Messages: msgs, Ephemeral: true,
		Locale: t.req.Locale, Metadata: meta, Connector: connector, Client: t.req.Client}
	req.Client.Referer = referer
	resp, err := t.p.chat(ctx, req, emit, nil, true)
	return resp, chatID, err
}

// delegate hands t's turn to the assistant d names: its events stream as
// t's own (their ids prefixed, its done event dropped) and its answer is
// t's.
func (t *turn) delegate(ctx context.Context, d *jsapi.Delegate, conv conversation) error {
	msgs := d.Messages
	if msgs == nil {
		msgs = conv.all()
	}
	prefix := t.nextID("delegate") + "/"
	emit := func(e chat.Event) {
		if e.Event == chat.Done {
			return
		}
		e.ID = prefix + e.ID
		t.emit(e)
	}
	resp, _, err := t.callAgent(ctx, d.AssistantID, msgs, d.Connector, d.Metadata, jsapi.RefererAgent, emit)
	if err != nil {
		ce := chat.AsError(err)
		return &chat.Error{Code: ce.Code, Message: fmt.Sprintf("delegated to assistant %q: %s", d.AssistantID, ce.Message), Err: err, RetryAfter: ce.RetryAfter}
	}
	t.answer.Content, t.data, t.answer.FinishReason = resp.Content, resp.Data, resp.FinishReason
	t.delegated = true
	return nil
}

// nestedChatID is the chat a call of assistant callee from chat parent
// runs in: parent@callee when that is a valid chat id, else a short hash
// of it after the parent's start.
func nestedChatID(parent, callee string) string {
	id := parent + "@" + callee
	if sandbox.ValidateID("chat", id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:8])
	keep := min(len(parent), sandbox.MaxIDLen-len(h)-len("@"))
	return parent[:keep] + "@" + h
}
