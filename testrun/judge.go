package testrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// appChecker runs a case's assertions that need the app: agent judges and
// script functions.
type appChecker struct {
	r   *runner
	s   *Suite
	c   *Case
	res *Result
}

// helperSeq numbers the helper chats (judges, simulators) of a run.
var helperSeq atomic.Int64

// helperChat runs one turn of a helper assistant (a judge or a simulator)
// in a chat of its own, removed afterwards, and returns its answer text.
// Its usage is added to the case's.
func (r *runner) helperChat(ctx context.Context, role, assistantID, connector, input string, into *chat.Usage) (*turnOutcome, error) {
	if _, ok := r.app.Assistants[assistantID]; !ok {
		return nil, fmt.Errorf("%s assistant %q does not exist (have: %s)", role, assistantID, strings.Join(sortedIDs(r.app), ", "))
	}
	chatID := fmt.Sprintf("test-%s-%s-%d", r.opts.RunID, role, helperSeq.Add(1))
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = r.backend.DeleteChat(dctx, r.opts.User, chatID)
	}()
	out, err := r.runTurn(ctx, turnRequest{Assistant: assistantID, ChatID: chatID, Connector: connector,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: input}},
		Metadata: map[string]any{"test_mode": role}}, nil)
	if into != nil && out != nil {
		addUsage(into, out.Usage)
	}
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", role, assistantID, err)
	}
	return out, nil
}

// judgeVerdict is what a judge answers.
type judgeVerdict struct {
	Passed   bool
	Reason   string
	Response map[string]any
}

// judge asks a judge assistant whether output meets criteria. Its input
// is Yao's: {"output", "input", "criteria", ...metadata} as JSON; it
// answers {"passed": bool, "reason": "..."} (JSON, also in a code block or
// prose).
func (r *runner) judge(ctx context.Context, judgeID string, output, input, criteria any, opts *AssertionOptions, into *chat.Usage) (*judgeVerdict, error) {
	req := map[string]any{"output": output, "input": input}
	if criteria != nil {
		req["criteria"] = criteria
	}
	connector := ""
	if opts != nil {
		for k, v := range opts.Metadata {
			req[k] = v
		}
		connector = opts.Connector
	}
	b, err := json.Marshal(normalize(req))
	if err != nil {
		return nil, fmt.Errorf("judge input: %w", err)
	}
	out, err := r.helperChat(ctx, "judge", judgeID, connector, string(b), into)
	if err != nil {
		return nil, err
	}
	v, ok := extractJSON(out.Text)
	m, isObj := v.(map[string]any)
	if !ok || !isObj {
		return nil, fmt.Errorf("judge %s answered no JSON verdict {\"passed\": true|false, \"reason\": \"...\"}: %s", judgeID, preview(out.Text, 200))
	}
	passed, has := m["passed"].(bool)
	if !has {
		return nil, fmt.Errorf("judge %s's verdict has no \"passed\" true or false: %s", judgeID, preview(out.Text, 200))
	}
	reason, _ := m["reason"].(string)
	return &judgeVerdict{Passed: passed, Reason: reason, Response: m}, nil
}

// judge implements checker: an agent assertion.
func (ck *appChecker) judge(ctx context.Context, a *Assertion, output, input any) *AssertionResult {
	id := strings.TrimPrefix(a.Use, "agents:")
	res := &AssertionResult{Actual: output}
	v, err := ck.r.judge(ctx, id, output, input, a.Value, a.Options, &ck.res.Usage)
	if err != nil {
		res.Message = err.Error()
		return res
	}
	res.Passed, res.Message, res.Expected = v.Passed, v.Reason, v.Response
	if res.Message == "" {
		res.Message = fmt.Sprintf("judge %s: passed=%v", id, v.Passed)
	}
	return res
}

// script implements checker: a script assertion runs a function with
// (output, input, expected) and takes true/false or {pass, message}.
func (ck *appChecker) script(ctx context.Context, a *Assertion, output, input any) *AssertionResult {
	res := &AssertionResult{Actual: output, Expected: a.Value}
	name := a.scriptName()
	fn, err := ck.r.scripts.function(name)
	if err != nil {
		res.Message = err.Error()
		return res
	}
	v, logs, err := ck.r.scripts.apply(ctx, ck.r, fn, nil, nil, output, input, a.Value)
	ck.res.Logs = append(ck.res.Logs, logs...)
	if err != nil {
		res.Message = fmt.Sprintf("script %s failed: %v", name, err)
		return res
	}
	switch x := v.(type) {
	case bool:
		res.Passed = x
		res.Message = "script assertion failed"
		if x {
			res.Message = "script assertion passed"
		}
	case map[string]any:
		res.Passed, _ = x["pass"].(bool)
		res.Message, _ = x["message"].(string)
		if res.Message == "" {
			res.Message = fmt.Sprintf("script %s: pass=%v", name, res.Passed)
		}
	default:
		res.Message = fmt.Sprintf("script %s returned %s: want true, false or {pass, message}", name, describe(v))
	}
	return res
}
