package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/executor"
)

// The server's tool loop for a direct assistant (tools.go gathers the
// tools): a round's calls run at once, each result goes back to the model
// the way Yao's loop writes it, until the model answers without calling a
// tool.

// directAnswer is a direct turn's answer.
type directAnswer struct {
	// Response is the answer: the text of every round, the usage of every
	// model call, the client's tool calls (none when the server ran them).
	*connector.Response
	// asked are the tool calls of the model's last answer (the Next hook's
	// completion.tool_calls).
	asked []chat.ToolCall
	// tools are the calls the server ran.
	tools []executor.ToolCall
}

// loopFallbackPrompt is the system prompt of Yao's loop_fallback assistant
// (yao/assistants/loop_fallback/prompts.yml), which answers when the tool
// loop ran out of rounds.
const loopFallbackPrompt = `You are a response synthesizer for an AI assistant.
You are the FALLBACK — you are called only when the primary tool loop has been exhausted.

## Your Input

You will receive a single message containing three sections in Markdown format:

### "## Assistant Context"
This is the system prompt / personality of the original assistant that the user is talking to.
You MUST adopt this context as your own — respond as if you ARE that assistant.
Follow its tone, domain expertise, language preferences, and constraints.

### "## Conversation"
This shows the recent conversation between the user and the assistant.
The last user message is the question you need to answer.

### "## Tool Results"
These are the results from tools that were executed to help answer the user's question.
Each result is labeled with the tool name and contains JSON data or an error message.

## Your Task

1. Read the Assistant Context — adopt that persona
2. Understand what the user asked in the Conversation
3. Use the Tool Results data to formulate your answer
4. Respond naturally as the original assistant would

## Rules

- Respond in the SAME LANGUAGE as the user's message
- Be concise and directly answer what was asked
- Do NOT mention tool names, server IDs, JSON structures, or any technical internals
- Do NOT say "based on the tool results" or "according to the data" — just answer naturally
- If results contain structured data (lists, tables), format them readably
- If the Assistant Context has specific formatting/style rules, follow them
- You have NO access to any tools — do NOT suggest calling tools, retrying, or trying alternative methods
- Work ONLY with the Tool Results provided — do NOT fabricate or guess data
- If all tool results are errors or empty, honestly tell the user the request could not be completed and suggest rephrasing
`

// toolLoop answers with the model and the server's tools: each round's
// calls run and their results go back to the model, until it answers
// without calling a tool. With loop false (a Next hook, or
// mcp.options.tool_loop false) the first round's calls run and the turn
// ends there. Past maxRounds rounds of results, one call without tools
// answers from them (Yao's loop_fallback). Every model call goes through
// the connector's breaker and within the turn's deadline; the usage of
// every call is the turn's.
func (t *turn) toolLoop(ctx context.Context, cl connector.Client, req *connector.Request, conv conversation, tb *toolbox, loop bool, maxRounds int) (*directAnswer, error) {
	ans := &directAnswer{Response: &connector.Response{}}
	var texts, thinking []string
	var runs []*toolRun
	add := func(r *connector.Response) {
		ans.Usage.Add(r.Usage)
		ans.Usage.ModelCalls++
		ans.Attempts += r.Attempts
		ans.Model = cmp.Or(r.Model, ans.Model)
		ans.FinishReason = r.FinishReason
		if r.Content != "" {
			texts = append(texts, r.Content)
		}
		if r.Thinking != "" {
			thinking = append(thinking, r.Thinking)
		}
	}
	finish := func() *directAnswer {
		ans.Content = strings.Join(texts, chat.TextSeparator)
		ans.Thinking = strings.Join(thinking, chat.TextSeparator)
		for _, r := range runs {
			ans.tools = append(ans.tools, r.record())
		}
		return ans
	}
	for round := 0; ; round++ {
		resp, err := cl.Stream(ctx, req, t.sawAnswer(t.emit))
		if resp != nil {
			add(resp)
		}
		if err != nil {
			return finish(), err
		}
		ans.asked = resp.ToolCalls
		if len(resp.ToolCalls) == 0 {
			return finish(), nil
		}
		// The server runs the calls: the model does not wait for the client.
		ans.FinishReason = chat.FinishStop
		got := t.runTools(ctx, tb, resp.ToolCalls)
		runs = append(runs, got...)
		if err := ctx.Err(); err != nil {
			return finish(), chat.AsError(context.Cause(ctx))
		}
		if !loop {
			return finish(), nil
		}
		if round >= maxRounds {
			t.p.log.Info("tool loop reached its rounds: answering from the results", "assistant", t.asst.ID, "rounds", maxRounds)
			return t.loopFallback(ctx, cl, req, conv, runs, add, finish)
		}
		next := slices.Clone(req.Messages)
		next = append(next, chat.Message{Role: chat.RoleAssistant, Content: resp.Content, Reasoning: resp.Thinking, ToolCalls: resp.ToolCalls})
		for _, r := range got {
			next = append(next, r.message())
		}
		cp := *req
		cp.Messages = next
		req = &cp
	}
}

