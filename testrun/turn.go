package testrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// turnRequest is one turn the runner sends through the pipeline.
type turnRequest struct {
	Assistant string
	ChatID    string
	Messages  []chat.Message
	Connector string
	Metadata  map[string]any
}

// turnOutcome is what a turn produced, collected from its events.
type turnOutcome struct {
	Text      string
	Thinking  string
	Data      any
	HasData   bool
	ToolCalls []ToolCall
	Model     string
	Usage     chat.Usage
	Timings   *chat.Timings
	Notices   []string
	Duration  time.Duration
	// Err is the turn's failure ("" when it answered).
	Err string
}

// collector builds a turnOutcome from a turn's events.
type collector struct {
	mu       sync.Mutex
	text     chat.Collector
	thinking chat.Collector
	calls    map[string]*ToolCall // by event id
	byCallID map[string]*ToolCall // by the tool call's own id
	order    []*ToolCall
	out      turnOutcome
	// observe, when set, sees every event (streaming to a watcher).
	observe func(chat.Event)
}

func newCollector() *collector {
	return &collector{thinking: chat.Collector{Type: chat.TypeThinking}, calls: map[string]*ToolCall{}, byCallID: map[string]*ToolCall{}}
}

func (c *collector) emit(e chat.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.observe != nil {
		c.observe(e)
	}
	c.text.Add(e)
	c.thinking.Add(e)
	switch e.Type {
	case chat.TypeToolCall:
		tc := c.calls[e.ID]
		if tc == nil {
			tc = &ToolCall{}
			c.calls[e.ID] = tc
			c.order = append(c.order, tc)
		}
		if n, ok := e.Props["name"].(string); ok && n != "" {
			tc.Name = n
			tc.Server, tc.Tool = splitTool(n)
		}
		if id, ok := e.Props["id"].(string); ok && id != "" {
			tc.ID = id
			c.byCallID[id] = tc
		}
		if in, ok := e.Props["input"]; ok && in != nil {
			tc.Arguments = jsonValue(in)
		}
	case chat.TypeToolResult:
		if e.Event != chat.Start {
			return
		}
		id, _ := e.Props["tool_call_id"].(string)
		tc := c.byCallID[id]
		if tc == nil {
			tc = &ToolCall{ID: id, Tool: "(unknown)"}
			c.byCallID[id] = tc
			c.order = append(c.order, tc)
		}
		content, _ := e.Props["content"].(string)
		if content == "" {
			content = e.Text
		}
		if isErr, _ := e.Props["is_error"].(bool); isErr {
			tc.Error = content
		} else {
			tc.Result = jsonText(content)
		}
	case chat.TypeSession:
		if m, ok := e.Props["model"].(string); ok && m != "" {
			c.out.Model = m
		}
	case chat.TypeNotice:
		if e.Event == chat.Start {
			if code, ok := e.Props["code"].(string); ok {
				c.out.Notices = append(c.out.Notices, code)
			}
		}
	}
	if e.Event == chat.Done && e.Final != nil {
		c.out.Usage = e.Final.Usage
		c.out.Timings = e.Final.Timings
		if e.Final.Data != nil {
			c.out.Data, c.out.HasData = e.Final.Data, true
		}
	}
}

// outcome returns the collected outcome.
func (c *collector) outcome() *turnOutcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.out
	out.Text, out.Thinking = c.text.Text(), c.thinking.Text()
	for _, tc := range c.order {
		out.ToolCalls = append(out.ToolCalls, *tc)
	}
	return &out
}

// splitTool splits an MCP tool name ("mcp__clock__now") into its server and
// tool; other names have no server.
func splitTool(name string) (server, tool string) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if s, t, found := strings.Cut(rest, "__"); found {
			return s, t
		}
	}
	return "", name
}

// jsonValue turns a tool input (raw JSON or a decoded value) into plain
// JSON data.
func jsonValue(v any) any {
	switch x := v.(type) {
	case json.RawMessage:
		var out any
		if json.Unmarshal(x, &out) == nil {
			return out
		}
		return string(x)
	case string:
		return jsonText(x)
	}
	return normalize(v)
}

// jsonText decodes text that is a JSON object or list; other text stays.
func jsonText(s string) any {
	t := strings.TrimSpace(s)
	if t != "" && (t[0] == '{' || t[0] == '[') {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			return v
		}
	}
	return s
}

