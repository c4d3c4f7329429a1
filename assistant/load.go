package assistant

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"golang.org/x/sync/errgroup"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/llmtest"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// File and folder names of an app.
const (
	AppFile        = "app.jsonc"
	ConnectorsDir  = "connectors"
	AssistantsDir  = "assistants"
	PackageFile    = "package.yao"
	PromptsFile    = "prompts.yml"
	MCPsDir        = "mcps"
	SkillsDir      = "skills"
	HooksTS        = "src/index.ts"
	HooksJS        = "src/index.js"
	connSuffix     = ".conn"
	mcpSuffix      = ".mcp"
	defaultListen  = "127.0.0.1:8080"
	minRetention   = time.Hour
	defaultHookTTL = 5 * time.Second
)

// configExts are the extensions of JSONC definition files
// (x.conn.yao, x.mcp.json, ...).
var configExts = []string{".yao", ".jsonc", ".json"}

// Connector types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeScripted  = "scripted"
)

var connectorTypes = []string{TypeAnthropic, TypeOpenAI, TypeScripted}

// idPart is one component of an assistant, connector or MCP server id.
var idPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// Load reads the app folder dir: app.jsonc, connectors, and every assistant
// with its prompts, MCP definitions, skills and hooks source. Everything is
// validated and every default applied. When anything is wrong the error is
// a *LoadError listing every problem with its file and position; an
// unreadable dir is a plain error.
func Load(dir string) (*App, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("app folder: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("app folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("app folder %s: not a folder", root)
	}
	l := &loader{root: root}
	app := &App{Root: root}
	app.Config = l.loadConfig()
	app.Connectors = l.loadConnectors()
	app.Assistants = l.loadAssistants(app.Config, app.Connectors)
	if len(l.probs) > 0 {
		return nil, &LoadError{Root: root, Problems: SortProblems(l.probs)}
	}
	return app, nil
}

// loader collects problems while loading one app.
type loader struct {
	root  string
	probs []Problem
	// connIDs and their files, including connectors whose files had
	// problems, so a reference to a broken connector does not also
	// report it as undefined.
	connIDs map[string]bool
}

