package assistant

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
)

// defaultHookTTL bounds each hook call unless hooks.timeout says otherwise.
const defaultHookTTL = 5 * time.Second

// rawPackage is an assistant's package.yao as written.
type rawPackage struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Connector   string            `json:"connector"`
	Options     chat.ModelOptions `json:"options"`
	Overridable map[string]any    `json:"overridable"`
	Sandbox     *rawSandbox       `json:"sandbox"`
	MCP         *rawMCP           `json:"mcp"`
	Hooks       *rawHooks         `json:"hooks"`
	Tools       []rawTool         `json:"tools"`
}

func (*rawPackage) fieldHint(name string) string {
	switch name {
	case "prompts":
		return "prompts live in prompts.yml next to package.yao"
	case "skills":
		return "skills are found in the skills/ folder next to package.yao"
	case "mcps", "servers":
		return "MCP servers are defined in mcps/ and listed in mcp.servers"
	case "command", "image", "max_memory", "max_cpu", "timeout", "arguments":
		return "it belongs in the sandbox block"
	case "type", "key", "host", "model":
		return "connection settings belong in a connector file under connectors/; name it in \"connector\""
	}
	return ""
}

type rawHooks struct {
	// Timeout bounds each hook call ("5s").
	Timeout string `json:"timeout"`
}

// loadAssistants loads every folder under assistants/, in parallel.
func (l *loader) loadAssistants(cfg *AppConfig, conns map[string]*Connector) map[string]*Assistant {
	dir := filepath.Join(l.root, AssistantsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			l.fileProblem(dir, "missing: an app needs at least one assistant (%s/<id>/%s)", AssistantsDir, PackageFile)
		} else {
			l.fileProblem(dir, "%v", unwrapPath(err))
		}
		return nil
	}
	type job struct{ id, dir string }
	var jobs []job
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		abs := filepath.Join(dir, name)
		if !e.IsDir() {
			if st, err := os.Stat(abs); err != nil || !st.IsDir() {
				continue
			}
		}
		if !idPart.MatchString(name) {
			l.fileProblem(abs, "invalid assistant id %q: use 1-64 letters, digits, '_' or '-', starting with a letter or digit", name)
			continue
		}
		jobs = append(jobs, job{name, abs})
	}
	// Assistants are independent: load them on every CPU, each with its
	// own problem list, merged afterwards (Load sorts problems).
	type result struct {
		a     *Assistant
		probs []Problem
	}
	results := make([]result, len(jobs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		g.Go(func() error {
			sub := &loader{root: l.root, connIDs: l.connIDs}
			a := sub.loadAssistant(j.id, j.dir, cfg, conns)
			results[i] = result{a, sub.probs}
			return nil
		})
	}
	_ = g.Wait() // loading records problems; it returns no error
	out := make(map[string]*Assistant, len(jobs))
	for i, r := range results {
		l.probs = append(l.probs, r.probs...)
		if r.a != nil {
			out[jobs[i].id] = r.a
		}
	}
	return out
}

