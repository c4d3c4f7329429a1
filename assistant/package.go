package assistant

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
)

// rawPackage is an assistant's package.yao as written: every field of
// Yao's assistant model (Y agent/assistant/load.go), plus agentbox's hooks
// and tools. Metadata Yao reads leniently is tagged yao:"lenient": a value of
// the wrong type there is dropped with a warning, as Yao drops it.
type rawPackage struct {
	Name                 string                `json:"name"`
	Description          string                `json:"description" yao:"lenient"`
	Connector            string                `json:"connector"`
	ConnectorOptions     *ConnectorChoice      `json:"connector_options"`
	Options              chat.ModelOptions     `json:"options"`
	Overridable          map[string]any        `json:"overridable"`
	Prompts              *inlinePrompts        `json:"prompts"`
	PromptPresets        map[string]rawPrompts `json:"prompt_presets"`
	DisableGlobalPrompts bool                  `json:"disable_global_prompts" yao:"lenient"`
	MCP                  *rawMCP               `json:"mcp"`
	Sandbox              *rawSandbox           `json:"sandbox"`
	Hooks                *rawHooks             `json:"hooks"`
	Tools                []rawTool             `json:"tools"`
	Skills               *rawSkills            `json:"skills"`
	Failures             *rawFailures          `json:"failures"`
	Approval             *approval.Raw         `json:"approval"`
	Source               string                `json:"source" yao:"lenient"`
	Type                 string                `json:"type" yao:"lenient"`
	Avatar               string                `json:"avatar" yao:"lenient"`
	Sort                 looseInt              `json:"sort" yao:"lenient"`
	Tags                 stringList            `json:"tags"`
	Readonly             bool                  `json:"readonly" yao:"lenient"`
	Public               bool                  `json:"public" yao:"lenient"`
	Share                string                `json:"share" yao:"lenient"`
	Mentionable          bool                  `json:"mentionable" yao:"lenient"`
	Automated            bool                  `json:"automated" yao:"lenient"`
	BuiltIn              bool                  `json:"built_in" yao:"lenient"`
	Placeholder          *Placeholder          `json:"placeholder"`
	Modes                stringList            `json:"modes"`
	DefaultMode          string                `json:"default_mode" yao:"lenient"`
	Capabilities         string                `json:"capabilities" yao:"lenient"`
	CreatedAt            timestamp             `json:"created_at"`
	UpdatedAt            timestamp             `json:"updated_at"`
	Uses                 map[string]any        `json:"uses"`
	Search               map[string]any        `json:"search"`
	KB                   idsOrObject           `json:"kb"`
	DB                   idsOrObject           `json:"db"`
	Workflow             idsOrObject           `json:"workflow"`
	Dependencies         map[string]any        `json:"dependencies"`
	// Set by Yao from the folder, so ignored when written.
	Locales     any `json:"locales"`
	AssistantID any `json:"assistant_id"`
	Path        any `json:"path"`
	// Not Yao keys; Yao ignores them.
	Option  any `json:"option"`
	Version any `json:"version"`
}

// yaoOnly are package.yao's Yao-only features: loaded and type-checked,
// not run by agentbox. One warning per assistant names those it uses.
var yaoOnly = []string{"uses", "search", "kb", "db", "workflow", "dependencies", "source"}

func (*rawPackage) fieldHint(name string) string {
	switch name {
	case "mcps", "servers":
		return "MCP servers are defined in mcps/ and listed in mcp.servers"
	case "command", "image", "max_memory", "max_cpu", "timeout", "arguments":
		return "it belongs in the sandbox block"
	case "key", "host", "model", "proxy":
		return "connection settings belong in a connector file under connectors/; name it in \"connector\""
	}
	return ""
}

type rawHooks struct {
	// Timeout bounds each hook call ("5s").
	Timeout string `json:"timeout"`
	// Create and Next are seen in Yao apps; Yao ignores them (hooks come
	// only from src/index.ts), and so does agentbox, with a warning.
	Create any `json:"create"`
	Next   any `json:"next"`
}

