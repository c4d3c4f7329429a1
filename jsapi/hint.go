package jsapi

import (
	"fmt"
	"regexp"

	"github.com/agentbox/agentbox/internal/hint"
)

// apiMember is one member of the hook API, with the path a hook reaches it
// by.
type apiMember struct{ name, path string }

// apiMembers are the members of ctx and of the log and console globals,
// for "did you mean" hints on a misspelt one.
var apiMembers = func() []apiMember {
	var out []apiMember
	for _, g := range []struct {
		path  string
		names []string
	}{
		{"ctx.", ctxKeys}, {"ctx.sandbox.", sandboxMembers}, {"ctx.memory.user.", memoryMethods},
		{"ctx.workspace.", workspaceMembers}, {"ctx.computer.", computerMembers}, {"ctx.agent.", agentMembers}, {"ctx.llm.", llmMembers}, {"ctx.mcp.", mcpMembers},
		{"log.", logKeys["log"]}, {"console.", logKeys["console"]},
	} {
		for _, k := range g.names {
			out = append(out, apiMember{k, g.path + k})
		}
	}
	return out
}()

// noMember matches goja's TypeError for a call of a member an object lacks.
var noMember = regexp.MustCompile(`^Object has no member '([^']+)'$`)

// memberHint returns " (did you mean ctx.sandbox.WriteFile?)" for a
// TypeError message that names a member the object lacks, when the hook
// API has one of that name on another object or one spelt nearly the
// same; "" otherwise.
func memberHint(msg string) string {
	m := noMember.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	name := m[1]
	for _, a := range apiMembers {
		if a.name == name {
			return fmt.Sprintf(" (did you mean %s?)", a.path)
		}
	}
	names := make([]string, len(apiMembers))
	for i, a := range apiMembers {
		names[i] = a.name
	}
	best := hint.Closest(name, names)
	if best == "" {
		return ""
	}
	for _, a := range apiMembers {
		if a.name == best {
			return fmt.Sprintf(" (did you mean %s?)", a.path)
		}
	}
	return ""
}
