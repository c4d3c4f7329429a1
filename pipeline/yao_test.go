package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// writeHooks gives assistant a an index.js.
func writeHooks(t *testing.T, a *assistant.Assistant, src string) {
	t.Helper()
	p := filepath.Join(a.Dir, "src", "index.js")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Hooks = p
}

// modelRequest is the n-th request the scripted model got, decoded.
func modelRequest(t *testing.T, e *env, n int) (system string, msgs []map[string]any, body map[string]any) {
	t.Helper()
	if err := json.Unmarshal(e.llm.TurnRequests()[n].Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, m := range body["messages"].([]any) {
		mm := m.(map[string]any)
		if mm["role"] == "system" {
			system += mm["content"].(string) + "|"
			continue
		}
		msgs = append(msgs, mm)
	}
	return system, msgs, body
}

// TestYaoPrompts: Create sees the conversation without the prompts (as in
// Yao); the prompts come after it: global prompts unless disabled, the
// assistant's or a preset (from Create or __prompt_preset), with $SYS,
// $ENV and $CTX expanded per request.
func TestYaoPrompts(t *testing.T) {
	t.Setenv("AGENTBOX_PROMPT_TEST", "from-env")
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}}, "")
	e.app.Agent = &assistant.AgentSettings{GlobalPrompts: []chat.Message{{Role: chat.RoleSystem, Content: "Global on $SYS.YEAR."}}}
	qa := e.app.Assistants["qa"]
	qa.Dir = t.TempDir()
	qa.Meta.Type = "assistant"
	qa.Prompts = []chat.Message{{Role: chat.RoleSystem, Name: "guide", Content: "I am $CTX.ASSISTANT_NAME for $CTX.USER_ID ($CTX.LOCALE, $CTX.plan, $CTX.none) $ENV.AGENTBOX_PROMPT_TEST $SYS.NOPE"}}
	qa.PromptPresets = map[string][]chat.Message{"short": {{Role: chat.RoleSystem, Content: "Short."}}, "empty": nil}
	writeHooks(t, qa, `function Create(ctx, messages) {
  if (messages.some(m => m.role === "system")) { throw new Error("saw a prompt: " + JSON.stringify(messages)); }
  const last = messages[messages.length - 1].content;
  if (last === "short") { return { prompt_preset: "short", disable_global_prompts: true, temperature: 0.1 }; }
  return null;
}`)
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c1", AssistantID: "qa", Locale: "en", Messages: user("hi"), Metadata: map[string]any{"plan": "pro"}}, nil); err != nil {
		t.Fatal(err)
	}
	system, msgs, body := modelRequest(t, e, 0)
	year := time.Now().Format("2006")
	// Each prompt is a message of its own, its name kept, as Yao sends it.
	if want := "Global on " + year + ".|I am QA for alice (en, pro, ) from-env $SYS.NOPE|"; system != want {
		t.Errorf("system = %q, want %q", system, want)
	}
	if named := body["messages"].([]any)[1].(map[string]any); named["name"] != "guide" {
		t.Errorf("the named prompt went as %v", named)
	}
	if len(msgs) != 1 {
		t.Errorf("messages = %v", msgs)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c2", AssistantID: "qa", Messages: user("short")}, nil); err != nil {
		t.Fatal(err)
	}
	system, _, body = modelRequest(t, e, 1)
	if system != "Short.|" || body["temperature"] != 0.1 {
		t.Errorf("preset from Create: system %q, temperature %v", system, body["temperature"])
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: "c3", AssistantID: "qa", Messages: user("hi"),
		Metadata: map[string]any{"__prompt_preset": "short", "__disable_global_prompts": true}}, nil); err != nil {
		t.Fatal(err)
	}
	if system, _, _ := modelRequest(t, e, 2); system != "Short.|" {
		t.Errorf("preset from metadata: system %q", system)
	}
}

// TestYaoConnectorChoice: a request may choose a connector only as the
// assistant's connector_options allow; a $ENV connector resolves per
// request and names the variable when it is unset.
func TestYaoConnectorChoice(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "ok"}, {Text: "ok"}}}, "")
	e.app.Connectors["other.llm"] = &assistant.Connector{ID: "other.llm", Type: "openai",
		Options: assistant.ConnectorOptions{Host: e.llm.URL, Key: "k2", Model: "m2", Capabilities: map[string]any{"tool_calls": true}}}
	qa := e.app.Assistants["qa"]
	ctx := context.Background()
	chatWith := func(conn string) error {
		_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("hi"), Connector: conn}, nil)
		return err
	}
	if err := chatWith("other.llm"); err == nil || !strings.Contains(err.Error(), "does not let a request choose") {
		t.Fatalf("no connector_options: %v", err)
	}
	yes, no := true, false
	qa.ConnectorOptions = &assistant.ConnectorChoice{Optional: &no}
	if err := chatWith("other.llm"); err == nil {
		t.Fatal("optional false: a choice was allowed")
	}
	qa.ConnectorOptions = &assistant.ConnectorChoice{Optional: &yes, Filters: []string{"vision"}}
	if err := chatWith("other.llm"); err == nil || !strings.Contains(err.Error(), "capability vision") {
		t.Fatalf("filters: %v", err)
	}
	qa.ConnectorOptions = &assistant.ConnectorChoice{Filters: []string{"tool_calls"}}
	if err := chatWith("other.llm"); err != nil {
		t.Fatal(err)
	}
	if _, _, body := modelRequest(t, e, 0); body["model"] != "m2" {
		t.Errorf("model = %v, want the chosen connector's", body["model"])
	}

	qa.ConnectorOptions, qa.Connector, qa.ConnectorEnv = nil, "", "AGENTBOX_TEST_CONNECTOR"
	var ce *chat.Error
	if err := chatWith(""); !errors.As(err, &ce) || !strings.Contains(ce.Message, "$ENV.AGENTBOX_TEST_CONNECTOR, which is not set") {
		t.Fatalf("unset $ENV connector: %v", err)
	}
	t.Setenv("AGENTBOX_TEST_CONNECTOR", "other.llm")
	if err := chatWith(""); err != nil {
		t.Fatal(err)
	}
}

