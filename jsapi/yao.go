package jsapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/assistant"
)

// CodeYaoOnly is the code of the error a Yao-only global throws when a hook
// uses it.
const CodeYaoOnly = "YAO_ONLY"

// yaoImport is Yao's import pattern (gou runtime/v8/script.go): the imports
// Yao comments out when they name its runtime.
var yaoImport = regexp.MustCompile(`import\s+\t*\n*(\*\s+as\s+\w+|\{[^}]+\}|\w+)\s+from\s+["']([^"']+)["'];?`)

// stripped reports an import path Yao comments out: its runtime's modules
// (@yao/runtime, @yao/neo, @yaoapps/client, ...), whose names are globals
// in Yao.
func stripped(path string) bool {
	for _, p := range []string{"@yao", "@yaoapps", "@yaoapp", "@gou"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	for _, s := range []string{"/yao.ts", "/yao", "/gou", "/gou.ts"} {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

// stripYaoImports comments out the imports Yao strips, line by line, so
// every other position in the file stays where it was.
func stripYaoImports(src string) string {
	if !strings.Contains(src, "import") {
		return src
	}
	return yaoImport.ReplaceAllStringFunc(src, func(m string) string {
		if !stripped(yaoImport.FindStringSubmatch(m)[2]) {
			return m
		}
		lines := strings.Split(m, "\n")
		for i, l := range lines {
			lines[i] = "// " + l
		}
		return strings.Join(lines, "\n")
	})
}

// yaoGlobal is where the bundle's references to Yao's globals point: the
// bundler replaces each free (unbound) use of such a global with a member
// of this object, so uses can be found in the bundle and each runtime
// installs only the members its code uses.
const yaoGlobal = "__agentbox_yao__"

// yaoGlobals are the globals of Yao's script runtime (gou
// runtime/v8/isolate.go, Yao's jsapi) that agentbox does not have by the
// same name. Those in yaoProvided are implemented; the others throw a
// YAO_ONLY error when used.
var yaoGlobals = []string{"$L", "All", "Any", "Authorized", "Eval", "Exception", "FS", "Job", "MCP", "Plan",
	"Process", "Query", "Race", "Store", "Trace", "Use", "WebSocket", "YaoJob", "agent", "atob", "btoa",
	"http", "sandbox", "time", "workspace"}

// yaoProvided are the Yao globals agentbox implements, with the members
// of an object it implements (nil: the whole global). A member not listed
// throws YAO_ONLY (time.After runs a process later, outside any request).
var yaoProvided = map[string][]string{
	"$L": nil, "All": nil, "Any": nil, "Authorized": nil, "Eval": nil, "Exception": nil, "Process": nil,
	"Race": nil, "Use": nil, "atob": nil, "btoa": nil,
	"time": {"Sleep"},
}

// yaoMembers are the members of the Yao objects agentbox implements in
// part.
var yaoMembers = map[string][]string{"time": {"After", "Sleep"}}

// provided reports whether agentbox implements global name (member "" for
// the global as a whole).
func provided(name, member string) bool {
	members, ok := yaoProvided[name]
	if !ok {
		return false
	}
	return members == nil || member == "" || slices.Contains(members, member)
}

// yaoDefines maps each Yao global to its member of yaoGlobal, for the
// bundler.
func yaoDefines() map[string]string {
	m := make(map[string]string, len(yaoGlobals))
	for _, g := range yaoGlobals {
		m[g] = yaoGlobal + "." + g
	}
	return m
}

// yaoUse matches a use of a Yao global in the bundle, with the member read
// from it and, for a call, a string literal first argument.
// (esbuild writes a call of a defined global as "(0, G.Process)(...)").
var yaoUse = regexp.MustCompile(regexp.QuoteMeta(yaoGlobal) + `\.([A-Za-z_$][\w$]*)(?:\.([A-Za-z_$][\w$]*))?(?:\)?\(\s*"((?:[^"\\\n]|\\.)*)")?`)

// processCall is a Process call with a literal name, found in the source.
type processCall struct {
	name string
	at   assistant.Problem // its position
}

// yaoUses finds the Yao globals the bundle uses, with the position of each
// use in the hook source, as warnings (files relative to the assistant
// folder), and the Process calls that name their process literally.
func yaoUses(code string) (names []string, warnings []assistant.Problem, calls []processCall) {
	sm := inlineSourceMap(code)
	lines := strings.Split(code, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "//# sourceMappingURL=") {
			continue
		}
		for _, m := range yaoUse.FindAllStringSubmatchIndex(line, -1) {
			name := line[m[2]:m[3]]
			member := ""
			if m[4] >= 0 {
				member = line[m[4]:m[5]]
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			p := assistant.Problem{File: bundleName, Line: i + 1, Col: m[0] + 1, Severity: assistant.SeverityWarning}
			if sm != nil {
				if file, _, l, c, ok := sm.Source(i+1, m[0]); ok {
					p.File, p.Line, p.Col = file, l, c+1
				}
			}
			if name == "Process" && m[6] >= 0 {
				if lit, err := strconv.Unquote(`"` + line[m[6]:m[7]] + `"`); err == nil {
					calls = append(calls, processCall{name: lit, at: p})
				}
			}
			if provided(name, member) {
				continue
			}
			what := name
			if member != "" && yaoMembers[name] != nil {
				what = name + "." + member
			}
			p.Msg = yaoOnlyMessage(what)
			warnings = append(warnings, p)
		}
	}
	slices.Sort(names)
	return names, assistant.SortProblems(warnings), calls
}

// Processes lists the processes the source calls by a literal name, in
// order.
func (h *Hooks) Processes() []string {
	if h == nil {
		return nil
	}
	out := make([]string, 0, len(h.calls))
	for _, pc := range h.calls {
		if !slices.Contains(out, pc.name) {
			out = append(out, pc.name)
		}
	}
	return out
}

// processWarnings are the warnings about the source's literal Process
// calls: a Yao process family, a script the app does not have, or a
// function its script does not define (the script is compiled to know).
func (h *Hooks) processWarnings() []assistant.Problem {
	var out []assistant.Problem
	for _, pc := range h.calls {
		var err error
		if h.scripts == nil {
			// Without the app, only Yao's own families are known.
			if _, perr := noScripts.resolve(pc.name); perr != nil && perr.Code != CodeNotFound {
				err = perr
			}
		} else {
			err = h.scripts.Check(pc.name)
		}
		var perr *ProcessError
		if err == nil || !errors.As(err, &perr) {
			continue // a script that does not compile is reported at its file
		}
		p := pc.at
		p.Msg = fmt.Sprintf("Process(%q): %s; the call throws %s", pc.name, perr.Message, perr.Code)
		out = append(out, p)
	}
	return out
}

// yaoOnlyMessage says what a Yao-only global is and what to do instead.
func yaoOnlyMessage(name string) string {
	alt := ""
	switch name {
	case "Query", "Store", "FS", "Job", "YaoJob", "Plan", "MCP", "agent":
		alt = "; agentbox runs no Yao models, stores or jobs: use ctx.memory, ctx.sandbox, the app's scripts (Process) or host tools"
	case "sandbox", "workspace":
		alt = "; use ctx.sandbox"
	case "time.After":
		alt = "; it runs a process later, outside the request: call Process now instead"
	case "http":
		alt = "; call remote services from a host tool or the sandbox"
	}
	return fmt.Sprintf("%s is Yao-only: a global of Yao's script runtime that agentbox's hooks do not have; using it throws %s%s", name, CodeYaoOnly, alt)
}

// installYao defines the yaoGlobal object with the members the hooks use:
// the provided globals, and for each Yao-only one a stub that throws a
// YAO_ONLY error when called, constructed or read from.
func (c *call) installYao() {
	if len(c.h.yao) == 0 {
		return
	}
	o := c.newLazy(c.h.yao, func(name string) goja.Value {
		switch name {
		case "atob":
			return c.vm.ToValue(func(s string) string {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					c.throw(argErr("atob: the string is not valid base64"), CodeInvalidArgument)
				}
				return string(b)
			})
		case "btoa":
			return c.vm.ToValue(func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) })
		case "Exception":
			return c.exceptionClass()
		case "Process":
			return c.vm.ToValue(nativeFn(c.process))
		case "time":
			return c.timeObject()
		case "$L":
			return c.vm.ToValue(nativeFn(c.lang))
		case "Authorized":
			return c.vm.ToValue(nativeFn(c.authorized))
		case "Eval":
			return c.vm.ToValue(nativeFn(c.eval))
		case "Use":
			return c.vm.ToValue(nativeFn(c.use))
		case "All", "Any", "Race":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.concurrent(name, fc) }))
		}
		return c.yaoOnlyStub(name)
	})
	_ = c.vm.Set(yaoGlobal, o)
}