// loopFallback answers, once the tool loop ran out of rounds, from the
// conversation and the tool results, without tools: Yao delegates to its
// loop_fallback assistant with this Markdown (agent/assistant/loop.go
// buildLoopFallbackMarkdown). When that call fails the answer is what the
// model said until then, as in Yao.
func (t *turn) loopFallback(ctx context.Context, cl connector.Client, req *connector.Request, conv conversation, runs []*toolRun,
	add func(*connector.Response), finish func() *directAnswer) (*directAnswer, error) {
	var b strings.Builder
	b.WriteString("## Assistant Context\n\n")
	all := conv.all()
	for _, m := range all {
		if m.Role == chat.RoleSystem && m.Content != "" {
			b.WriteString(m.Content)
			b.WriteString("\n\n")
		}
	}
	b.WriteString("## Conversation\n\n")
	for _, m := range all {
		switch {
		case m.Content == "":
		case m.Role == chat.RoleUser:
			fmt.Fprintf(&b, "**User**: %s\n\n", m.Content)
		case m.Role == chat.RoleAssistant:
			fmt.Fprintf(&b, "**Assistant**: %s\n\n", m.Content)
		}
	}
	b.WriteString("## Tool Results\n\n")
	for _, r := range runs {
		name := r.call.Name
		if r.st != nil {
			name = r.st.server + "." + r.st.tool
		}
		fmt.Fprintf(&b, "### %s\n", name)
		if r.err != nil {
			fmt.Fprintf(&b, "Error: %s\n\n", r.err)
			continue
		}
		raw, _ := json.Marshal(r.parsed())
		fmt.Fprintf(&b, "```json\n%s\n```\n\n", raw)
	}
	b.WriteString("---\nPlease answer the user's question based on the above context and tool results.\n")
	b.WriteString("Respond in the same language as the user.\n")
	opts := req.Options
	opts.Tools, opts.ToolChoice, opts.ParallelToolCalls = nil, nil, nil
	fb := &connector.Request{Model: req.Model, System: loopFallbackPrompt, Options: opts, MaxTokens: req.MaxTokens,
		Messages: []chat.Message{{Role: chat.RoleUser, Content: capResult(b.String())}}}
	resp, err := cl.Stream(ctx, fb, t.sawAnswer(t.emit))
	if resp != nil {
		add(resp)
	}
	if err != nil {
		if ctx.Err() != nil {
			return finish(), err
		}
		t.p.log.Warn("tool loop fallback failed: answering with what the model said", "assistant", t.asst.ID, "error", err)
		chat.Notice(t.emit, t.nextID("notice"), "tool_loop_exhausted",
			fmt.Sprintf("the model was still calling tools after %d rounds, and answering from their results failed: %v", t.asst.ToolLoop.MaxTurns, chat.AsError(err).Message))
	}
	return finish(), nil
}

// toolRun is one tool call of a round and what came of it.
type toolRun struct {
	call    chat.ToolCall
	st      *serverTool // nil: no such tool
	content []json.RawMessage
	// err is why the call failed (Yao's ToolCallResult.Error): its
	// arguments, the call itself, or an error result.
	err            error
	started, ended time.Time
}

// runTools runs a round's calls, at most toolParallel at once, and emits
// each one's result as it comes.
func (t *turn) runTools(ctx context.Context, tb *toolbox, calls []chat.ToolCall) []*toolRun {
	runs := make([]*toolRun, len(calls))
	slot := make(chan struct{}, toolParallel)
	var wg sync.WaitGroup
	for i, c := range calls {
		r := &toolRun{call: c, st: tb.byName[c.Name]}
		runs[i] = r
		wg.Go(func() {
			slot <- struct{}{}
			defer func() { <-slot }()
			r.started = time.Now()
			r.content, r.err = t.runTool(ctx, r)
			r.ended = time.Now()
			t.emitToolResult(r)
		})
	}
	wg.Wait()
	return runs
}