func (l *loader) rel(abs string) string {
	r, err := filepath.Rel(l.root, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(r)
}

// fileProblem records a problem about a whole file or folder (no position).
func (l *loader) fileProblem(abs string, format string, args ...any) {
	l.probs = append(l.probs, Problem{File: l.rel(abs), Msg: fmt.Sprintf(format, args...)})
}

// read returns a file's content, recording a problem when it cannot.
func (l *loader) read(abs string) ([]byte, bool) {
	b, err := readConfig(abs)
	if err != nil {
		l.fileProblem(abs, "%v", unwrapPath(err))
		return nil, false
	}
	return b, true
}

// readConfig reads a configuration file with one open: it must be a
// regular file of at most maxConfigFile bytes.
func readConfig(abs string) ([]byte, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > maxConfigFile {
		return nil, fmt.Errorf("file is %d bytes; the limit for a configuration file is %d", st.Size(), maxConfigFile)
	}
	b := make([]byte, st.Size())
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return b[:n], nil
}

// decode reads and decodes a JSONC file, returning its doc for positioned
// validation (nil when the file could not be read).
func (l *loader) decode(abs string, v any) *doc {
	b, ok := l.read(abs)
	if !ok {
		return nil
	}
	return decodeJSONC(l.rel(abs), b, v)
}

// done moves a doc's problems into the loader and reports whether it had
// none.
func (l *loader) done(d *doc) bool {
	if d == nil {
		return false
	}
	l.probs = append(l.probs, d.probs...)
	return len(d.probs) == 0
}

// ---- app.jsonc ----

type rawApp struct {
	DataRoot string          `json:"data_root"`
	Listen   string          `json:"listen"`
	Auth     AuthConfig      `json:"auth"`
	Sandbox  SandboxDefaults `json:"sandbox"`
	Cleanup  rawCleanup      `json:"cleanup"`
}

type rawCleanup struct {
	Schedule  string `json:"schedule"`
	Retention string `json:"retention"`
}

func (l *loader) loadConfig() *AppConfig {
	cfg := &AppConfig{
		DataRoot: filepath.Join(l.root, "data"),
		Listen:   defaultListen,
		Cleanup:  CleanupConfig{Schedule: sandbox.DefaultRetentionSchedule, Retention: sandbox.DefaultRetention},
	}
	abs := filepath.Join(l.root, AppFile)
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		for _, alt := range []string{"app.json", "app.yao"} {
			if _, err := os.Stat(filepath.Join(l.root, alt)); err == nil {
				l.fileProblem(filepath.Join(l.root, alt), "the app settings file is named %s; rename it", AppFile)
			}
		}
		return cfg
	}
	var raw rawApp
	d := l.decode(abs, &raw)
	if d == nil {
		return cfg
	}
	defer l.done(d)
	if d.broken {
		return cfg
	}
	if raw.DataRoot != "" {
		p := raw.DataRoot
		if !filepath.IsAbs(p) {
			p = filepath.Join(l.root, p)
		}
		cfg.DataRoot = filepath.Clean(p)
	}
	if d.has("listen") {
		if _, port, err := net.SplitHostPort(raw.Listen); err != nil || port == "" {
			d.errPath("listen", "listen: want host:port (\"127.0.0.1:8080\", \":8080\"), got %q", raw.Listen)
		} else {
			cfg.Listen = raw.Listen
		}
	}
	seen := map[string]int{}
	for i, t := range raw.Auth.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case t.Token == "":
			d.errPath(p+".token", "%s.token is required", p)
		case checkEnvRef(t.Token) != "":
			d.errPath(p+".token", "%s", checkEnvRef(t.Token))
		default:
			if j, dup := seen[t.Token]; dup {
				d.errPath(p+".token", "%s.token: the same token as auth.tokens[%d]", p, j)
			}
			seen[t.Token] = i
		}
		if t.User == "" {
			d.errPath(p+".user", "%s.user is required", p)
		} else if err := sandbox.ValidateID("user", t.User); err != nil {
			d.errPath(p+".user", "%s", strings.TrimSuffix(err.Error(), ": "+sandbox.ErrInvalidID.Error()))
		}
	}
	cfg.Auth = raw.Auth
	s := raw.Sandbox
	if !oneOf(s.Runtime, "", "docker", "local") {
		d.errPath("sandbox.runtime", "sandbox.runtime: want docker or local, got %q", s.Runtime)
	}
	if !oneOf(s.Network, "", "none", "host") {
		d.errPath("sandbox.network", "sandbox.network: want none or host, got %q", s.Network)
	}
	for cmd, img := range s.Images {
		if _, ok := defaultImages[cmd]; !ok {
			d.errPath("sandbox.images."+cmd, "sandbox.images: unknown command %q (known: claude, cursor)", cmd)
		} else if strings.TrimSpace(img) == "" {
			d.errPath("sandbox.images."+cmd, "sandbox.images.%s is empty", cmd)
		}
	}
	cfg.Sandbox = s
	if raw.Cleanup.Schedule != "" {
		if _, err := cron.ParseStandard(raw.Cleanup.Schedule); err != nil {
			d.errPath("cleanup.schedule", "cleanup.schedule %q: %v (want a cron spec like \"0 3 * * *\")", raw.Cleanup.Schedule, err)
		} else {
			cfg.Cleanup.Schedule = raw.Cleanup.Schedule
		}
	}
	if raw.Cleanup.Retention != "" {
		r, err := parseRetention(raw.Cleanup.Retention)
		switch {
		case err != nil:
			d.errPath("cleanup.retention", "cleanup.retention: %v", err)
		case r < minRetention:
			d.errPath("cleanup.retention", "cleanup.retention %q is shorter than %s", raw.Cleanup.Retention, units.FormatDuration(minRetention))
		default:
			cfg.Cleanup.Retention = r
		}
	}
	return cfg
}

// parseRetention parses cleanup.retention: a duration that may start with
// whole days ("7d", "36h", "1d12h"). Its range is checked by the caller.
func parseRetention(s string) (time.Duration, error) {
	d, err := units.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: use units d, h, m (\"7d\", \"36h\")", err)
	}
	return d, nil
}

// ---- connectors ----

type rawConnector struct {
	Type        string         `json:"type"`
	Label       string         `json:"label"`
	Description string         `json:"description"`
	Options     map[string]any `json:"options"`
}

// defFiles walks dir for definition files named NAME<suffix><ext> and
// returns them by id ("deepseek/v3.conn.yao" -> "deepseek.v3"), recording
// problems for bad names and duplicate ids. Hidden entries are skipped.
func (l *loader) defFiles(dir, suffix string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return filepath.SkipDir
			}
			l.fileProblem(p, "%v", unwrapPath(err))
			return nil
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		base, ok := defBase(name, suffix)
		if !ok {
			return nil
		}
		relDir, _ := filepath.Rel(dir, filepath.Dir(p))
		parts := []string{}
		if relDir != "." {
			parts = strings.Split(filepath.ToSlash(relDir), "/")
		}
		parts = append(parts, base)
		for _, part := range parts {
			if !idPart.MatchString(part) {
				l.fileProblem(p, "cannot derive an id from this path: %q must be 1-64 letters, digits, '_' or '-', starting with a letter or digit", part)
				return nil
			}
		}
		id := strings.Join(parts, ".")
		if prev, dup := out[id]; dup {
			l.fileProblem(p, "id %q is also defined by %s", id, l.rel(prev))
			return nil
		}
		out[id] = p
		return nil
	})
	if err != nil {
		l.fileProblem(dir, "%v", unwrapPath(err))
	}
	return out
}