// exceptionClass is Yao's Exception(message, code): an Error whose code is
// the given code (a number in Yao: an HTTP-like status), thrown by hooks.
func (c *call) exceptionClass() goja.Value {
	return c.vm.ToValue(func(cc goja.ConstructorCall) *goja.Object {
		msg := ""
		if v := cc.Argument(0); !goja.IsUndefined(v) {
			msg = v.String()
		}
		obj := c.vm.NewGoError(fmt.Errorf("%s", msg))
		_ = obj.Delete("value")
		_ = obj.Set("name", "Exception")
		if v := cc.Argument(1); !goja.IsUndefined(v) {
			_ = obj.Set("code", v.String())
		}
		return obj
	})
}

// yaoOnlyStub is a proxy whose every use throws a YAO_ONLY error naming
// the global.
func (c *call) yaoOnlyStub(name string) goja.Value {
	fail := func(member string) {
		what := name
		if member != "" {
			what += "." + member
		}
		// Recorded even when the script catches the error: a test that
		// fails after one is reported as Yao-only, not as failed.
		c.yaoOnly = append(c.yaoOnly, what)
		c.throw(&hostError{code: CodeYaoOnly, msg: what + " is Yao-only: agentbox's hooks do not have Yao's " + name + " global"}, CodeYaoOnly)
	}
	target := c.vm.ToValue(func(goja.FunctionCall) goja.Value { return goja.Undefined() }).(*goja.Object)
	p := c.vm.NewProxy(target, &goja.ProxyTrapConfig{
		Get: func(_ *goja.Object, prop string, _ goja.Value) goja.Value {
			if prop == "toString" || prop == "valueOf" || prop == "constructor" {
				return target.Get(prop)
			}
			fail(prop)
			return nil
		},
		Apply: func(*goja.Object, goja.Value, []goja.Value) goja.Value {
			fail("")
			return nil
		},
		Construct: func(*goja.Object, []goja.Value, *goja.Object) *goja.Object {
			fail("")
			return nil
		},
	})
	return c.vm.ToValue(p)
}