// loadAssistant loads one assistant folder: package.yao with its sandbox,
// hooks and tools settings, then its MCP servers, prompts, skills and hooks
// entry. It returns nil when the assistant has problems.
func (l *loader) loadAssistant(id, dir string, cfg *AppConfig, conns map[string]*Connector) *Assistant {
	entries, err := os.ReadDir(dir)
	if err != nil {
		l.fileProblem(dir, "%v", unwrapPath(err))
		return nil
	}
	has := make(map[string]bool, len(entries))
	for _, e := range entries {
		has[e.Name()] = true
	}
	if !has[PackageFile] {
		l.fileProblem(dir, "no %s: every assistant folder needs one (name, connector, ...)", PackageFile)
		return nil
	}
	var raw rawPackage
	d := l.decode(filepath.Join(dir, PackageFile), &raw)
	a := &Assistant{ID: id, Dir: dir, HookTimeout: defaultHookTTL}
	if d != nil && !d.broken {
		a.Name = raw.Name
		if a.Name == "" {
			a.Name = id
		}
		a.Description = raw.Description
		a.Options = raw.Options
		if err := raw.Options.Check(); err != nil {
			path := "options"
			var fe *chat.FieldError
			if errors.As(err, &fe) {
				path += "." + fe.Path
			}
			d.errPath(path, "options.%v", err)
		}
		if raw.Overridable != nil {
			a.Overridable = parseOverridable(d, raw.Overridable, raw.Sandbox != nil)
		} else {
			a.Overridable = DefaultOverridable(raw.Sandbox != nil)
		}
		l.checkConnector(d, raw.Connector, conns, raw.Sandbox)
		a.Connector = raw.Connector
		if raw.Sandbox != nil {
			a.Sandbox = parseSandbox(d, raw.Sandbox, cfg)
		}
		if raw.Hooks != nil && raw.Hooks.Timeout != "" {
			a.HookTimeout = parseDurationIn(d, "hooks.timeout", raw.Hooks.Timeout, 100*time.Millisecond, 10*time.Minute)
		}
		if len(raw.Tools) > 0 {
			a.Tools = parseTools(d, raw.Tools, raw.Sandbox != nil)
		}
	}
	// Definitions are loaded even when package.yao is broken, so that
	// every problem of the assistant shows at once.
	if has[MCPsDir] {
		a.MCPServers = l.loadMCPServers(filepath.Join(dir, MCPsDir))
	}
	if d != nil && !d.broken && raw.MCP != nil {
		a.MCP = l.checkMCPRefs(d, raw.MCP, a.MCPServers, filepath.Join(dir, MCPsDir))
	}
	l.done(d)
	switch {
	case has[PromptsFile]:
		a.Prompts = l.loadPrompts(filepath.Join(dir, PromptsFile))
	case has["prompts.yaml"]:
		l.fileProblem(filepath.Join(dir, "prompts.yaml"), "prompts are read from %s: rename this file", PromptsFile)
	}
	if has[SkillsDir] {
		list, probs := skills.Discover(filepath.Join(dir, SkillsDir))
		for _, p := range probs {
			l.probs = append(l.probs, Problem{File: l.rel(filepath.Join(dir, SkillsDir)) + "/" + p.File, Line: p.Line, Col: p.Col, Msg: p.Msg})
		}
		a.Skills = list
	}
	if has["src"] {
		a.Hooks = l.findHooks(dir)
	}
	if len(l.probs) > 0 {
		return nil
	}
	return a
}

// checkConnector checks that package.yao names a defined connector that
// suits the sandbox command.
func (l *loader) checkConnector(d *doc, id string, conns map[string]*Connector, sb *rawSandbox) {
	if d.bad["connector"] {
		return
	}
	if id == "" {
		d.errPath("", "connector is required: the id of a connector in %s/ (\"anthropic.sonnet\" for %s/anthropic/sonnet.conn.yao)", ConnectorsDir, ConnectorsDir)
		return
	}
	if !l.connIDs[id] {
		have := make([]string, 0, len(l.connIDs))
		for k := range l.connIDs {
			have = append(have, k)
		}
		sort.Strings(have)
		hint := "there are none"
		if len(have) > 0 {
			hint = "have: " + strings.Join(have, ", ")
		}
		d.errPath("connector", "connector %q is not defined in %s/ (%s)", id, ConnectorsDir, hint)
		return
	}
	c := conns[id]
	if c == nil || sb == nil {
		return // the connector's own problems are reported at its file
	}
	// Claude Code speaks the Anthropic Messages API only.
	if (sb.Command == "claude" || sb.Command == "") && c.Type == TypeOpenAI {
		d.errPath("connector", "connector %q is an openai connector; sandbox command claude needs an anthropic (or scripted) connector", id)
	}
}

// findHooks returns the absolute hook entry file, "" when there is none.
func (l *loader) findHooks(dir string) string {
	ts, js := filepath.Join(dir, filepath.FromSlash(HooksTS)), filepath.Join(dir, filepath.FromSlash(HooksJS))
	_, tsErr := os.Stat(ts)
	_, jsErr := os.Stat(js)
	switch {
	case tsErr == nil && jsErr == nil:
		l.probs = append(l.probs, Problem{File: l.rel(js), Line: 1, Col: 1,
			Msg: "both src/index.ts and src/index.js exist: keep one hooks entry file"})
		return ""
	case tsErr == nil:
		return ts
	case jsErr == nil:
		return js
	}
	return ""
}