// runTool runs one call the way Yao's executeSingleToolCall does: the
// arguments must be a JSON object valid for the tool's schema, and an
// error result is an error too.
func (t *turn) runTool(ctx context.Context, r *toolRun) (content []json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			t.p.log.Error("tool call panicked", "tool", r.call.Name, "panic", p)
			content, err = nil, fmt.Errorf("tool call failed: internal error")
		}
	}()
	if r.st == nil {
		return nil, fmt.Errorf("invalid MCP tool name format: %s (not one of this assistant's tools)", r.call.Name)
	}
	args := map[string]any{}
	if raw := strings.TrimSpace(r.call.Arguments()); raw != "" && raw != "{}" {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("failed to parse arguments: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("arguments must be an object, got %s", jsonKind(v))
		}
		args = m
	}
	if r.st.resolved != nil {
		if err := r.st.resolved.Validate(args); err != nil {
			return nil, fmt.Errorf("argument validation failed: %w", err)
		}
	}
	if !t.asst.Approval.Empty() {
		// Asked before the tool's own time starts.
		in, _ := json.Marshal(args)
		if v := t.approve(ctx, "mcp__"+r.st.server+"__"+r.st.tool, in, r.call.ID); !v.Allow {
			return nil, errors.New(v.Reason)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(r.st.timeout, bridge.DefaultToolTimeout))
	defer cancel()
	content, isError, err := r.st.run(ctx, args)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return nil, fmt.Errorf("tool call failed: timed out after %s", cmp.Or(r.st.timeout, bridge.DefaultToolTimeout))
	case err != nil:
		return nil, fmt.Errorf("tool call failed: %w", err)
	case isError:
		b, _ := json.Marshal(content)
		return content, fmt.Errorf("tool call error: %s", b)
	}
	return content, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// parsed is what Yao hands the model and the Next hook of a result
// (ToolCallResult.ParsedContent): each text part's JSON value (or the text
// when it is not JSON), an image as {type, data, mimeType}, a resource as
// its resource; a single part alone, more as a list.
func (r *toolRun) parsed() any {
	var out []any
	for _, raw := range r.content {
		var part map[string]any
		if json.Unmarshal(raw, &part) != nil {
			continue
		}
		switch part["type"] {
		case "text":
			text, _ := part["text"].(string)
			var v any
			if json.Unmarshal([]byte(text), &v) == nil {
				out = append(out, v)
			} else {
				out = append(out, text)
			}
		case "image":
			out = append(out, map[string]any{"type": "image", "data": part["data"], "mimeType": part["mimeType"]})
		case "resource":
			out = append(out, part["resource"])
		default:
			out = append(out, part)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

// message is the tool message the model gets for the call, as Yao's tool
// loop writes it (buildToolLoopMessages): "Error: ..." for a failure, else
// the parsed result as JSON; capped at bridge.MaxToolResult.
func (r *toolRun) message() chat.Message {
	var content string
	if r.err != nil {
		content = "Error: " + r.err.Error()
	} else if v := r.parsed(); v != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		content = strings.TrimSuffix(b.String(), "\n")
	}
	return chat.Message{Role: chat.RoleTool, Content: capResult(content), ToolCallID: r.call.ID}
}

// text is the result as the client sees it: the text parts, one after
// another, or the error.
func (r *toolRun) text() string {
	if r.err != nil {
		return r.err.Error()
	}
	var parts []string
	for _, raw := range r.content {
		var part struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &part) == nil && part.Type == "text" {
			parts = append(parts, part.Text)
		} else {
			parts = append(parts, string(raw))
		}
	}
	return strings.Join(parts, "\n")
}

// capResult bounds a tool result's text, saying so when it cut it.
func capResult(s string) string {
	if len(s) <= bridge.MaxToolResult {
		return s
	}
	return strings.ToValidUTF8(s[:bridge.MaxToolResult], "") + fmt.Sprintf("\n[agentbox: result truncated from %d to %d bytes]", len(s), bridge.MaxToolResult)
}

// emitToolResult sends a call's result to the client.
func (t *turn) emitToolResult(r *toolRun) {
	text := capResult(r.text())
	props := map[string]any{"tool_call_id": r.call.ID, "name": r.call.Name, "content": text, "is_error": r.err != nil}
	chat.Whole(t.emit, t.nextID("tool"), chat.TypeToolResult, "", props)
}

// record is the call as a turn's tools list it (the Next hook's payload,
// timings).
func (r *toolRun) record() executor.ToolCall {
	tc := executor.ToolCall{ID: r.call.ID, Name: r.call.Name, Input: r.call.Input, Result: r.text(), IsError: r.err != nil,
		Started: r.started, Ended: r.ended}
	if r.st != nil {
		tc.Server, tc.Tool = r.st.server, r.st.tool
	}
	return tc
}