// defBase strips suffix+ext from a definition file name ("v3.conn.yao" ->
// "v3").
func defBase(name, suffix string) (string, bool) {
	for _, ext := range configExts {
		if strings.HasSuffix(name, suffix+ext) {
			return strings.TrimSuffix(name, suffix+ext), true
		}
	}
	return "", false
}

func (l *loader) loadConnectors() map[string]*Connector {
	files := l.defFiles(filepath.Join(l.root, ConnectorsDir), connSuffix)
	l.connIDs = map[string]bool{}
	out := make(map[string]*Connector, len(files))
	for id, abs := range files {
		l.connIDs[id] = true
		if c := l.loadConnector(id, abs); c != nil {
			out[id] = c
		}
	}
	return out
}

func (l *loader) loadConnector(id, abs string) *Connector {
	var raw rawConnector
	d := l.decode(abs, &raw)
	if d == nil || d.broken {
		l.done(d)
		return nil
	}
	c := &Connector{ID: id, Type: raw.Type, Label: raw.Label, File: l.rel(abs)}
	switch {
	case d.bad["type"]:
	case raw.Type == "":
		d.errPath("type", "type is required (%s)", strings.Join(connectorTypes, ", "))
	case !oneOf(raw.Type, connectorTypes...):
		d.errPath("type", "unknown connector type %q (known: %s)", raw.Type, strings.Join(connectorTypes, ", "))
	}
	str := func(name string) string {
		v, ok := raw.Options[name]
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			d.bad["options."+name] = true
			d.errPath("options."+name, "options.%s: want a string, got %s", name, goKind(v))
			return ""
		}
		if msg := checkEnvRef(s); msg != "" {
			if name == "key" {
				// Never quote what may be a secret.
				msg = "invalid environment reference: want $ENV.NAME with letters, digits and underscores"
			}
			d.errPath("options."+name, "options.%s: %s", name, msg)
		}
		return s
	}
	o := ConnectorOptions{Host: str("host"), Key: str("key"), Model: str("model"), Script: str("script")}
	for k, v := range raw.Options {
		switch k {
		case "host", "key", "model", "script":
			continue
		}
		if o.Extra == nil {
			o.Extra = map[string]any{}
		}
		o.Extra[k] = v
	}
	if o.Host != "" {
		if _, isEnv := envRef(o.Host); !isEnv {
			if u, err := url.Parse(o.Host); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("options.host", "options.host: want an http(s) URL like \"https://api.openai.com\", got %q", o.Host)
			}
		}
	}
	switch raw.Type {
	case TypeScripted:
		if d.bad["options.script"] {
			break
		}
		if o.Script == "" {
			d.errPath("options", "options.script is required for a scripted connector: the path of an llmtest script, relative to this file")
			break
		}
		if _, isEnv := envRef(o.Script); isEnv {
			d.errPath("options.script", "options.script cannot come from the environment")
			break
		}
		p := o.Script
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(abs), p)
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			d.errPath("options.script", "options.script: no script file %s", l.rel(p))
		} else {
			l.checkScript(p)
		}
		o.Script = filepath.Clean(p)
	case TypeAnthropic, TypeOpenAI:
		if o.Script != "" {
			d.errPath("options.script", "options.script is only for scripted connectors")
		}
		if o.Model == "" && !d.bad["options.model"] {
			d.errPath("options", "options.model is required for an %s connector", raw.Type)
		}
		if raw.Type == TypeAnthropic && o.Key == "" && !d.bad["options.key"] {
			d.errPath("options", "options.key is required for an anthropic connector (use \"$ENV.ANTHROPIC_API_KEY\")")
		}
	}
	c.Options = o
	if !l.done(d) {
		return nil
	}
	return c
}

// scriptPos matches the "LINE:COL: msg" errors of llmtest.ParseScript.
var scriptPos = regexp.MustCompile(`^(\d+):(\d+):\s*(.*)$`)