// applyPackage checks package.yao's fields and sets what they mean on a.
func (l *loader) applyPackage(d *doc, a *Assistant, raw *rawPackage, app *App, has map[string]bool) {
	// Yao requires a name; agentbox names an assistant by its id when
	// package.yao does not.
	a.Name = cmpOr(raw.Name, a.ID)
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
	l.resolveConnector(d, a, raw, app)
	if raw.ConnectorOptions != nil {
		l.checkConnectorChoice(d, raw.ConnectorOptions, app)
		a.ConnectorOptions = raw.ConnectorOptions
	}
	a.DisableGlobalPrompts = raw.DisableGlobalPrompts
	if raw.Prompts != nil {
		raw.Prompts.check(d, "prompts")
	}
	for k, p := range raw.PromptPresets {
		p.check(d, "prompt_presets."+k)
		if a.PromptPresets == nil {
			a.PromptPresets = map[string][]chat.Message{}
		}
		a.PromptPresets[k] = p.msgs
	}
	a.Meta = Metadata{Type: cmpOr(raw.Type, "assistant"), Avatar: raw.Avatar, Tags: raw.Tags, Sort: int(raw.Sort),
		Readonly: raw.Readonly, Public: raw.Public, Share: raw.Share, Mentionable: raw.Mentionable,
		Automated: raw.Automated, BuiltIn: raw.BuiltIn, Placeholder: raw.Placeholder, Modes: raw.Modes,
		DefaultMode: raw.DefaultMode, Capabilities: raw.Capabilities,
		CreatedAt: string(raw.CreatedAt), UpdatedAt: string(raw.UpdatedAt)}
	if d.has("share") && !oneOf(raw.Share, "private", "team") {
		d.warnPath("share", "share %q is neither private nor team", raw.Share)
	}
	if raw.DefaultMode != "" && len(raw.Modes) > 0 && !slices.Contains([]string(raw.Modes), raw.DefaultMode) {
		d.warnPath("default_mode", "default_mode %q is not one of modes (%s)", raw.DefaultMode, strings.Join(raw.Modes, ", "))
	}
	for _, f := range []string{"locales", "assistant_id", "path"} {
		if d.has(f) {
			d.warnAt(d.keyOffset(f), "%s is ignored: Yao sets it from the folder", f)
		}
	}
	if d.has("option") {
		d.warnAt(d.keyOffset("option"), "option is ignored (by Yao too); did you mean options?")
	}
	if d.has("version") {
		d.warnAt(d.keyOffset("version"), "version is ignored (by Yao too)")
	}
	var used []string
	for _, f := range yaoOnly {
		if d.has(f) {
			used = append(used, f)
		}
	}
	var mcpOpts map[string]any
	if raw.MCP != nil {
		mcpOpts = raw.MCP.Options
	}
	a.ToolLoop = toolLoop(d, mcpOpts)
	if len(used) > 0 {
		if slices.Contains(used, "source") && has["src"] {
			used = slices.DeleteFunc(used, func(s string) bool { return s == "source" })
		}
		if len(used) > 0 {
			d.warnAt(d.keyOffset(used[0]), "Yao-only features, loaded but not run by agentbox: %s", strings.Join(used, ", "))
		}
	}
	if raw.Hooks != nil {
		if raw.Hooks.Timeout != "" {
			a.HookTimeout = parseDurationIn(d, "hooks.timeout", raw.Hooks.Timeout, 100*time.Millisecond, 10*time.Minute)
		}
		for _, f := range []string{"create", "next"} {
			if d.has("hooks." + f) {
				d.warnAt(d.keyOffset("hooks."+f), "hooks.%s is ignored (by Yao too): hooks are the Create and Next functions of src/index.ts", f)
			}
		}
	}
	var sandboxFiles []string
	for _, ext := range configExts {
		if name := "sandbox" + ext; has[name] {
			sandboxFiles = append(sandboxFiles, name)
		}
	}
	if len(sandboxFiles) > 1 {
		l.fileProblem(filepath.Join(a.Dir, sandboxFiles[1]), "both %s: keep one sandbox file", strings.Join(sandboxFiles, " and "))
		return
	}
	sandboxFile := ""
	if len(sandboxFiles) == 1 {
		sandboxFile = sandboxFiles[0]
	}
	l.loadSandbox(d, a, raw.Sandbox, app, sandboxFile)
	if raw.Overridable != nil {
		a.Overridable = parseOverridable(d, raw.Overridable, a.Sandbox != nil)
	} else {
		a.Overridable = DefaultOverridable(a.Sandbox != nil)
	}
	if a.Sandbox != nil {
		// The model proxy holds the CLI to the model and the token limit;
		// the CLI chooses the rest itself.
		var set map[string]any
		if b, err := json.Marshal(raw.Options); err == nil && json.Unmarshal(b, &set) == nil {
			for _, k := range []string{"model", "max_tokens", "max_completion_tokens"} {
				delete(set, k)
			}
		}
		if len(set) > 0 {
			d.warnAt(d.keyOffset("options"), "options %s are not applied to a sandboxed assistant: the coding-agent CLI makes its own model requests, held only to the model and the token limit", strings.Join(slices.Sorted(maps.Keys(set)), ", "))
		}
	}
	if c, ok := app.Connectors[a.Connector]; ok && a.Sandbox == nil {
		// What the model cannot take, Yao's provider leaves out of every
		// request (or changes): so does agentbox, and says so.
		_, adj := connector.YaoOptions(c.Type, c.ModelCapabilities(a.Options.Model), a.Options)
		for _, x := range adj {
			d.warnPath("options."+x.Option, "options.%s (connector %s)", x, c.ID)
		}
	}
	if len(raw.Tools) > 0 {
		a.Tools = parseTools(d, raw.Tools, a.Sandbox != nil)
	}
	if raw.Skills != nil {
		a.SkillAuthoring = parseSkills(d, raw.Skills, a.Sandbox != nil, a.Tools)
	}
	if raw.Failures != nil {
		a.Failures = parseFailures(d, raw.Failures, a.Sandbox != nil)
	}
	if raw.MCP != nil {
		l.checkMCPRefs(d, a, raw.MCP, app)
	}
	a.Approval = app.Config.Approval
	if raw.Approval != nil {
		a.Approval = parseApproval(d, "approval", *raw.Approval)
	}
	checkApproval(d, a)
}

