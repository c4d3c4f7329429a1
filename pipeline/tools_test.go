package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// envMCPServer makes the test binary an MCP server on stdio: the stdio
// server of the tool tests, a real process the pipeline starts.
const envMCPServer = "AGENTBOX_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(envMCPServer) == "1" {
		if err := testMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

// testMCPServer is the stdio server's tools: add, and fail, which answers
// an error result.
func testMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-tools", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers"}, func(_ context.Context, _ *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, any, error) {
		return nil, map[string]float64{"sum": in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such thing"}}}, nil, nil
	})
	return s
}

// webMCP serves a shout tool over streamable HTTP on loopback, refusing
// requests without its token.
func webMCP(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	type shoutArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-case a text"}, func(_ context.Context, _ *mcp.CallToolRequest, in shoutArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer web-secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// toolApp writes a Yao app whose assistants use a process server (the
// app's scripts), a stdio server (this test binary) and an http server,
// loads it, and returns a pipeline over it with the scripted model. files
// add to the app or replace its files; LLM_URL in them is the model's
// address.
func toolApp(t *testing.T, script *scripted.Script, files map[string]string) (*Pipeline, *scripted.Server) {
	t.Helper()
	return toolAppWith(t, script, files, Config{})
}

// toolAppWith is toolApp on a pipeline of cfg (its App set).
func toolAppWith(t *testing.T, script *scripted.Script, files map[string]string, cfg Config) (*Pipeline, *scripted.Server) {
	t.Helper()
	llm := scripted.NewServer(script)
	t.Cleanup(llm.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"connectors/test.conn.yao": `{"type": "openai", "options": {"host": "` + llm.URL + `", "key": "sk-test", "model": "m1", "capabilities": {"tool_calls": true}}}`,
		"mcps/echo.mcp.yao":        `{"transport": "process", "tools": {"ping": "scripts.tools.Ping", "boom": "scripts.tools.Boom"}}`,
		"mcps/mapping/echo/schemes/ping.in.yao": `{"type": "object", "description": "Answer pong",
			"properties": {"count": {"type": "integer", "minimum": 1}}, "required": ["count"]}`,
		"mcps/mapping/echo/schemes/ping.jsonl":  `{"name": "one", "input": {"count": 1}, "output": {"message": "pong"}}` + "\n",
		"mcps/mapping/echo/schemes/boom.in.yao": `{"type": "object", "description": "Explode"}`,
		"mcps/tools.mcp.yao":                    `{"transport": "stdio", "command": "` + exe + `", "env": {"` + envMCPServer + `": "1"}}`,
		"mcps/web.mcp.yao":                      `{"transport": "http", "url": "` + webMCP(t) + `/mcp", "authorization_token": "Bearer web-secret"}`,
		"scripts/tools.ts": `function Ping(args: {count: number}, ctx: any) { return { message: "pong", count: args.count, chat_id: ctx.chat_id } }
function Boom() { throw new Error("boom") }
`,
		"assistants/calc/package.yao": `{"name": "Calc", "connector": "test", "mcp": {"servers": ["echo", "tools", "web"], "options": {"max_turn": 2}}}`,
		"assistants/calc/prompts.yml": "- role: system\n  content: You calculate.\n",
	}
	for k, v := range files {
		base[k] = strings.ReplaceAll(v, "LLM_URL", llm.URL)
	}
	dir := t.TempDir()
	for p, content := range base {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app, err := assistant.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.App = Static{App: app}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, llm
}

// eventLog records a turn's events, safe for the tool goroutines.
type eventLog struct {
	mu     sync.Mutex
	events []chat.Event
}

func (l *eventLog) emit(e chat.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// whole returns the props of the whole messages (start events) of typ.
func (l *eventLog) whole(typ string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, e := range l.events {
		if e.Type == typ && e.Event == chat.Start {
			out = append(out, e.Props)
		}
	}
	return out
}

// body decodes a model request's JSON body.
func body(t *testing.T, r scripted.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// toolMessages are the tool messages of an OpenAI request, by call id.
func toolMessages(t *testing.T, r scripted.Request) map[string]string {
	out := map[string]string{}
	for _, m := range body(t, r)["messages"].([]any) {
		mm := m.(map[string]any)
		if mm["role"] == "tool" {
			out[mm["tool_call_id"].(string)] = mm["content"].(string)
		}
	}
	return out
}

// TestDirectToolLoop: a direct assistant's model is offered the tools of
// its process, stdio and http MCP servers under Yao's names, with Yao's
// examples; the server runs a round's calls, streams each call and result,
// sends the results back as Yao does (after the model's message with its
// calls and its reasoning), and the model's next answer ends the turn,
// every call metered.
func TestDirectToolLoop(t *testing.T) {
	t.Parallel()
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{
		{Thinking: "Three tools answer this.", Text: "Let me check.", ToolCalls: []scripted.ToolCall{
			{ID: "c1", Name: "echo__ping", Input: map[string]any{"count": 2}},
			{ID: "c2", Name: "tools__add", Input: map[string]any{"a": 2, "b": 3}},
			{ID: "c3", Name: "web__shout", Input: map[string]any{"text": "hi"}},
		}},
		{When: &scripted.Match{AfterToolResult: "echo__ping"}, Text: "Pong twice, 5 and HI."},
	}}, nil)
	var log eventLog
	resp, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c1", AssistantID: "calc", Messages: user("go")}, log.emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Let me check."+chat.TextSeparator+"Pong twice, 5 and HI." || resp.FinishReason != chat.FinishStop || len(resp.ToolCalls) != 0 {
		t.Errorf("response: %+v", resp)
	}
	if resp.Usage.ModelCalls != 2 || resp.Usage.InputTokens == 0 {
		t.Errorf("usage: %+v", resp.Usage)
	}
	reqs := llm.TurnRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	first := body(t, reqs[0])
	var names []string
	for _, tool := range first["tools"].([]any) {
		names = append(names, tool.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if want := []string{"echo__boom", "echo__ping", "tools__add", "tools__fail", "web__shout"}; !slices.Equal(names, want) {
		t.Errorf("tools offered: %v, want %v", names, want)
	}
	// The examples are a system message of their own after the prompts.
	msgs := first["messages"].([]any)
	if sys := msgs[0].(map[string]any)["content"].(string); sys != "You calculate." {
		t.Errorf("prompt: %q", sys)
	}
	if sys := msgs[1].(map[string]any)["content"].(string); msgs[1].(map[string]any)["role"] != "system" ||
		!strings.Contains(sys, "## MCP Tool Usage Examples") || !strings.Contains(sys, "### echo__ping\n\n**Description**: Answer pong\n\n**Example 1 - one**:\n- Input: `map[count:1]`\n- Output: `map[message:pong]`") {
		t.Errorf("system prompt: %q", sys)
	}
	// The model's message with the calls goes back with its reasoning, as
	// Yao's tool loop sends it (thinking models refuse a tool loop
	// without it).
	var asked map[string]any
	for _, m := range body(t, reqs[1])["messages"].([]any) {
		if m.(map[string]any)["role"] == "assistant" {
			asked = m.(map[string]any)
		}
	}
	if asked["content"] != "Let me check." || asked["reasoning_content"] != "Three tools answer this." || len(asked["tool_calls"].([]any)) != 3 {
		t.Errorf("the model's message with its calls: %v", asked)
	}
	got := toolMessages(t, reqs[1])
	want := map[string]string{
		"c1": `{"chat_id":"c1","count":2,"message":"pong"}`,
		"c2": `{"sum":5}`,
		"c3": `"HI"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tool messages: %v, want %v", got, want)
	}
	calls := log.whole(chat.TypeToolCall)
	results := log.whole(chat.TypeToolResult)
	if len(calls) != 3 || len(results) != 3 {
		t.Fatalf("events: %d calls, %d results", len(calls), len(results))
	}
	for _, c := range calls {
		if c["client"] != nil {
			t.Errorf("a server tool's call is marked for the client: %v", c)
		}
	}
	byID := map[string]map[string]any{}
	for _, r := range results {
		byID[r["tool_call_id"].(string)] = r
	}
	if byID["c3"]["content"] != "HI" || byID["c3"]["is_error"] != false || byID["c2"]["content"] != `{"sum":5}` {
		t.Errorf("results: %v", results)
	}
}

// TestDirectToolErrors: what fails goes back to the model as Yao words
// it ("Error: ..."): a tool's error result, a process that throws,
// arguments its schema refuses, a tool the model made up; and the loop is
// bounded: past mcp.options.max_turn rounds one call without tools
// answers from the results (Yao's loop_fallback).
func TestDirectToolErrors(t *testing.T) {
	t.Parallel()
	round := scripted.Turn{ToolCalls: []scripted.ToolCall{
		{ID: "e1", Name: "tools__fail"},
		{ID: "e2", Name: "echo__boom"},
		{ID: "e3", Name: "echo__ping", Input: map[string]any{"count": 0}},
		{ID: "e4", Name: "nope__tool"},
	}}
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{round, round, round, {Text: "Nothing worked."}}}, nil)
	var log eventLog
	resp, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c2", AssistantID: "calc", Messages: user("go")}, log.emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Nothing worked." || resp.Usage.ModelCalls != 4 {
		t.Errorf("response: %q, %d model calls", resp.Content, resp.Usage.ModelCalls)
	}
	reqs := llm.TurnRequests()
	got := toolMessages(t, reqs[1])
	for id, want := range map[string]string{
		"e1": `Error: tool call error: [{"type":"text","text":"no such thing"}]`,
		"e2": `Error: tool call error: [{"type":"text","text":"Error executing tool boom: scripts.tools.Boom: boom (at scripts/tools.ts:2:`,
		"e3": `Error: argument validation failed: `,
		"e4": `Error: invalid MCP tool name format: nope__tool`,
	} {
		if !strings.HasPrefix(got[id], want) {
			t.Errorf("%s: %q, want prefix %q", id, got[id], want)
		}
	}
	// max_turn 2: the third round's calls ran, then the fallback answered
	// without tools, from a summary of the results.
	last := body(t, reqs[3])
	if last["tools"] != nil {
		t.Errorf("the fallback call has tools: %v", last["tools"])
	}
	lm := last["messages"].([]any)
	if len(lm) != 2 || !strings.Contains(lm[0].(map[string]any)["content"].(string), "You are the FALLBACK") ||
		!strings.Contains(lm[1].(map[string]any)["content"].(string), "### tools.fail\nError: tool call error") {
		t.Errorf("fallback messages: %v", lm)
	}
	if n := len(log.whole(chat.TypeToolResult)); n != 12 {
		t.Errorf("%d tool results, want 12 (three rounds of four)", n)
	}
}

// TestDirectToolsNextHook: with a Next hook, one round of tools runs and
// the hook gets them in Yao's shape (as Yao does, no loop follows).
func TestDirectToolsNextHook(t *testing.T) {
	t.Parallel()
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "n1", Name: "echo__ping", Input: map[string]any{"count": 1}}}},
	}}, map[string]string{
		"assistants/calc/src/index.ts": `function Next(ctx: any, payload: any) {
  const t = payload.tools[0];
  return { data: { server: t.server, tool: t.tool, id: t.toolcall_id, result: t.result, error: t.error,
    finish: payload.completion.finish_reason, asked: payload.completion.tool_calls[0].function.name } };
}`,
	})
	resp, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c3", AssistantID: "calc", Messages: user("go")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"server": "echo", "tool": "ping", "id": "n1", "result": `{"chat_id":"c3","count":1,"message":"pong"}`, "error": "",
		"finish": "tool_calls", "asked": "echo__ping"}
	if !reflect.DeepEqual(resp.Data, want) || len(llm.TurnRequests()) != 1 {
		t.Errorf("data = %v (model requests %d)", resp.Data, len(llm.TurnRequests()))
	}
}

