package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Errors of Broker.Answer.
var (
	// ErrNotFound: no pending call of that id in the user's chat.
	ErrNotFound = errors.New("no such approval request in this chat")
	// ErrAnswered: the call was answered already (or its time ran out).
	ErrAnswered = errors.New("this approval request was already answered")
	// ErrBadDecision: a decision other than allow or deny.
	ErrBadDecision = errors.New(`decision must be "allow" or "deny"`)
)

// Request is a call to ask about.
type Request struct {
	UserID, ChatID string
	// Tool is the tool's name as the rules name it; Input its JSON input.
	Tool  string
	Input json.RawMessage
	// ToolUseID is the agent's id of the call ("" when it has none).
	ToolUseID string
	// Rule is the ask rule that matched.
	Rule string
	// Timeout bounds the wait.
	Timeout time.Duration
}

// Pending is an asked call waiting for its answer, as the API lists it and
// the approval_requested event carries it.
type Pending struct {
	ID        string          `json:"approval_id"`
	ChatID    string          `json:"chat_id"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input"`
	Diff      string          `json:"diff,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Rule      string          `json:"rule"`
	Created   time.Time       `json:"created_at"`
	Expires   time.Time       `json:"expires_at"`
}

// Props are p's props in an approval_requested event.
func (p *Pending) Props() map[string]any {
	props := map[string]any{"approval_id": p.ID, "tool": p.Tool, "input": p.Input, "rule": p.Rule,
		"expires_at": p.Expires.UTC().Format(time.RFC3339)}
	if p.Diff != "" {
		props["diff"] = p.Diff
	}
	if p.ToolUseID != "" {
		props["tool_use_id"] = p.ToolUseID
	}
	return props
}

// Answer is a person's answer to a pending call.
type Answer struct {
	Decision Verdict `json:"decision"`
	Reason   string  `json:"reason,omitempty"`
	// Remember allows, for the rest of the chat, every call the same rule
	// would ask about (with an allow decision).
	Remember bool `json:"remember,omitempty"`
}

// Outcome is how an asked call ended.
type Outcome struct {
	Allow bool
	// Reason is what the agent is told of a denial (and the person's
	// reason for an allow, if any).
	Reason string
	// By is "user", "timeout", "canceled" or "remembered".
	By string
}

// Props are o's props in an approval_resolved event.
func (o Outcome) Props(id string) map[string]any {
	d := Deny
	if o.Allow {
		d = Allow
	}
	props := map[string]any{"approval_id": id, "decision": string(d), "by": o.By}
	if o.Reason != "" {
		props["reason"] = o.Reason
	}
	return props
}

// answeredKeep is how long an answered id is remembered, so that a
// second answer is told it came late rather than that the id is unknown.
const answeredKeep = 30 * time.Minute

// Store keeps the rules users allowed for the rest of a chat (answers
// with Remember). *store.Store keeps them in the database, so that they
// outlive the server and are seen by every server sharing it; NewMemStore
// keeps them in memory.
type Store interface {
	// RememberApproval records that the chat's user allowed rule for the
	// rest of the chat; recording it twice is not an error.
	RememberApproval(ctx context.Context, user, chatID, rule string) error
	// ApprovalRemembered reports whether they did.
	ApprovalRemembered(ctx context.Context, user, chatID, rule string) (bool, error)
	// ForgetApprovals drops what was remembered for the chat.
	ForgetApprovals(ctx context.Context, user, chatID string) error
}

// Broker holds the pending calls of every chat of a server, in memory:
// they end with the server, whose turns end with it. What users allowed
// for the rest of a chat is kept in its Store. It is safe for concurrent
// use; the zero value is not: use NewBroker.
type Broker struct {
	store Store
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]*waiting // by approval id
	// answered are ids answered recently, when.
	answered map[string]time.Time
}

type waiting struct {
	Pending
	user   string
	answer chan Answer // buffered 1: the first answer wins
}

// NewBroker returns a broker without pending calls that remembers in st
// (nil: NewMemStore) and logs to log (nil: slog.Default).
func NewBroker(st Store, log *slog.Logger) *Broker {
	if st == nil {
		st = NewMemStore()
	}
	if log == nil {
		log = slog.Default()
	}
	return &Broker{store: st, log: log, pending: map[string]*waiting{}, answered: map[string]time.Time{}}
}

// Ask holds the call until the chat's user answers it, its timeout passes
// (a denial) or ctx ends (a denial: the turn is gone). A call whose rule
// the user allowed for the chat is allowed at once (when the store cannot
// say, the user is asked). asked is called with the pending call before
// Ask waits (to send the approval_requested event); it returns the id,
// "" when it did not ask.
func (b *Broker) Ask(ctx context.Context, r Request, asked func(*Pending)) (string, Outcome) {
	switch ok, err := b.store.ApprovalRemembered(ctx, r.UserID, r.ChatID, r.Rule); {
	case err != nil:
		b.log.Warn("remembered approvals unavailable: asking", "user", r.UserID, "chat", r.ChatID, "rule", r.Rule, "err", err)
	case ok:
		return "", Outcome{Allow: true, By: "remembered", Reason: "allowed for this chat"}
	}
	now := time.Now()
	w := &waiting{Pending: Pending{ID: newID(), ChatID: r.ChatID, Tool: r.Tool, Input: r.Input, Diff: Diff(r.Tool, r.Input),
		ToolUseID: r.ToolUseID, Rule: r.Rule, Created: now, Expires: now.Add(r.Timeout)}, user: r.UserID, answer: make(chan Answer, 1)}
	b.mu.Lock()
	b.pending[w.ID] = w
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, w.ID)
		b.answered[w.ID] = time.Now()
		b.mu.Unlock()
	}()
	if asked != nil {
		asked(&w.Pending)
	}
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	select {
	case a := <-w.answer:
		return w.ID, answered(a)
	case <-timer.C:
		select {
		case a := <-w.answer: // an answer Answer took as the time ran out
			return w.ID, answered(a)
		default:
		}
		return w.ID, Outcome{Reason: fmt.Sprintf("Denied: nobody answered the approval request for %s within %s. Do not retry the same call; continue without it or ask the user.", r.Tool, r.Timeout), By: "timeout"}
	case <-ctx.Done():
		return w.ID, Outcome{Reason: "Denied: the turn ended before the approval request was answered.", By: "canceled"}
	}
}

// answered is the outcome of a person's answer.
func answered(a Answer) Outcome {
	if a.Decision == Allow {
		return Outcome{Allow: true, Reason: a.Reason, By: "user"}
	}
	reason := "The user denied this tool call."
	if a.Reason != "" {
		reason = "The user denied this tool call: " + a.Reason
	}
	return Outcome{Reason: reason, By: "user"}
}

// Answer records the answer of user (or of the operator, who may answer
// any user's call: operator true) to the call id of the chat. It returns
// ErrNotFound for an id that is not the chat's user's, ErrAnswered for one
// answered already. An allow with Remember is recorded in the store first:
// when that fails, the error says so and the call still waits.
func (b *Broker) Answer(ctx context.Context, user, chatID, id string, operator bool, a Answer) error {
	if a.Decision != Allow && a.Decision != Deny {
		return ErrBadDecision
	}
	w, err := b.find(user, chatID, id, operator)
	if err != nil {
		return err
	}
	if a.Remember && a.Decision == Allow {
		if err := b.store.RememberApproval(ctx, w.user, chatID, w.Rule); err != nil {
			return fmt.Errorf("remember %s for the chat: %w", w.Rule, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case w.answer <- a:
	default:
		return ErrAnswered
	}
	if b.pending[id] == nil {
		// Its time ran out (or its turn ended) while the answer was
		// on its way: nothing reads the answer.
		return ErrAnswered
	}
	delete(b.pending, id)
	b.answered[id] = time.Now()
	return nil
}

// find returns the pending call id of the chat, as Answer may see it.
func (b *Broker) find(user, chatID, id string, operator bool) (*waiting, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune()
	w := b.pending[id]
	if w == nil || w.ChatID != chatID || (!operator && w.user != user) {
		if _, ok := b.answered[id]; ok && w == nil {
			return nil, ErrAnswered
		}
		return nil, ErrNotFound
	}
	return w, nil
}

// List returns the chat's pending calls, oldest first (operator: of any
// user; else user's).
func (b *Broker) List(user, chatID string, operator bool) []Pending {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []Pending{}
	for _, w := range b.pending {
		if w.ChatID == chatID && (operator || w.user == user) {
			out = append(out, w.Pending)
		}
	}
	slices.SortFunc(out, func(x, y Pending) int { return x.Created.Compare(y.Created) })
	return out
}

// Forget drops what the chat's user allowed for the chat (the chat was
// deleted).
func (b *Broker) Forget(ctx context.Context, user, chatID string) error {
	return b.store.ForgetApprovals(ctx, user, chatID)
}

// prune drops answered ids older than answeredKeep; b.mu is held.
func (b *Broker) prune() {
	for id, at := range b.answered {
		if time.Since(at) > answeredKeep {
			delete(b.answered, id)
		}
	}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "apr_" + hex.EncodeToString(b[:])
}
