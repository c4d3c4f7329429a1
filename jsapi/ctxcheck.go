package jsapi

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/hint"
)

// yaoCtxOnly are members of Yao's hook ctx that agentbox's lacks: a hook
// that reads one gets undefined.
var yaoCtxOnly = []string{"trace", "search", "Release", "__release"}

// ctxTestFields are the fields a script test's ctx has beyond a hook's
// (TestCtx.Fields as testrun sets them).
var ctxTestFields = []string{"team_id"}

// ctxObjects are the members of ctx that are objects of the hook API,
// with their members, for checking what a hook reads off them.
var ctxObjects = map[string][]string{
	"agent": agentMembers, "llm": llmMembers, "mcp": mcpMembers, "memory": memoryKeys, "sandbox": sandboxMembers,
	"workspace": workspaceMembers, "computer": computerMembers,
}

// objectBuiltins are what every JS object has.
var objectBuiltins = []string{"constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString", "toString", "valueOf"}

// ctxUse matches a read of a member of ctx (and of a member of that) in
// the bundle; an assignment (ctx.x = ...) is the hook's own member.
var ctxUse = regexp.MustCompile(`(?:^|[^\w$.])ctx(?:\?)?\.([A-Za-z_$][\w$]*)(?:(?:\?)?\.([A-Za-z_$][\w$]*))?(\s*=[^=>])?`)

// ctxMemberWarnings finds the members of ctx the bundle reads that the
// hook API does not have (ctx.agnet.Call, ctx.llm.Strem), each at its
// position in the hook source, with the member meant when one is spelt
// nearly the same; and the members of Yao's ctx that agentbox's lacks.
func ctxMemberWarnings(code string) []assistant.Problem {
	if !strings.Contains(code, "ctx") {
		return nil
	}
	sm := inlineSourceMap(code)
	known := slices.Concat(ctxKeys, ctxTestFields, objectBuiltins)
	lines := strings.Split(code, "\n")
	// A member the hook sets (ctx.x = ...) is its own wherever it reads it.
	for _, line := range lines {
		for _, m := range ctxUse.FindAllStringSubmatchIndex(line, -1) {
			if m[6] >= 0 && m[4] < 0 {
				known = append(known, line[m[2]:m[3]])
			}
		}
	}
	var out []assistant.Problem
	for i, line := range lines {
		if strings.HasPrefix(line, "//# sourceMappingURL=") {
			continue
		}
		for _, m := range ctxUse.FindAllStringSubmatchIndex(line, -1) {
			name := line[m[2]:m[3]]
			var msg string
			switch {
			case m[6] >= 0 && m[4] < 0:
				continue // ctx.x = ...: the hook sets its own member
			case slices.Contains(yaoCtxOnly, name):
				msg = fmt.Sprintf("ctx.%s is a member of Yao's hook ctx that agentbox's does not have: it is undefined here", name)
			case !slices.Contains(known, name):
				msg = fmt.Sprintf("ctx.%s is not a member of the hook API: it is undefined", name)
				if best := hint.Closest(name, ctxKeys); best != "" {
					msg += fmt.Sprintf(" (did you mean ctx.%s?)", best)
				}
			case m[4] >= 0 && m[6] < 0 && ctxObjects[name] != nil:
				member := line[m[4]:m[5]]
				members := ctxObjects[name]
				if slices.Contains(members, member) || slices.Contains(objectBuiltins, member) {
					continue
				}
				msg = fmt.Sprintf("ctx.%s.%s is not a member of the hook API: it is undefined", name, member)
				if best := hint.Closest(member, members); best != "" {
					msg += fmt.Sprintf(" (did you mean ctx.%s.%s?)", name, best)
				}
			default:
				continue
			}
			start := m[0]
			if line[start] != 'c' {
				start++
			}
			p := assistant.Problem{File: bundleName, Line: i + 1, Col: start + 1, Severity: assistant.SeverityWarning, Msg: msg}
			if sm != nil {
				if file, _, l, c, ok := sm.Source(i+1, start); ok {
					p.File, p.Line, p.Col = file, l, c+1
				}
			}
			out = append(out, p)
		}
	}
	return out
}
