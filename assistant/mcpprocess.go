package assistant

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// MCPMappingDir is the folder beside an app's or an assistant's MCP files
// that holds the schemas of its process servers (gou mcp/process/loader.go):
// mapping/<server path>/schemes/<tool>.in.yao, .out.yao and .jsonl
// samples, resources/<name>.res.yao and prompts/<name>.pmt.yao.
const MCPMappingDir = "mapping"

// ProcessMapping is what a process MCP server (transport "process") offers:
// tools, resources and prompts mapped to processes of the app (scripts.*,
// agents.<assistant>.<file>.*), with the schemas of its mapping folder.
type ProcessMapping struct {
	// Tools are sorted by name.
	Tools []ProcessTool
	// Resources and Prompts are sorted by name.
	Resources []ProcessResource
	Prompts   []ProcessPrompt
}

// Tool returns the tool named name.
func (m *ProcessMapping) Tool(name string) (ProcessTool, bool) {
	if m == nil {
		return ProcessTool{}, false
	}
	i, ok := slices.BinarySearchFunc(m.Tools, name, func(t ProcessTool, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return ProcessTool{}, false
	}
	return m.Tools[i], true
}

// ProcessTool is one tool of a process server.
type ProcessTool struct {
	Name string
	// Process is the process the tool runs ("scripts.tests.mcp.Echo"). Yao
	// calls it with the tool's arguments (an object) and the agent's
	// context.
	Process string
	// Description is the input schema's description, which Yao gives the
	// model as the tool's.
	Description string
	// InputSchema is schemes/<tool>.in.yao as standard JSON: the
	// parameters the model is given, whole (Yao sends it as written,
	// x-process-args included).
	InputSchema json.RawMessage
	// OutputSchema is schemes/<tool>.out.yao when there is one. Yao
	// validates and keeps it but offers it to no one.
	OutputSchema json.RawMessage
	// Samples are examples from mcps/mapping/<server id as a path>/schemes/
	// <tool>.jsonl, which Yao shows the model in a system message.
	Samples []ToolSample
	// File is the input schema's file relative to the app root.
	File string
}

// ToolSample is one line of a tool's samples file.
type ToolSample struct {
	Name     string         `json:"name,omitempty"`
	Input    map[string]any `json:"input,omitempty"`
	Output   any            `json:"output,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ProcessResource is one resource of a process server
// (resources/<name>.res.yao): reading it runs Process with the URI asked.
type ProcessResource struct {
	Name        string
	Process     string
	Description string
	// URI is the resource's URI, a template when it holds {param}
	// placeholders.
	URI      string
	MimeType string
	// Parameters are the template's parameters.
	Parameters []ResourceParameter
	Meta       map[string]any
	// ProcessArgs are x-process-args: the process's arguments, as gou's
	// process client makes them (":uri", ":parameters", "$uri.<param>",
	// "$<query param>", or a constant); none passes the URI alone.
	ProcessArgs []string
}

// ResourceParameter is one parameter of a resource template.
type ResourceParameter struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ProcessPrompt is one prompt of a process server (prompts/<name>.pmt.yao):
// its template with each {{argument}} replaced by the value given.
type ProcessPrompt struct {
	Name        string
	Description string
	Template    string
	Arguments   []PromptArgument
	Meta        map[string]any
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// maxSamplesFile bounds a samples file.
const maxSamplesFile = 1 << 20

// processMapping loads the mapping of a process server with id defined in
// d: dir is its mapping folder (mapping/<server path>). Every tool needs
// its input schema; a missing or invalid one is an error at the tools
// entry, as Yao refuses to load such a server.
func (l *loader) processMapping(d *doc, id, dir string, tools, resources, prompts map[string]string) *ProcessMapping {
	m := &ProcessMapping{}
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		proc := tools[name]
		path := "tools." + name
		if msg := checkProcessName(proc); msg != "" {
			d.errPath(path, "tool %s: %s", name, msg)
			continue
		}
		if !toolName.MatchString(name) && !jsIdent.MatchString(name) {
			d.warnPath(path, "tool name %q: models take tool names of letters, digits, '_' and '-'", name)
		}
		t, msg := l.processTool(id, dir, name, proc)
		if msg != "" {
			d.errPath(path, "tool %s: %s", name, msg)
			continue
		}
		if t.Description == "" {
			d.warnPath(path, "tool %s: its schema (%s) has no description: the model is told nothing of what the tool does", name, t.File)
		}
		m.Tools = append(m.Tools, t)
	}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		proc := resources[name]
		if msg := checkProcessName(proc); msg != "" {
			d.errPath("resources."+name, "resource %s: %s", name, msg)
			continue
		}
		r, msg := l.processResource(dir, name, proc)
		if msg != "" {
			d.errPath("resources."+name, "resource %s: %s", name, msg)
			continue
		}
		m.Resources = append(m.Resources, r)
	}
	for _, name := range slices.Sorted(maps.Keys(prompts)) {
		p, msg := l.processPrompt(dir, name)
		if msg != "" {
			d.errPath("prompts."+name, "prompt %s: %s", name, msg)
			continue
		}
		if p.Template == "" {
			d.warnPath("prompts."+name, "prompt %s: %s has no template: the prompt is empty (Yao reads only template, not messages)", name, l.rel(filepath.Join(dir, "prompts", name+".pmt.yao")))
		}
		m.Prompts = append(m.Prompts, p)
	}
	if len(m.Tools)+len(m.Resources)+len(m.Prompts) == 0 && len(tools)+len(resources)+len(prompts) == 0 {
		d.warnPath("transport", "process server %s maps no tools, resources or prompts", id)
	}
	return m
}

// checkProcessName checks the shape of a process name: group.name...Method.
func checkProcessName(p string) string {
	switch {
	case p == "":
		return "the process name is empty"
	case strings.Count(p, ".") < 1 || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, ".."):
		return fmt.Sprintf("%q is not a process name (group.name.Method, such as scripts.tools.Echo)", p)
	}
	return ""
}

// processTool reads a tool's schemas and samples.
func (l *loader) processTool(id, dir, name, proc string) (ProcessTool, string) {
	t := ProcessTool{Name: name, Process: proc}
	in := filepath.Join(dir, "schemes", name+".in.yao")
	t.File = l.rel(in)
	schema, msg := l.readSchema(in)
	if msg != "" {
		return t, msg
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return t, fmt.Sprintf("%s: the input schema's type is %v: a tool's arguments are an object (\"type\": \"object\")", t.File, typ)
	}
	t.Description, _ = schema["description"].(string)
	t.InputSchema, _ = json.Marshal(schema)
	out := filepath.Join(dir, "schemes", name+".out.yao")
	if _, err := os.Stat(out); err == nil {
		s, msg := l.readSchema(out)
		if msg != "" {
			return t, msg
		}
		t.OutputSchema, _ = json.Marshal(s)
	}
	// Yao reads samples from the app's mcps/mapping by the server's id,
	// whatever folder the server is defined in (gou mcp/process/samples.go).
	samples := filepath.Join(l.root, MCPsDir, MCPMappingDir, filepath.FromSlash(strings.ReplaceAll(id, ".", "/")), "schemes", name+".jsonl")
	t.Samples = readSamples(samples)
	return t, ""
}

// readSchema reads a JSON Schema file (JSONC) and checks it is one.
func (l *loader) readSchema(abs string) (map[string]any, string) {
	rel := l.rel(abs)
	m, msg := l.readObject(abs, "a process tool needs its input schema there", "a JSON Schema object")
	if msg != "" {
		return nil, msg
	}
	raw, _ := json.Marshal(m)
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Sprintf("%s is not a JSON Schema: %v", rel, err)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Sprintf("%s is not a valid JSON Schema: %v", rel, err)
	}
	return m, ""
}

// readSamples reads a samples file (JSON lines); lines that are not
// samples are skipped, as Yao skips them. A missing file has none.
func readSamples(abs string) []ToolSample {
	f, err := os.Open(abs)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []ToolSample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxSamplesFile)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s ToolSample
		if json.Unmarshal(line, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// readMappingFile reads a resource or prompt definition as a JSON object.
func (l *loader) readMappingFile(abs, what string) (map[string]any, string) {
	return l.readObject(abs, "a process server's "+what+" is defined there", "an object")
}

// readObject reads a JSONC file holding one object; the message says
// what is wrong (missing: why the file should be there; want: what the
// object is) and is "" when it was read.
func (l *loader) readObject(abs, missing, want string) (map[string]any, string) {
	rel := l.rel(abs)
	b, err := readConfig(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Sprintf("%s does not exist: %s", rel, missing)
		}
		return nil, fmt.Sprintf("%s: %v", rel, unwrapPath(err))
	}
	var v any
	d := decodeJSONC(rel, b, &v)
	if d.errors() {
		l.probs = append(l.probs, d.probs...)
		return nil, fmt.Sprintf("%s is not valid JSON", rel)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("%s: want %s, got %s", rel, want, goKind(v))
	}
	return m, ""
}

// field copies m[key] into dst (via JSON) when present; a value of another
// type is an error, as Yao's decoding fails on it. Unknown keys are
// ignored, as Yao ignores them.
func field(m map[string]any, key string, dst any) error {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("%s: want %s, got %s", key, typeName(reflect.TypeOf(dst).Elem()), goKind(v))
	}
	return nil
}

// processResource reads resources/<name>.res.yao.
func (l *loader) processResource(dir, name, proc string) (ProcessResource, string) {
	abs := filepath.Join(dir, "resources", name+".res.yao")
	m, msg := l.readMappingFile(abs, "resource")
	if msg != "" {
		return ProcessResource{}, msg
	}
	r := ProcessResource{Name: name, Process: proc}
	for _, f := range []struct {
		key string
		dst any
	}{{"description", &r.Description}, {"uri", &r.URI}, {"mimeType", &r.MimeType}, {"parameters", &r.Parameters}, {"meta", &r.Meta}, {"x-process-args", &r.ProcessArgs}} {
		if err := field(m, f.key, f.dst); err != nil {
			return r, fmt.Sprintf("%s: %v", l.rel(abs), err)
		}
	}
	if r.URI == "" {
		return r, fmt.Sprintf("%s: uri is required: the resource is read by its URI", l.rel(abs))
	}
	return r, ""
}

// processPrompt reads prompts/<name>.pmt.yao.
func (l *loader) processPrompt(dir, name string) (ProcessPrompt, string) {
	abs := filepath.Join(dir, "prompts", name+".pmt.yao")
	m, msg := l.readMappingFile(abs, "prompt")
	if msg != "" {
		return ProcessPrompt{}, msg
	}
	p := ProcessPrompt{Name: name}
	for _, f := range []struct {
		key string
		dst any
	}{{"description", &p.Description}, {"template", &p.Template}, {"arguments", &p.Arguments}, {"meta", &p.Meta}} {
		if err := field(m, f.key, f.dst); err != nil {
			return p, fmt.Sprintf("%s: %v", l.rel(abs), err)
		}
	}
	return p, ""
}

// Render fills the prompt's template with args the way Yao does: each
// {{name}} replaced by the argument's value (strings as they are, other
// values as Go prints them).
func (p ProcessPrompt) Render(args map[string]string) string {
	out := p.Template
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = strings.ReplaceAll(out, "{{"+k+"}}", args[k])
	}
	return out
}