// TestYaoNextCompletion: Next gets Yao's completion object, which is also
// the answer's text.
func TestYaoNextCompletion(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "the answer"}}}, "")
	qa := e.app.Assistants["qa"]
	qa.Dir = t.TempDir()
	writeHooks(t, qa, `function Next(ctx, { completion }) {
  return { data: { text: completion + "", upper: completion.toUpperCase(), content: completion.content, role: completion.role,
    finish: completion.finish_reason, model: completion.model, total: completion.usage.total_tokens > 0 } };
}`)
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "qa", Messages: user("hi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp.Data)
	if want := `{"content":"the answer","finish":"stop","model":"m1","role":"assistant","text":"the answer","total":true,"upper":"THE ANSWER"}`; string(b) != want {
		t.Errorf("data = %s\nwant %s", b, want)
	}
}

// TestYaoSandboxEnvAndPrepare: a v2 sandbox's environment reaches the
// sandbox (an unset variable fails the turn naming it), and its prepare
// steps run before Create, once-steps only once per workspace.
func TestYaoSandboxEnvAndPrepare(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_MODE", "e2e")
	e := newEnv(t, &scripted.Script{}, "")
	coder := e.app.Assistants["coder"]
	if err := os.MkdirAll(filepath.Join(coder.Dir, "templates", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(coder.Dir, "templates", "sub", "a.txt"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	coder.Sandbox.File = "assistants/coder/sandbox.yao"
	coder.Sandbox.Environment = map[string]string{"NODE_ENV": "test", "MODE": "$ENV.AGENTBOX_TEST_MODE"}
	coder.Sandbox.Prepare = []assistant.PrepareStep{
		{Action: "copy", Src: "templates", Dst: "~/tpl"},
		{Action: "exec", Cmd: "echo once", Once: true},
		{Action: "exec", Cmd: "echo always"},
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	spec := e.rt.Specs()[0]
	if spec.Env["NODE_ENV"] != "test" || spec.Env["MODE"] != "e2e" {
		t.Errorf("env = %v", spec.Env)
	}
	var scripts []string
	for _, sb := range e.rt.Sandboxes() {
		for _, c := range sb.Calls() {
			scripts = append(scripts, strings.Join(c.Req.Argv, " "))
		}
	}
	if got := strings.Join(scripts, ";"); got != "echo once;echo always;echo always" {
		t.Errorf("prepare ran %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Workspace.Dir(), "tpl", "sub", "a.txt")); err != nil || string(b) != "A" {
		t.Errorf("copy: %q %v", b, err)
	}

	coder.Sandbox.Environment["NEEDED"] = "$ENV.AGENTBOX_TEST_UNSET"
	_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrSandbox || !strings.Contains(ce.Message, "NEEDED") || !strings.Contains(ce.Message, "AGENTBOX_TEST_UNSET") {
		t.Fatalf("unset environment variable: %v", err)
	}
}

// TestYaoCreateMCPServers: Create's mcp_servers replace the assistant's
// servers for the turn.
func TestYaoCreateMCPServers(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, `function Create() { return { mcp_servers: [{ server_id: "web", tools: ["search"] }] }; }`)
	e.app.MCPServers = map[string]*assistant.MCPServer{
		"web":  {ID: "web", Transport: "http", URL: "https://mcp.example/mcp"},
		"proc": {ID: "proc", Transport: "process"},
	}
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, nil); err != nil {
		t.Fatal(err)
	}
	a := e.ex.reqs[0].Assistant
	if len(a.MCP) != 1 || a.MCP[0].ServerID != "web" || a.MCP[0].Tools[0] != "search" || a.MCPServers["web"].URL != "https://mcp.example/mcp" {
		t.Errorf("executor's assistant MCP = %+v %+v", a.MCP, a.MCPServers)
	}
	if len(e.app.Assistants["coder"].MCP) != 0 {
		t.Error("the hook changed the loaded assistant")
	}
	e2 := newEnv(t, &scripted.Script{}, `function Create() { return { mcp_servers: [{ server_id: "proc" }] }; }`)
	e2.app.MCPServers = e.app.MCPServers
	// A process server's tools reach a sandboxed agent through the bridge
	// (this pipeline has none): no CLI is given the server, a notice says
	// its tools are not there.
	var notices []string
	_, err := e2.p.Chat(context.Background(), &Request{UserID: "u", ChatID: "c", AssistantID: "coder", Messages: user("go")}, func(ev chat.Event) {
		if ev.Type == chat.TypeNotice && ev.Event == chat.Start {
			notices = append(notices, ev.Props["code"].(string))
		}
	})
	if err != nil {
		t.Fatalf("process server: %v", err)
	}
	if a := e2.ex.reqs[0].Assistant; len(a.MCP) != 0 || len(a.MCPServers) != 0 || !slices.Contains(notices, NoticeToolsUnavailable) {
		t.Errorf("executor's assistant MCP = %+v %+v, notices %v", a.MCP, a.MCPServers, notices)
	}
}
