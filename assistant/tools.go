package assistant

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

var (
	toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,48}$`)
	jsIdent  = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)
)

// rawTool is one entry of package.yao "tools": a host tool the agent may
// call through the bridge.
type rawTool struct {
	Name        string         `json:"name"`
	Function    string         `json:"function"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Timeout     string         `json:"timeout"`
}

// parseTools checks package.yao "tools". A tool runs on the host through
// the request's bridge, which exists only for sandboxed assistants.
func parseTools(d *doc, raw []rawTool, sandboxed bool) []Tool {
	if !sandboxed {
		d.errPath("tools", "tools need a sandbox block: host tools are offered to the coding agent in the sandbox")
		return nil
	}
	out := make([]Tool, 0, len(raw))
	seen := map[string]bool{}
	for i, r := range raw {
		p := fmt.Sprintf("tools[%d]", i)
		switch {
		case r.Name == "":
			d.errPath(p, "%s.name is required", p)
			continue
		case !toolName.MatchString(r.Name):
			d.errPath(p+".name", "tool name %q: use 1-48 letters, digits, '_' or '-' (the agent sees mcp__agentbox__<name>)", r.Name)
			continue
		case seen[r.Name]:
			d.errPath(p+".name", "tool %q is listed twice", r.Name)
			continue
		}
		seen[r.Name] = true
		t := Tool{Name: r.Name, Function: r.Function, Description: r.Description}
		if r.Function != "" && !jsIdent.MatchString(r.Function) {
			d.errPath(p+".function", "function %q is not a JavaScript identifier", r.Function)
		}
		if r.Description == "" {
			d.errPath(p, "%s.description is required: the model decides when to call the tool from it", p)
		}
		schema := r.Parameters
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		if typ, ok := schema["type"]; ok && typ != "object" {
			d.errPath(p+".parameters", "%s.parameters must be a JSON Schema of type \"object\", got type %v", p, typ)
		}
		if _, ok := schema["type"]; !ok {
			schema["type"] = "object"
		}
		b, err := json.Marshal(schema)
		if err != nil {
			d.errPath(p+".parameters", "%s.parameters: %v", p, err)
		}
		t.Parameters = b
		if r.Timeout != "" {
			t.Timeout = parseDurationIn(d, p+".timeout", r.Timeout, 100*time.Millisecond, 10*time.Minute)
		}
		out = append(out, t)
	}
	return out
}
