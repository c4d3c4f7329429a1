package assistant

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// inspectFiles lays out an app with files and inspects it.
func inspectFiles(t *testing.T, files map[string]string) *Report {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProcessMapping: a process server's tools, resources and prompts
// load from its mapping folder, and what is missing or wrong there is an
// error at the entry that names it, with the file to fix.
func TestProcessMapping(t *testing.T) {
	t.Parallel()
	r := inspectFiles(t, map[string]string{
		"mcps/shop/orders.mcp.yao": `{"transport": "process",
  "tools": {"find": "scripts.orders.Find", "list": "scripts.orders.List", "bad": "scripts.orders.Bad", "odd": "nodots", "arr": "scripts.orders.Arr"},
  "resources": {"detail": "scripts.orders.Detail", "nouri": "scripts.orders.X"},
  "prompts": {"ask": "scripts.orders.Ask", "old": "scripts.orders.Old"}}`,
		"mcps/mapping/shop/orders/schemes/find.in.yao": `// comments are fine
{"type": "object", "description": "Find an order", "properties": {"id": {"type": "string"}}, "x-process-args": [":arguments"]}`,
		"mcps/mapping/shop/orders/schemes/find.out.yao":     `{"type": "object"}`,
		"mcps/mapping/shop/orders/schemes/bad.in.yao":       `{"type": "object", "properties": {"n": {"type": 7}}}`,
		"mcps/mapping/shop/orders/schemes/arr.in.yao":       `{"type": "array"}`,
		"mcps/mapping/shop/orders/resources/detail.res.yao": `{"uri": "orders://{id}", "mimeType": "application/json", "parameters": [{"name": "id", "required": true}], "x-process-args": ["$uri.id"]}`,
		"mcps/mapping/shop/orders/resources/nouri.res.yao":  `{"description": "no uri"}`,
		"mcps/mapping/shop/orders/prompts/ask.pmt.yao":      `{"description": "Ask", "template": "About {{id}}?", "arguments": [{"name": "id", "required": true}]}`,
		"mcps/mapping/shop/orders/prompts/old.pmt.yao":      `{"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}]}`,
	})
	var got []string
	for _, p := range r.Problems {
		got = append(got, p.String())
	}
	// Each problem at the line of its entry in the server's file.
	for _, want := range []struct{ line, msg string }{
		{"2", `tool arr: mcps/mapping/shop/orders/schemes/arr.in.yao: the input schema's type is array: a tool's arguments are an object ("type": "object")`},
		{"2", `tool bad: mcps/mapping/shop/orders/schemes/bad.in.yao is not a JSON Schema`},
		{"2", `tool list: mcps/mapping/shop/orders/schemes/list.in.yao does not exist: a process tool needs its input schema there`},
		{"2", `tool odd: "nodots" is not a process name (group.name.Method, such as scripts.tools.Echo)`},
		{"3", `resource nouri: mcps/mapping/shop/orders/resources/nouri.res.yao: uri is required: the resource is read by its URI`},
		{"4", `warning: prompt old: mcps/mapping/shop/orders/prompts/old.pmt.yao has no template: the prompt is empty (Yao reads only template, not messages)`},
	} {
		prefix := "mcps/shop/orders.mcp.yao:" + want.line + ":"
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, prefix) && strings.Contains(g, want.msg) }) {
			t.Errorf("missing problem %s %q in:\n%s", prefix, want.msg, strings.Join(got, "\n"))
		}
	}
	// The server has errors: it is defined but broken.
	if def, ok := r.App.MCPServers["shop.orders"]; !ok || def != nil {
		t.Errorf("shop.orders = %+v, %v", def, ok)
	}

	// The same mapping without the broken entries loads whole.
	r = inspectFiles(t, map[string]string{
		"mcps/shop/orders.mcp.yao": `{"transport": "process", "tools": {"find": "scripts.orders.Find"},
  "resources": {"detail": "scripts.orders.Detail"}, "prompts": {"ask": "scripts.orders.Ask"}}`,
		"mcps/mapping/shop/orders/schemes/find.in.yao":      `{"type": "object", "description": "Find an order", "x-process-args": [":arguments"]}`,
		"mcps/mapping/shop/orders/schemes/find.out.yao":     `{"type": "object"}`,
		"mcps/mapping/shop/orders/resources/detail.res.yao": `{"uri": "orders://{id}", "parameters": [{"name": "id", "required": true}]}`,
		"mcps/mapping/shop/orders/prompts/ask.pmt.yao":      `{"description": "Ask", "template": "About {{id}}?", "arguments": [{"name": "id", "required": true}]}`,
		"connectors/c/x.conn.yao":                           `{"type": "anthropic", "options": {"model": "m", "key": "k"}}`,
		"assistants/a/package.yao":                          `{"name": "A", "connector": "c.x", "mcp": {"servers": ["shop.orders"], "options": {"max_turn": 2.7, "tool_loop": false, "other": 1}}}`,
	})
	m := r.App.MCPServers["shop.orders"].Process
	find, _ := m.Tool("find")
	if find.Description != "Find an order" || !strings.Contains(string(find.InputSchema), `"x-process-args":[":arguments"]`) || string(find.OutputSchema) != `{"type":"object"}` {
		t.Errorf("find: %+v", find)
	}
	if len(m.Resources) != 1 || m.Resources[0].URI != "orders://{id}" || !m.Resources[0].Parameters[0].Required {
		t.Errorf("resources: %+v", m.Resources)
	}
	if len(m.Prompts) != 1 || m.Prompts[0].Render(map[string]string{"id": "7"}) != "About 7?" {
		t.Errorf("prompts: %+v", m.Prompts)
	}
	a := r.App.Assistants["a"]
	if a == nil || a.ToolLoop.MaxTurns != 2 || !a.ToolLoop.Disabled || len(a.MCP) != 1 {
		t.Fatalf("assistant a: %+v", a)
	}
	var warned bool
	for _, p := range r.Problems {
		warned = warned || strings.Contains(p.Msg, "mcp.options.other is ignored (Yao reads max_turn and tool_loop)")
	}
	if !warned {
		t.Errorf("no warning for mcp.options.other: %v", r.Problems)
	}
}