// runTurn sends one turn through the pipeline and collects its outcome. A
// failed turn is an outcome with Err set; the error is returned too.
func (r *runner) runTurn(ctx context.Context, req turnRequest, observe func(chat.Event)) (*turnOutcome, error) {
	col := newCollector()
	col.observe = observe
	start := time.Now()
	resp, err := r.backend.Chat(ctx, &pipeline.Request{
		UserID:      r.opts.User,
		ChatID:      req.ChatID,
		AssistantID: req.Assistant,
		Messages:    req.Messages,
		Locale:      r.opts.Locale,
		Metadata:    req.Metadata,
		Connector:   req.Connector,
	}, col.emit)
	out := col.outcome()
	out.Duration = time.Since(start)
	if resp != nil {
		if resp.Content != "" {
			out.Text = resp.Content
		}
		if resp.Data != nil {
			out.Data, out.HasData = resp.Data, true
		}
		if out.Usage.InputTokens == 0 && out.Usage.OutputTokens == 0 {
			out.Usage = resp.Usage
		}
	}
	if err != nil {
		out.Err = err.Error()
		return out, err
	}
	return out, nil
}

// output is Yao's output of a turn: what a Next hook returned as data,
// else the answer's text, else the messages of its tool results (or the
// tools it called).
func (o *turnOutcome) output() any {
	if o.HasData && !empty(o.Data) {
		return o.Data
	}
	if strings.TrimSpace(o.Text) != "" {
		return o.Text
	}
	if len(o.ToolCalls) > 0 {
		return toolMessage(o.ToolCalls)
	}
	return nil
}

// combined is what a dynamic case's checkpoints look at: the answer's
// text and the messages of its tool results (Yao's buildCombinedOutput).
func (o *turnOutcome) combined() string {
	parts := []string{}
	if t := strings.TrimSpace(o.Text); t != "" {
		parts = append(parts, o.Text)
	}
	for _, tc := range o.ToolCalls {
		if m, ok := tc.Result.(map[string]any); ok {
			if s, ok := m["message"].(string); ok && s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// toolMessage is the first "message" of the tool results, else a summary
// of the calls ("[setup: success] [now]").
func toolMessage(calls []ToolCall) any {
	for _, tc := range calls {
		if m, ok := tc.Result.(map[string]any); ok {
			if s, ok := m["message"].(string); ok && s != "" {
				return s
			}
		}
	}
	parts := make([]string, 0, len(calls))
	for _, tc := range calls {
		name := tc.Tool
		if m, ok := tc.Result.(map[string]any); ok {
			if a, ok := m["action"].(string); ok {
				parts = append(parts, fmt.Sprintf("[%s: %s]", name, a))
				continue
			}
			if s, ok := m["success"].(bool); ok {
				st := "failed"
				if s {
					st = "success"
				}
				parts = append(parts, fmt.Sprintf("[%s: %s]", name, st))
				continue
			}
		}
		parts = append(parts, "["+name+"]")
	}
	return strings.Join(parts, " ")
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// trace is Yao's trace of a turn.
func (o *turnOutcome) trace() *Trace {
	t := &Trace{ToolCalls: o.ToolCalls}
	if o.Text != "" || o.Model != "" || o.Thinking != "" {
		t.Completion = &CompletionTrace{Model: o.Model, Role: chat.RoleAssistant, Content: o.Text, ReasoningContent: o.Thinking}
	}
	if o.HasData && !empty(o.Data) {
		t.Next = o.Data
	}
	if t.Completion == nil && len(t.ToolCalls) == 0 && t.Next == nil {
		return nil
	}
	return t
}

// turnResult is the outcome as a report's turn.
func (o *turnOutcome) turnResult(n int, input any) *TurnResult {
	tr := &TurnResult{Turn: n, Input: input, Output: o.output(), DurationMs: o.Duration.Milliseconds(),
		Error: o.Err, Model: o.Model, Usage: o.Usage, Timings: o.Timings, Notices: o.Notices}
	tr.Response = &TurnResponse{ToolCalls: o.ToolCalls, Thinking: o.Thinking}
	if o.Text != "" {
		tr.Response.Content = o.Text
	}
	if o.HasData && !empty(o.Data) {
		tr.Response.Next = o.Data
	}
	return tr
}