// resolveConnector gives package.yao's connector its meaning: an id, a
// "$ENV.NAME" replaced at load when set, or "use::<role>" and "" resolved
// through agent/agent.yml's roles (Yao agent/llm/resolve.go).
func (l *loader) resolveConnector(d *doc, a *Assistant, raw *rawPackage, app *App) {
	if d.bad["connector"] {
		return
	}
	id := raw.Connector
	a.ConnectorRaw = id
	if name, isEnv := envRef(id); isEnv {
		if msg := checkEnvRef(id); msg != "" {
			d.errPath("connector", "connector: %s", msg)
			return
		}
		v := os.Getenv(name)
		if v == "" {
			a.ConnectorEnv = name
			d.warnPath("connector", "connector: %s is not set; requests fail until it names a connector", name)
			return
		}
		id = v
	}
	if role, isRole := strings.CutPrefix(id, RolePrefix); isRole || id == "" {
		if !isRole {
			role = "default"
		}
		if !slices.Contains(connectorRoles, role) {
			d.errPath("connector", "connector: unknown role %q (known: %s)", role, strings.Join(connectorRoles, ", "))
			return
		}
		resolved, fellBack := app.Agent.resolveRole(role)
		switch {
		case resolved == "" && raw.Connector == "":
			d.errPath("", "connector is required: the id of a connector in %s/ (\"anthropic.sonnet\" for %s/anthropic/sonnet.conn.yao), or agent/agent.yml's system.default", ConnectorsDir, ConnectorsDir)
			return
		case resolved == "" && role == "default":
			d.errPath("connector", "connector %q: agent/agent.yml has no system.default", raw.Connector)
			return
		case resolved == "":
			d.errPath("connector", "connector %q: agent/agent.yml has no system.%s and no system.default", raw.Connector, role)
			return
		case fellBack:
			d.warnPath("connector", "connector %q: agent/agent.yml has no system.%s; Yao falls back to system.default: %s", raw.Connector, role, resolved)
		}
		id = resolved
	}
	a.Connector = id
	l.checkConnector(d, id, app)
}

// checkConnector checks that the assistant's connector is a defined model
// connector.
func (l *loader) checkConnector(d *doc, id string, app *App) {
	if typ, skipped := app.Skipped[id]; skipped {
		d.errPath("connector", "connector %q is a %s connector, not a chat model", id, typ)
		return
	}
	if file, broken := l.brokenConns[id]; broken {
		d.errPath("connector", "connector %q does not load: %s has errors", id, file)
		return
	}
	if !l.connIDs[id] {
		have := l.connectorIDs()
		hint := "there are none"
		if len(have) > 0 {
			hint = "have: " + strings.Join(have, ", ")
			if s := suggest(id, have); strings.HasPrefix(s, " (did you mean") {
				hint = strings.TrimSuffix(strings.TrimPrefix(s, " ("), ")")
			}
		}
		d.errPath("connector", "connector %q is not defined in %s/ (%s)", id, ConnectorsDir, hint)
	}
}

