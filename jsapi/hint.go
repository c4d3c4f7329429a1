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
	for _, k := range ctxKeys {
		out = append(out, apiMember{k, "ctx." + k})
	}
	for _, k := range sandboxMembers {
		out = append(out, apiMember{k, "ctx.sandbox." + k})
	}
	for _, k := range memoryMethods {
		out = append(out, apiMember{k, "ctx.memory.user." + k})
	}
	for _, k := range workspaceMembers {
		out = append(out, apiMember{k, "ctx.workspace." + k})
	}
	for _, k := range computerMembers {
		out = append(out, apiMember{k, "ctx.computer." + k})
	}
	for _, k := range agentMembers {
		out = append(out, apiMember{k, "ctx.agent." + k})
	}
	for _, g := range []string{"log", "console"} {
		for _, k := range logKeys[g] {
			out = append(out, apiMember{k, g + "." + k})
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
