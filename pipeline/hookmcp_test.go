package pipeline

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/scripted"
)

// TestHookMCP: a Next hook reaches its assistant's MCP servers with
// ctx.mcp, Yao's names and shapes: a process server's tools, resources
// (a URI template and its x-process-args) and prompts, a stdio server
// (this test binary) and an http server, one call at a time, in parallel
// and across servers; a server the assistant does not use, a tool outside
// its list and a tool's error result are errors.
func TestHookMCP(t *testing.T) {
	p, _ := toolApp(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, map[string]string{
		"mcps/echo.mcp.yao": `{"transport": "process", "tools": {"ping": "scripts.tools.Ping", "boom": "scripts.tools.Boom"},
			"resources": {"doc": "scripts.tools.Doc"}, "prompts": {"ask": ""}}`,
		"mcps/mapping/echo/resources/doc.res.yao": `{"uri": "docs://{id}", "mimeType": "text/plain", "x-process-args": ["$uri.id", "$lang"]}`,
		"mcps/mapping/echo/prompts/ask.pmt.yao":   `{"description": "Ask", "template": "About {{topic}}?", "arguments": [{"name": "topic", "required": true}]}`,
		"scripts/tools.ts": `function Ping(args: {count: number}, ctx: any) { return { message: "pong", count: args.count, chat_id: ctx.chat_id } }
function Boom() { throw new Error("boom") }
function Doc(id: string, lang: string) { return "doc " + id + " in " + lang }
`,
		"assistants/calc/package.yao": `{"name": "Calc", "connector": "test", "mcp": {"servers": ["echo", {"server_id": "tools", "tools": ["add"]}, "web"]}}`,
		"assistants/calc/src/index.ts": `
function Next(ctx: any) {
  const out: any = {};
  const err = (f: () => any) => { try { f(); return "no error"; } catch (e: any) { return e.code + ": " + e.message; } };
  out.tools = ctx.mcp.ListTools("echo").tools.map((t: any) => t.name);
  out.stdioTools = ctx.mcp.ListTools("tools").tools.map((t: any) => t.name);
  out.ping = ctx.mcp.CallTool("echo", "ping", {count: 2});
  out.add = ctx.mcp.CallTool("tools", "add", {a: 2, b: 3});
  out.shout = ctx.mcp.CallTool("web", "shout", {text: "hi"});
  out.seq = ctx.mcp.CallTools("echo", [{name: "ping", arguments: {count: 1}}, {name: "ping", arguments: {count: 3}}]).map((r: any) => r.count);
  out.par = ctx.mcp.CallToolsParallel("echo", [{name: "ping", arguments: {count: 4}}, {name: "boom"}]);
  out.all = ctx.mcp.All([{mcp: "tools", tool: "add", arguments: {a: 1, b: 1}}, {mcp: "web", tool: "shout", arguments: {text: "x"}}, {mcp: "nope", tool: "x"}]);
  out.any = ctx.mcp.Any([{mcp: "echo", tool: "boom"}, {mcp: "web", tool: "shout", arguments: {text: "y"}}]);
  out.resources = ctx.mcp.ListResources("echo").resources.map((r: any) => r.uri);
  out.read = ctx.mcp.ReadResource("echo", "docs://42?lang=fr").contents[0].text;
  out.prompts = ctx.mcp.ListPrompts("echo").prompts.map((p: any) => p.name);
  out.prompt = ctx.mcp.GetPrompt("echo", "ask", {topic: "tea"}).messages[0].content.text;
  out.errors = [
    err(() => ctx.mcp.CallTool("nope", "x")),
    err(() => ctx.mcp.CallTool("tools", "fail")),
    err(() => ctx.mcp.CallTool("echo", "ping", {count: 0})),
    err(() => ctx.mcp.CallTool("echo", "boom")),
    err(() => ctx.mcp.GetPrompt("echo", "ask")),
  ];
  return {data: out};
}`,
	})
	resp, err := p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "calc", Messages: user("go")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp.Data)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	want := map[string]any{
		"tools":      []any{"boom", "ping"},
		"stdioTools": []any{"add"},
		"ping":       map[string]any{"message": "pong", "count": 2.0, "chat_id": "c1"},
		"add":        map[string]any{"sum": 5.0},
		"shout":      "HI",
		"seq":        []any{1.0, 3.0},
		"resources":  []any{"docs://{id}"},
		"read":       "doc 42 in fr",
		"prompts":    []any{"ask"},
		"prompt":     "About tea?",
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	par := got["par"].([]any)
	if par[0].(map[string]any)["count"] != 4.0 || !strings.Contains(par[1].(map[string]any)["error"].(string), "boom") {
		t.Errorf("par = %v", par)
	}
	all := got["all"].([]any)
	if all[0].(map[string]any)["result"].(map[string]any)["sum"] != 2.0 || all[1].(map[string]any)["result"] != "X" ||
		!strings.Contains(all[2].(map[string]any)["error"].(string), `MCP server "nope" is not one of assistant calc's (echo, tools, web)`) {
		t.Errorf("all = %v", all)
	}
	if a := got["any"].([]any); len(a) != 1 || a[0].(map[string]any)["result"] != "Y" {
		t.Errorf("any = %v", a)
	}
	errs := got["errors"].([]any)
	for i, w := range []string{
		`MCP_ERROR: mcp.CallTool: MCP server "nope" is not one of assistant calc's`,
		"MCP_ERROR: mcp.CallTool: tool fail of MCP server \"tools\" is not in the assistant's tools list for it (add)",
		"MCP_ERROR: mcp.CallTool: tool ping: argument validation failed",
		"MCP_ERROR: mcp.CallTool: tool boom of echo failed: Error executing tool boom",
		"MCP_ERROR: mcp.GetPrompt: prompt ask: argument topic is required",
	} {
		if !strings.Contains(errs[i].(string), w) {
			t.Errorf("errors[%d] = %q, want %q", i, errs[i], w)
		}
	}
}
