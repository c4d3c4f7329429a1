package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// Tool approval (package approval): the assistant's policy says of each
// tool call of its agent whether it runs, is refused, or waits for the
// chat's user, who is sent an approval_requested event and answers with
// Approve.

// Event types of tool approval.
const (
	// TypeApprovalRequested: a tool call waits for its user's answer;
	// props approval_id, tool, input, diff (a file edit's), rule (the ask
	// rule), tool_use_id, expires_at.
	TypeApprovalRequested = "approval_requested"
	// TypeApprovalResolved: it was answered; props approval_id, decision
	// (allow or deny), by (user, timeout, canceled), reason.
	TypeApprovalResolved = "approval_resolved"
)

// PromptTool is the host tool Claude Code asks through
// (--permission-prompt-tool mcp__agentbox__approval_prompt).
const PromptTool = "approval_prompt"

// PromptToolName is PromptTool as the CLI names it.
const PromptToolName = "mcp__" + bridge.ServerName + "__" + PromptTool

// Verdict is the outcome of one call under the policy.
type Verdict struct {
	Allow bool
	// Reason is what the agent is told of a denial.
	Reason string
}

// approve decides a tool call of the turn's agent: the policy's deny and
// allow rules at once, its ask rules by asking the chat's user (events on
// the turn's stream) until the answer or the policy's timeout.
func (t *turn) approve(ctx context.Context, tool string, input json.RawMessage, toolUseID string) Verdict {
	pol := t.asst.Approval
	v, rule := pol.Decide(tool, input, sandbox.Workdir)
	switch v {
	case approval.Allow:
		return Verdict{Allow: true}
	case approval.Deny:
		t.p.log.Info("tool call denied by policy", "user", t.req.UserID, "chat", t.req.ChatID, "tool", tool, "rule", rule)
		return Verdict{Reason: fmt.Sprintf("Denied by this assistant's approval policy (rule %s). Do not retry it.", rule)}
	}
	id, o := t.p.approvals.Ask(ctx, approval.Request{UserID: t.req.UserID, ChatID: t.req.ChatID, Tool: tool, Input: input,
		ToolUseID: toolUseID, Rule: rule, Timeout: pol.Timeout}, func(p *approval.Pending) {
		t.p.log.Info("tool call waits for approval", "user", t.req.UserID, "chat", t.req.ChatID, "tool", tool, "rule", rule, "approval", p.ID)
		chat.Whole(t.emit, "approval-"+p.ID, TypeApprovalRequested, "", p.Props())
	})
	if id != "" {
		t.p.log.Info("approval resolved", "user", t.req.UserID, "chat", t.req.ChatID, "approval", id, "allow", o.Allow, "by", o.By)
		chat.Whole(t.emit, "approval-"+id+"-resolved", TypeApprovalResolved, "", o.Props(id))
	}
	return Verdict{Allow: o.Allow, Reason: o.Reason}
}

// promptTool is the bridge tool Claude Code calls before a tool its
// permission rules would ask about (2.1.197: input {tool_name, input,
// tool_use_id}; the answer a text of {behavior: allow, updatedInput} or
// {behavior: deny, message}). at is the turn the call belongs to (a kept
// chat's bridge serves later turns too).
func promptTool(timeout time.Duration, at func() *turn) bridge.Tool {
	return bridge.Tool{
		Name:        PromptTool,
		Description: "agentbox's permission prompt: asks the chat's user before a tool runs, as the assistant's approval policy says.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tool_name":{"type":"string"},"input":{"type":"object"},"tool_use_id":{"type":"string"}},"required":["tool_name","input"]}`),
		// The bridge's own bound must not cut the wait short.
		Timeout: timeout + time.Minute,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct {
				ToolName  string          `json:"tool_name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("permission prompt: %w", err)
			}
			t := at()
			if t == nil {
				return nil, errors.New("permission prompt: no turn is running")
			}
			v := t.approve(ctx, in.ToolName, in.Input, in.ToolUseID)
			if v.Allow {
				return map[string]any{"behavior": "allow", "updatedInput": in.Input}, nil
			}
			return map[string]any{"behavior": "deny", "message": v.Reason}, nil
		},
	}
}

// Approvals lists the tool calls of the chat waiting for an answer,
// oldest first: the user's own, or any user's for the operator.
func (p *Pipeline) Approvals(user, chatID string, operator bool) []approval.Pending {
	return p.approvals.List(user, chatID, operator)
}

// Approve answers a waiting tool call of the user's chat (the operator
// may answer any user's). An allow with Remember is kept in
// Config.Approvals. Errors: approval.ErrNotFound, approval.ErrAnswered,
// approval.ErrBadDecision.
func (p *Pipeline) Approve(ctx context.Context, user, chatID, id string, operator bool, a approval.Answer) error {
	return p.approvals.Answer(ctx, user, chatID, id, operator, a)
}

// asks reports whether a's agent asks the bridge's prompt tool before its
// tools run: Claude Code, under a policy with rules.
func asks(a *assistant.Assistant) bool {
	return !a.Approval.Empty() && a.Sandbox != nil && a.Sandbox.Command == "claude"
}

// readDenies are the deny rules Claude Code must keep itself
// (--disallowedTools): it reads, lists and searches its workspace without
// asking, so such calls never reach the prompt tool.
func readDenies(p *approval.Policy) []string {
	var out []string
	for _, r := range p.Deny {
		if approval.ReadOnly[r.Tool()] {
			out = append(out, r.Text)
		}
	}
	return out
}
