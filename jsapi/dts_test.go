package jsapi

import (
	"context"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// parseDeclarations reads agentbox.d.ts: members per interface, the
// ErrorCode union, and the declared globals.
func parseDeclarations(t *testing.T) (ifaces map[string][]string, codes, globals []string) {
	t.Helper()
	ifaces = map[string][]string{}
	head := regexp.MustCompile(`^interface (\w+)(?: extends [\w, ]+)? \{$`)
	member := regexp.MustCompile(`^  (?:readonly )?([A-Za-z_$][\w$]*)\??(?:<[^>]*>)?[(:]`)
	var cur string
	for _, line := range strings.Split(Declarations, "\n") {
		switch {
		case head.MatchString(line):
			cur = head.FindStringSubmatch(line)[1]
			ifaces[cur] = []string{}
		case line == "}":
			cur = ""
		case cur != "":
			if m := member.FindStringSubmatch(line); m != nil {
				ifaces[cur] = append(ifaces[cur], m[1])
			}
		}
	}
	union := regexp.MustCompile(`(?s)type ErrorCode =(.*?);`).FindStringSubmatch(Declarations)
	if union == nil {
		t.Fatal("agentbox.d.ts declares no ErrorCode")
	}
	for _, m := range regexp.MustCompile(`"([A-Z_]+)"`).FindAllStringSubmatch(union[1], -1) {
		codes = append(codes, m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^declare var (\w+):`).FindAllStringSubmatch(Declarations, -1) {
		globals = append(globals, m[1])
	}
	return ifaces, codes, globals
}

// TestDeclarationsMatch walks the objects the Go side builds (from inside a
// hook) and checks every member is declared in agentbox.d.ts, and every
// declared member exists.
func TestDeclarationsMatch(t *testing.T) {
	t.Parallel()
	ifaces, codes, globals := parseDeclarations(t)
	sb := newFakeSandbox(t)
	if err := sb.ws.WriteFile(context.Background(), "f.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := load(t, `
const own = (o: any) => Object.keys(o).sort();
export function test(ctx: any, args: any) {
  let execErr: any, chunk: any;
  const ok = ctx.agent.Call("a", [{role: "user", content: "x"}], {onChunk: (e: any) => { if (e.text) chunk = e; return 0; }});
  try { ctx.sandbox.Exec(["false"]) } catch (e) { execErr = e }
  let piece: any;
  const llm = ctx.llm.Stream("c", [{role: "user", content: "x"}], {onChunk: (m: any) => { piece = m; return 0; }});
  return {
    Context: own(ctx),
    Memory: own(ctx.memory),
    MemoryNamespace: own(ctx.memory.user),
    MemoryNamespace_chat: own(ctx.memory.chat),
    MemoryNamespace_team: own(ctx.memory.team),
    MemoryNamespace_context: own(ctx.memory.context),
    Sandbox: own(ctx.sandbox),
    Workspace: own(ctx.workspace),
    WorkspaceEntry: own(ctx.workspace.ReadDir()[0]),
    WorkspaceStat: own(ctx.workspace.Stat("f.txt")),
    Computer: own(ctx.computer),
    ExecResult: [...own(ctx.computer.Exec(["true"])), "truncated"],
    ComputerInfo: own(ctx.computer.Info()),
    ComputerSystem: own(ctx.computer.Info().system),
    AgentAPI: own(ctx.agent),
    LlmAPI: own(ctx.llm),
    MCPAPI: own(ctx.mcp),
    LlmResult: [...own(llm), ...own(ctx.llm.Stream("missing", [{role: "user", content: "x"}]))].filter((k, i, a) => a.indexOf(k) === i),
    LlmResponse: [...own(llm.response), "reasoning_content", "tool_calls"],
    LlmUsage: own(llm.response.usage),
    LlmChunk: own(piece),
    AgentResult: [...own(ok), ...own(ctx.agent.Call("missing", [{role: "user", content: "x"}]))].filter((k, i, a) => a.indexOf(k) === i),
    AgentResponse: own(ok.response),
    AgentCompletion: own(ok.response.completion),
    AgentEvent: [...own(chunk), "props", "agent"],
    FileInfo: own(ctx.sandbox.ListDir()[0]),
    ExecError: own(execErr).filter((k: string) => k !== "message" && k !== "name" && k !== "stack"),
    Log: own(log),
    Console: own(console),
    YaoTime: own(time),
    globals: ["log", "console"].filter(g => g in globalThis),
  };
}
export function Next(ctx: any, payload: any) {
  const call = payload.messages[0].tool_calls[0];
  const c = payload.completion;
  return {data: {NextPayload: own(payload), ToolCall: own(payload.tools[0]), Message: own(payload.messages[0]),
    ToolCallMessage: own(call), ToolCallFunction: own(call.function),
    Completion: own(c).filter((k: string) => !/^\d+$/.test(k) && k !== "length"),
    CompletionToolCall: own(c.tool_calls[0]), CompletionUsage: own(c.usage)}};
}`)
	got, err := h.Call(context.Background(), &Context{Sandbox: sb, Agents: &fakeAgents{}, LLM: fakeLLM}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string][]string{}
	for k, v := range got.(map[string]any) {
		for _, s := range v.([]any) {
			live[k] = append(live[k], s.(string))
		}
	}
	res, err := h.Next(context.Background(), &Context{}, NextPayload{
		Messages: []chatMessage{{Role: "tool", Content: "c", Name: "n", ToolCallID: "t",
			ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Input: chat.RawJSON(`{}`)}}}},
		Tools:      []toolCall{{ID: "1", Name: "Bash"}},
		Completion: Completion{Content: "c", ReasoningContent: "r", ToolCalls: []CompletionToolCall{{ID: "1", Name: "f", Arguments: "{}"}}},
	}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range res.Data.(map[string]any) {
		for _, s := range v.([]any) {
			live[k] = append(live[k], s.(string))
		}
	}
	// Registered by Go: what the ctx API builds at run time, and the lists
	// the Go code checks input against.
	live["ClientMessage"] = slices.Clone(messageFields)
	live["ExecOptions"] = slices.Clone(execOptionKeys)
	live["CreateResult"] = append([]string{"messages", "options", "delegate"}, yaoCreateOnly...)
	for _, n := range chat.OptionNames() {
		if n != "sandbox" {
			live["CreateResult"] = append(live["CreateResult"], n)
		}
	}
	live["MCPServerOption"] = jsonNames(reflect.TypeFor[chat.MCPServerOption]())
	live["CreateOptions"] = jsonNames(reflect.TypeFor[chat.Options]())
	live["SandboxOptions"] = jsonNames(reflect.TypeFor[chat.SandboxOptions]())
	live["SandboxArguments"] = jsonNames(reflect.TypeFor[chat.Arguments]())
	live["NextResult"] = []string{"data", "metadata", "delegate"}
	live["Delegate"] = slices.Clone(agentDelegateKeys)
	live["AgentRequest"] = slices.Clone(agentRequestKeys)
	live["AgentCallOptions"] = slices.Clone(agentOptionKeys)
	live["AgentBatchOptions"] = []string{"onChunk"}
	live["LlmRequest"] = slices.Clone(llmRequestKeys)
	live["MCPRequest"] = slices.Clone(mcpRequestKeys)
	live["MCPToolCall"] = slices.Clone(mcpToolKeys)
	// What the pipeline's MCPServers give (MCP's shapes) and runMCP's results.
	live["MCPTool"] = []string{"name", "description", "inputSchema"}
	live["MCPResult"] = []string{"mcp", "tool", "result", "error"}
	live["LlmBatchOptions"] = []string{"onChunk"}
	live["LlmOptions"] = append(jsonNames(reflect.TypeFor[chat.ModelOptions]()), "onChunk")
	live["AgentboxError"] = []string{"code"}
	live["Task"] = []string{"process", "args", "timeout"}
	live["TaskResult"] = []string{"data", "index", "error"}
	if !reflect.DeepEqual(live["MemoryNamespace_chat"], live["MemoryNamespace"]) || !reflect.DeepEqual(live["MemoryNamespace_context"], live["MemoryNamespace"]) {
		t.Errorf("memory namespaces differ: %v", live)
	}
	delete(live, "MemoryNamespace_chat")
	delete(live, "MemoryNamespace_team")
	delete(live, "MemoryNamespace_context")
	if g := live["globals"]; !equalSets(g, globals) {
		t.Errorf("globals: Go installs %v, agentbox.d.ts declares %v", g, globals)
	}
	delete(live, "globals")

	for name, members := range live {
		declared, ok := ifaces[name]
		if !ok {
			t.Errorf("agentbox.d.ts lacks interface %s (Go has %v)", name, members)
			continue
		}
		if name == "ExecError" {
			declared = append(slices.Clone(declared), "code")
		}
		for _, m := range members {
			if !slices.Contains(declared, m) {
				t.Errorf("%s.%s is registered in Go but not declared in agentbox.d.ts", name, m)
			}
		}
		for _, m := range declared {
			if !slices.Contains(members, m) {
				t.Errorf("%s.%s is declared in agentbox.d.ts but Go does not register it", name, m)
			}
		}
	}
	for name := range ifaces {
		if _, ok := live[name]; !ok {
			t.Errorf("agentbox.d.ts declares %s, which nothing on the Go side checks", name)
		}
	}
	goCodes := slices.Sorted(maps.Keys(jsCodes))
	if !equalSets(goCodes, codes) {
		t.Errorf("ErrorCode: Go throws %v, agentbox.d.ts declares %v", goCodes, codes)
	}
}

// jsonNames lists the JSON names of a struct's fields, those of embedded
// structs included.
func jsonNames(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" && !f.Anonymous {
			out = append(out, name)
		}
	}
	return out
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