// checkScript validates a scripted connector's llmtest script, so a broken
// demo script is found at load time like any other file.
func (l *loader) checkScript(abs string) {
	b, err := readConfig(abs)
	if err != nil {
		l.fileProblem(abs, "%v", unwrapPath(err))
		return
	}
	_, err = llmtest.ParseScript(b, filepath.Ext(abs))
	if err == nil {
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		p := Problem{File: l.rel(abs), Line: 1, Col: 1, Msg: line}
		if m := scriptPos.FindStringSubmatch(line); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Col, _ = strconv.Atoi(m[2])
			p.Msg = m[3]
		}
		p.Msg = "script: " + p.Msg
		l.probs = append(l.probs, p)
	}
}

// ---- assistants ----

type rawPackage struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Connector   string            `json:"connector"`
	Options     chat.ModelOptions `json:"options"`
	Sandbox     *rawSandbox       `json:"sandbox"`
	MCP         *rawMCP           `json:"mcp"`
	Hooks       *rawHooks         `json:"hooks"`
	Tools       []rawTool         `json:"tools"`
}

// rawTool is one entry of package.yao "tools": a host tool the agent may
// call through the bridge.
type rawTool struct {
	Name        string         `json:"name"`
	Function    string         `json:"function"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
	Timeout     string         `json:"timeout"`
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

type rawMCP struct {
	Servers []rawMCPRef `json:"servers"`
}

type rawMCPRef struct {
	ServerID string   `json:"server_id"`
	Tools    []string `json:"tools"`
}

type rawHooks struct {
	// Timeout bounds each hook call ("5s").
	Timeout string `json:"timeout"`
}

type rawMCPServer struct {
	Transport string            `json:"transport"`
	Command   string            `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
}

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

func (l *loader) loadMCPServers(dir string) map[string]*MCPServer {
	files := l.defFiles(dir, mcpSuffix)
	out := make(map[string]*MCPServer, len(files))
	for id, abs := range files {
		var raw rawMCPServer
		d := l.decode(abs, &raw)
		if d == nil || d.broken {
			l.done(d)
			out[id] = nil // defined but broken: references to it are fine
			continue
		}
		s := &MCPServer{ID: id, File: l.rel(abs), Transport: raw.Transport, Command: raw.Command,
			Args: raw.Args, Env: raw.Env, URL: raw.URL, Headers: raw.Headers}
		if s.Transport == "" {
			switch {
			case raw.Command != "":
				s.Transport = "stdio"
			case raw.URL != "":
				s.Transport = "http"
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
			if len(raw.Headers) > 0 {
				d.errPath("headers", "headers are only for http and sse servers")
			}
		case "http", "sse":
			if raw.URL == "" {
				d.errPath("", "url is required for an %s server", s.Transport)
			} else if u, err := url.Parse(raw.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.errPath("url", "url: want an http(s) URL, got %q", raw.URL)
			}
			if raw.Command != "" {
				d.errPath("command", "command is only for stdio servers")
			}
		case "":
			d.errPath("", "transport is required: stdio (with command) or http/sse (with url)")
		default:
			d.errPath("transport", "unknown transport %q (known: stdio, http, sse)", s.Transport)
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
		if l.done(d) {
			out[id] = s
		} else {
			out[id] = nil // defined but broken: referenced without a second error
		}
	}
	return out
}

func (l *loader) checkMCPRefs(d *doc, m *rawMCP, servers map[string]*MCPServer, dir string) []MCPRef {
	refs := make([]MCPRef, 0, len(m.Servers))
	seen := map[string]bool{}
	for i, r := range m.Servers {
		p := fmt.Sprintf("mcp.servers[%d]", i)
		if r.ServerID == "" {
			d.errPath(p, "%s.server_id is required", p)
			continue
		}
		if seen[r.ServerID] {
			d.errPath(p+".server_id", "server %q is listed twice", r.ServerID)
			continue
		}
		seen[r.ServerID] = true
		if _, ok := servers[r.ServerID]; !ok {
			have := make([]string, 0, len(servers))
			for k := range servers {
				have = append(have, k)
			}
			sort.Strings(have)
			hint := "none are defined"
			if len(have) > 0 {
				hint = "defined: " + strings.Join(have, ", ")
			}
			d.errPath(p+".server_id", "MCP server %q is not defined in %s/ (%s)", r.ServerID, l.rel(dir), hint)
			continue
		}
		for j, t := range r.Tools {
			if strings.TrimSpace(t) == "" {
				d.errPath(fmt.Sprintf("%s.tools[%d]", p, j), "tool name is empty")
			}
		}
		refs = append(refs, MCPRef{ServerID: r.ServerID, Tools: r.Tools})
	}
	return refs
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

// ---- helpers ----

func oneOf(s string, set ...string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

func goKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return "null"
}

// unwrapPath drops the host path from an fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
