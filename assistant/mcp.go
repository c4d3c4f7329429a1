package assistant

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// rawMCP is package.yao's "mcp" block: the servers the assistant uses.
type rawMCP struct {
	Servers []mcpRefForm   `json:"servers"`
	Options map[string]any `json:"options"`
}

// mcpRefForm is one entry of mcp.servers in any of Yao's forms
// (agent/store/types MCPServerConfig): "id"; {"server_id": "id", "tools":
// [...], "resources": [...]}; {"id": [tools]}; {"id": {"tools": [...],
// "resources": [...]}}.
type mcpRefForm struct{ MCPRef }

// UnmarshalJSON takes each of Yao's forms.
func (r *mcpRefForm) UnmarshalJSON(b []byte) error {
	var id string
	if err := json.Unmarshal(b, &id); err == nil {
		r.ServerID = id
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("want a server id or an object, got %s", jsonKind(b))
	}
	if _, std := obj["server_id"]; std {
		var v struct {
			ServerID  string   `json:"server_id"`
			Tools     []string `json:"tools"`
			Resources []string `json:"resources"`
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("want {server_id, tools, resources}: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		r.MCPRef = MCPRef{ServerID: v.ServerID, Tools: v.Tools, Resources: v.Resources}
		return nil
	}
	if len(obj) != 1 {
		return fmt.Errorf("want {\"server_id\": ...} or an object with exactly one key, the server id; got %d keys", len(obj))
	}
	for id, val := range obj {
		r.ServerID = id
		var tools []string
		if err := json.Unmarshal(val, &tools); err == nil {
			r.Tools = tools
			return nil
		}
		var v struct {
			Tools     []string `json:"tools"`
			Resources []string `json:"resources"`
		}
		dec := json.NewDecoder(strings.NewReader(string(val)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("server %q: want a list of tools or {tools, resources}", id)
		}
		r.Tools, r.Resources = v.Tools, v.Resources
	}
	return nil
}

// rawMCPServer is an MCP file as written: Yao's MCP client DSL (gou
// mcp/types), plus agentbox's args and headers.
type rawMCPServer struct {
	ID                 string            `json:"id" yao:"lenient"`
	Name               string            `json:"name" yao:"lenient"`
	Version            string            `json:"version" yao:"lenient"`
	Type               string            `json:"type" yao:"lenient"`
	Label              string            `json:"label" yao:"lenient"`
	Description        string            `json:"description" yao:"lenient"`
	Tags               stringList        `json:"tags" yao:"lenient"`
	Readonly           bool              `json:"readonly" yao:"lenient"`
	Builtin            bool              `json:"builtin" yao:"lenient"`
	Sort               looseInt          `json:"sort" yao:"lenient"`
	Mtime              any               `json:"mtime"`
	Ctime              any               `json:"ctime"`
	Dependencies       map[string]any    `json:"dependencies"`
	EnableSampling     bool              `json:"enable_sampling" yao:"lenient"`
	EnableRoots        bool              `json:"enable_roots" yao:"lenient"`
	EnableElicitation  bool              `json:"enable_elicitation" yao:"lenient"`
	RootsListChanged   bool              `json:"roots_list_changed" yao:"lenient"`
	Transport          string            `json:"transport"`
	Command            string            `json:"command"`
	Arguments          []string          `json:"arguments"`
	Args               []string          `json:"args"`
	Env                map[string]string `json:"env"`
	URL                string            `json:"url"`
	Endpoint           string            `json:"endpoint"`
	AuthorizationToken string            `json:"authorization_token"`
	Timeout            string            `json:"timeout"`
	Headers            map[string]string `json:"headers"`
	Tools              map[string]string `json:"tools"`
	Resources          map[string]string `json:"resources"`
	Prompts            map[string]string `json:"prompts"`
	// Seen in Yao apps, ignored by Yao.
	Capabilities any `json:"capabilities"`
	Mapping      any `json:"mapping"`
}

// loadAppMCPServers loads the app's mcps/ folder, by Yao's id ("foo.bar"
// for mcps/foo/bar.mcp.yao); a defined but broken server maps to nil.
func (l *loader) loadAppMCPServers() map[string]*MCPServer {
	out := map[string]*MCPServer{}
	base := filepath.Join(l.root, MCPsDir, MCPMappingDir)
	for _, f := range l.specFiles(filepath.Join(l.root, MCPsDir), true) {
		// gou's mapping folder of an app server: its id as a path.
		out[f.id] = l.loadMCPServer(f.id, f.abs, filepath.Join(base, filepath.FromSlash(strings.ReplaceAll(f.id, ".", "/"))))
	}
	return out
}

// loadOwnMCPServers loads an assistant's mcps/ folder, by Yao's id
// ("agents.<assistant id>.<path without .mcp.ext, '/' as '.'>").
func (l *loader) loadOwnMCPServers(assistantID, dir string) map[string]*MCPServer {
	out := map[string]*MCPServer{}
	l.walk(dir, func(p string) {
		base := filepath.Base(p)
		ext := filepath.Ext(base)
		if !slices.Contains(configExts, ext) || !strings.HasSuffix(strings.TrimSuffix(base, ext), mcpSuffix) {
			return
		}
		rel, _ := filepath.Rel(dir, p)
		name := strings.ReplaceAll(strings.TrimSuffix(filepath.ToSlash(rel), mcpSuffix+ext), "/", ".")
		id := "agents." + assistantID + "." + name
		// gou's mapping folder of an assistant's server: its path under
		// mcps/, a dot in a file name a folder too.
		mapping := filepath.Join(dir, MCPMappingDir, filepath.FromSlash(strings.ReplaceAll(name, ".", "/")))
		if prev, dup := out[id]; dup {
			file := "?"
			if prev != nil {
				file = prev.File
			}
			l.fileProblem(p, "id %q is also defined by %s", id, file)
			return
		}
		out[id] = l.loadMCPServer(id, p, mapping)
	})
	return out
}

// loadMCPServer checks one MCP file; nil when it has errors. mapping is
// the folder of a process server's schemas.
func (l *loader) loadMCPServer(id, abs, mapping string) *MCPServer {
	var raw rawMCPServer
	d := l.decode(abs, &raw)
	if d == nil || d.broken {
		l.done(d)
		return nil
	}
	s := &MCPServer{ID: id, File: l.rel(abs), Transport: raw.Transport, Command: raw.Command,
		Args: raw.Args, Env: raw.Env, URL: raw.URL, Label: raw.Label, Name: raw.Name, Description: raw.Description}
	if len(raw.Arguments) > 0 {
		if len(raw.Args) > 0 {
			d.errPath("args", "both arguments and args: keep one (arguments is Yao's name)")
		}
		s.Args = raw.Arguments
	}
	if len(raw.Headers) > 0 {
		s.Headers = maps.Clone(raw.Headers)
	}
	if raw.AuthorizationToken != "" {
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		for k := range s.Headers {
			if strings.EqualFold(k, "Authorization") {
				d.errPath("authorization_token", "both authorization_token and headers.%s: keep one", k)
			}
		}
		// Sent verbatim as Authorization (write "Bearer ..."), as Yao does.
		s.Headers["Authorization"] = raw.AuthorizationToken
		if msg := checkEnvRef(raw.AuthorizationToken); msg != "" {
			d.errPath("authorization_token", "authorization_token: invalid environment reference: want $ENV.NAME")
		}
	}
	if s.Transport == "" {
		switch {
		case raw.Command != "":
			s.Transport = "stdio"
		case raw.URL != "":
			s.Transport = "http"
		}
	}
	for _, f := range []string{"capabilities", "mapping"} {
		if d.has(f) && s.Transport != "process" {
			d.warnAt(d.keyOffset(f), "%s is ignored (by Yao too)", f)
		}
	}
	switch s.Transport {
	case "stdio":
		if raw.Command == "" {
			d.errPath("", "command is required for a stdio server")
		}
		if raw.URL != "" {
			d.errPath("url", "url is only for http and sse servers")
		}
		if len(s.Headers) > 0 {
			d.errPath("headers", "headers and authorization_token are only for http and sse servers")
		}
		if raw.Timeout != "" {
			d.warnPath("timeout", "timeout is for http servers (Yao ignores it for stdio too)")
		}
	case "http", "sse":
		if raw.URL == "" {
			d.errPath("", "url is required for an %s server", s.Transport)
		} else if _, isEnv := envRef(raw.URL); !isEnv {
			if u, err := url.Parse(raw.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("url", "url: want an http(s) URL, got %q", raw.URL)
			}
		}
		if raw.Command != "" {
			d.errPath("command", "command is only for stdio servers")
		}
		if raw.Timeout != "" {
			if t, err := parseDurationOK(raw.Timeout); err != nil {
				d.errPath("timeout", "timeout: %v", err)
			} else {
				s.Timeout = t
				d.warnPath("timeout", "timeout is kept but not applied: the coding-agent CLI uses its own MCP timeouts")
			}
		}
	case "process":
		// Tools that run processes of the app (scripts.*, agents.*), with
		// their schemas in the mapping folder (gou mcp/process).
		for _, f := range []string{"command", "url"} {
			if d.has(f) {
				d.errPath(f, "%s is not for a process server: its tools run the processes it maps", f)
			}
		}
		s.Process = l.processMapping(d, id, mapping, raw.Tools, raw.Resources, raw.Prompts)
	case "":
		d.errPath("", "transport is required: stdio (with command) or http/sse (with url)")
	default:
		d.errPath("transport", "unknown transport %q (known: stdio, http, sse, process)", s.Transport)
	}
	if s.Transport != "process" {
		for _, f := range []string{"tools", "resources", "prompts"} {
			if d.has(f) {
				d.errPath(f, "%s maps names to Yao processes: only for transport process", f)
			}
		}
	}
	if raw.Endpoint != "" {
		d.warnPath("endpoint", "endpoint is ignored (by Yao too)")
	}
	for k, v := range raw.Env {
		if !envName.MatchString(k) {
			d.errPath("env."+k, "env: invalid variable name %q", k)
		}
		if msg := checkEnvRef(v); msg != "" {
			d.errPath("env."+k, "env.%s: %s", k, msg)
		}
	}
	for k, v := range raw.Headers {
		if msg := checkEnvRef(v); msg != "" {
			d.errPath("headers."+k, "headers.%s: %s", k, msg)
		}
	}
	if !l.done(d) {
		return nil // defined but broken: referenced without a second error
	}
	return s
}

// DefaultMaxToolTurns is how many rounds of tool results a direct
// assistant's model gets when mcp.options.max_turn sets none (Yao's
// default).
const DefaultMaxToolTurns = 5

// toolLoop reads package.yao's mcp.options: max_turn and tool_loop, the
// options Yao's tool loop reads (agent/assistant/loop.go); others are
// ignored with a warning.
func toolLoop(d *doc, opts map[string]any) ToolLoop {
	loop := ToolLoop{MaxTurns: DefaultMaxToolTurns}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		v := opts[k]
		switch k {
		case "max_turn":
			// Yao takes a positive number, truncated; anything else is its
			// default.
			if n, ok := v.(float64); ok && n >= 1 {
				loop.MaxTurns = int(n)
			} else {
				d.warnPath("mcp.options.max_turn", "mcp.options.max_turn: want a positive number; the default, %d, applies", DefaultMaxToolTurns)
			}
		case "tool_loop":
			if b, ok := v.(bool); ok {
				loop.Disabled = !b
			} else {
				d.warnPath("mcp.options.tool_loop", "mcp.options.tool_loop: want true or false; the loop stays on")
			}
		default:
			d.warnAt(d.keyOffset("mcp.options."+k), "mcp.options.%s is ignored (Yao reads max_turn and tool_loop)", k)
		}
	}
	return loop
}

// parseDurationOK parses an MCP timeout ("30s", "1m", "1d").
func parseDurationOK(s string) (time.Duration, error) {
	d := &doc{pos: map[string]int{}, bad: map[string]bool{}}
	v := parseDurationIn(d, "timeout", s, time.Millisecond, 24*time.Hour)
	if len(d.probs) > 0 {
		return 0, fmt.Errorf("%s", strings.TrimPrefix(d.probs[0].Msg, "timeout: "))
	}
	return v, nil
}

// checkMCPRefs resolves package.yao's mcp.servers: an app server by its id,
// any assistant's own server by Yao's id (agents.<assistant>.<name>), or
// this assistant's own by its short name. An id that resolves to nothing,
// or to a process server, is skipped with a warning, as Yao skips an
// unknown id.
func (l *loader) checkMCPRefs(d *doc, a *Assistant, m *rawMCP, app *App) {
	if d.bad["mcp"] {
		return
	}
	seen := map[string]bool{}
	for i, form := range m.Servers {
		r := form.MCPRef
		p := fmt.Sprintf("mcp.servers[%d]", i)
		if d.bad[p] {
			continue
		}
		if r.ServerID == "" {
			d.errPath(p, "%s: the server id is empty", p)
			continue
		}
		if seen[r.ServerID] {
			d.errPath(p, "server %q is listed twice", r.ServerID)
			continue
		}
		seen[r.ServerID] = true
		def, found := lookupMCP(r.ServerID, a, app, l.agentMCPs)
		switch {
		case !found:
			d.warnPath(p, "MCP server %q is not defined: skipped (Yao skips it too)%s", r.ServerID, hintAmong(r.ServerID, mcpIDs(a, app, l.agentMCPs), "defined"))
			continue
		case def == nil:
			d.errPath(p, "MCP server %q does not load: its file has errors", r.ServerID)
			continue
		}
		for j, t := range r.Tools {
			if strings.TrimSpace(t) == "" {
				d.errPath(fmt.Sprintf("%s.tools[%d]", p, j), "tool name is empty")
			}
		}
		if len(r.Resources) > 0 {
			d.warnPath(p, "the resources filter of %q is not enforced: the coding-agent CLI lists every resource of the server", r.ServerID)
		}
		if a.Sandbox != nil && def.Transport == "stdio" {
			for _, k := range slices.Sorted(maps.Keys(def.Env)) {
				if _, _, err := a.MCPSecret(def, k, def.Env[k]); err != nil {
					d.errPath(p, "%v", err)
				}
			}
		}
		if a.MCPServers == nil {
			a.MCPServers = map[string]*MCPServer{}
		}
		a.MCPServers[r.ServerID] = def
		a.MCP = append(a.MCP, r)
	}
}

// MCPServer finds the definition an mcp.servers id names for assistant a,
// the way its package.yao's references resolve: an app server, any
// assistant's own by Yao's id, or a's own by its short name. ok is false
// when none is defined (or the definition has errors).
func (app *App) MCPServer(a *Assistant, id string) (*MCPServer, bool) {
	agents := map[string]*MCPServer{}
	for _, other := range app.Assistants {
		for k, v := range other.OwnMCPServers {
			agents[k] = v
		}
	}
	def, ok := lookupMCP(id, a, app, agents)
	return def, ok && def != nil
}

// lookupMCP finds the definition an mcp.servers id names; found is false
// when none does (a broken definition is found, as nil).
func lookupMCP(id string, a *Assistant, app *App, agentMCPs map[string]*MCPServer) (*MCPServer, bool) {
	if def, ok := app.MCPServers[id]; ok {
		return def, true
	}
	if def, ok := a.OwnMCPServers[id]; ok {
		return def, true
	}
	if def, ok := agentMCPs[id]; ok {
		return def, true
	}
	if def, ok := a.OwnMCPServers["agents."+a.ID+"."+id]; ok {
		return def, true // agentbox: an assistant's own server by its short name
	}
	return nil, false
}

// mcpIDs lists what an mcp.servers id may name, for hints.
func mcpIDs(a *Assistant, app *App, agentMCPs map[string]*MCPServer) []string {
	var ids []string
	for k := range app.MCPServers {
		ids = append(ids, k)
	}
	for k := range agentMCPs {
		ids = append(ids, k)
	}
	prefix := "agents." + a.ID + "."
	for k := range a.OwnMCPServers {
		ids = append(ids, k, strings.TrimPrefix(k, prefix))
	}
	sort.Strings(ids)
	return slices.Compact(ids)
}