// TestDirectToolsUnavailable: a server that cannot be reached is left out
// with a notice (Yao skips it); the others' tools are offered; a request
// may not add function tools to an assistant with server tools.
func TestDirectToolsUnavailable(t *testing.T) {
	t.Parallel()
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, map[string]string{
		"mcps/gone.mcp.yao":           `{"transport": "stdio", "command": "/nonexistent/mcp-server"}`,
		"assistants/calc/package.yao": `{"name": "Calc", "connector": "test", "mcp": {"servers": ["gone", {"echo": ["ping"]}]}}`,
	})
	var log eventLog
	if _, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c4", AssistantID: "calc", Messages: user("go")}, log.emit); err != nil {
		t.Fatal(err)
	}
	notices := log.whole(chat.TypeNotice)
	if len(notices) != 1 || notices[0]["code"] != NoticeToolsUnavailable || !strings.Contains(notices[0]["message"].(string), "MCP server gone is not available") {
		t.Errorf("notices: %v", notices)
	}
	tools := body(t, llm.TurnRequests()[0])["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["function"].(map[string]any)["name"] != "echo__ping" {
		t.Errorf("tools: %v", tools)
	}
	_, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c5", AssistantID: "calc", Messages: user("go"),
		Options: chat.ModelOptions{Tools: json.RawMessage(`[{"type":"function","function":{"name":"mine"}}]`)}}, nil)
	if ce := chat.AsError(err); ce.Code != chat.ErrInvalidRequest || !strings.Contains(ce.Message, "runs its own tools") {
		t.Errorf("client tools: %v", err)
	}
}

// TestDirectToolsWithoutToolCalls: a model without tool calls gets no
// tools, as Yao's ToolCallAdapter sends its request; the examples stay.
func TestDirectToolsWithoutToolCalls(t *testing.T) {
	t.Parallel()
	p, llm := toolApp(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, map[string]string{
		"connectors/test.conn.yao": `{"type": "openai", "options": {"host": "LLM_URL", "key": "sk-test", "model": "m1"}}`,
	})
	if _, err := p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "calc", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
	b := body(t, llm.TurnRequests()[0])
	if _, ok := b["tools"]; ok || !strings.Contains(fmt.Sprint(b["messages"]), "## MCP Tool Usage Examples") {
		t.Errorf("request: %v", b)
	}
}