// checkConnectorChoice checks connector_options: listed connectors must be
// model connectors, filters known capabilities.
func (l *loader) checkConnectorChoice(d *doc, c *ConnectorChoice, app *App) {
	// Yao reads connector_options for its UI without checking them, so
	// what cannot be honoured here is a warning.
	for i, id := range c.Connectors {
		p := fmt.Sprintf("connector_options.connectors[%d]", i)
		if _, ok := app.Connectors[id]; !ok && !l.connIDs[id] {
			d.warnPath(p, "%s: connector %q is not defined in %s/; a request cannot choose it%s", p, id, ConnectorsDir, hintAmong(id, l.connectorIDs(), "have"))
		} else if typ, skipped := app.Skipped[id]; skipped {
			d.warnPath(p, "%s: connector %q is a %s connector, not a chat model; a request cannot choose it", p, id, typ)
		}
	}
	for i, f := range c.Filters {
		if !slices.Contains(capabilityFlags, f) {
			p := fmt.Sprintf("connector_options.filters[%d]", i)
			d.warnPath(p, "%s: unknown capability %q: no connector declares it%s", p, f, suggest(f, capabilityFlags))
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// rawPrompts is a list of prompts in package.yao (prompt_presets values).
type rawPrompts struct {
	raw  []rawPrompt
	msgs []chat.Message
}

type rawPrompt struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Name    string `json:"name"`
}

// UnmarshalJSON takes a list of {role, content, name}.
func (p *rawPrompts) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p.raw); err != nil {
		return fmt.Errorf("want a list of {role, content, name}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// check validates the prompts' roles and converts them.
func (p *rawPrompts) check(d *doc, path string) {
	for i, r := range p.raw {
		if !oneOf(r.Role, promptRoles...) {
			d.errPath(fmt.Sprintf("%s[%d]", path, i), "%s[%d].role: unknown role %q (known: %s)", path, i, r.Role, strings.Join(promptRoles, ", "))
			continue
		}
		p.msgs = append(p.msgs, chat.Message{Role: r.Role, Content: r.Content, Name: r.Name})
	}
}

// inlinePrompts is package.yao "prompts": a YAML string or a list.
type inlinePrompts struct{ rawPrompts }

// UnmarshalJSON takes a YAML string of prompts or a list.
func (p *inlinePrompts) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return p.rawPrompts.UnmarshalJSON(b)
	}
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(s), &node); err != nil {
		return fmt.Errorf("the YAML in the string: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(node.Content) == 0 {
		return nil
	}
	msgs, probs := promptsFromNode("", node.Content[0])
	if len(probs) > 0 {
		return fmt.Errorf("the YAML in the string, line %d: %s", probs[0].Line, probs[0].Msg)
	}
	for _, m := range msgs {
		p.raw = append(p.raw, rawPrompt{Role: m.Role, Content: m.Content, Name: m.Name})
	}
	return nil
}

// timestamp is created_at/updated_at: a date string as Yao reads it
// (RFC 3339, "2006-01-02 15:04:05", or Unix nanoseconds as text). A number
// fails Yao's load, and agentbox's.
type timestamp string

// UnmarshalJSON takes such a string.
func (t *timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a date string like \"2025-01-31T12:00:00Z\", got %s (Yao refuses it too)", jsonKind(b))
	}
	if _, err := time.Parse(time.RFC3339, s); err == nil {
		*t = timestamp(s)
		return nil
	}
	if _, err := time.Parse(time.DateTime, s); err == nil {
		*t = timestamp(s)
		return nil
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		*t = timestamp(s)
		return nil
	}
	return fmt.Errorf("%q is not a date Yao reads (RFC 3339, \"2006-01-02 15:04:05\" or Unix nanoseconds)", s)
}

// idsOrObject is kb, db or workflow: a list of ids or an object (Yao
// store/types/convert.go).
type idsOrObject json.RawMessage

// UnmarshalJSON takes a list of strings or an object.
func (v *idsOrObject) UnmarshalJSON(b []byte) error {
	switch jsonKind(b) {
	case "a list", "an object", "null":
		*v = append((*v)[:0], b...)
		return nil
	}
	return fmt.Errorf("want a list of ids or an object, got %s", jsonKind(b))
}
