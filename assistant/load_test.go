package assistant

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

const (
	exampleApp = "../examples/app"
	appsDir    = "../testdata/apps"
)

func TestLoadExample(t *testing.T) {
	t.Parallel()
	app, err := Load(exampleApp)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs(exampleApp)
	if app.Root != root || app.Config.DataRoot != filepath.Join(root, "data") || app.Config.Listen != "127.0.0.1:8080" {
		t.Errorf("config: root %s data %s listen %s", app.Root, app.Config.DataRoot, app.Config.Listen)
	}
	if app.Config.Cleanup.Schedule != "0 3 * * *" || app.Config.Cleanup.Retention != 7*24*time.Hour {
		t.Errorf("cleanup: %+v", app.Config.Cleanup)
	}
	if got := keys(app.Connectors); got != "anthropic.sonnet openai.gpt scripted.codex scripted.demo scripted.gemini scripted.opencode scripted.qa" {
		t.Errorf("connectors: %s", got)
	}
	demo := app.Connectors["scripted.demo"]
	if demo.Type != TypeScripted || demo.Options.Script != filepath.Join(root, "connectors/scripted/demo.yaml") ||
		demo.File != "connectors/scripted/demo.conn.yao" || demo.Label != "Scripted demo model" {
		t.Errorf("demo connector: %+v", demo)
	}
	if gpt := app.Connectors["openai.gpt"]; gpt.Options.Extra["temperature"] != 0.2 {
		t.Errorf("openai extra options: %v", gpt.Options.Extra)
	}

	coder := app.Assistants["coder"]
	if coder == nil || !coder.HasSandbox() {
		t.Fatalf("coder: %+v", coder)
	}
	sb := coder.Sandbox
	want := Sandbox{Command: "claude", Image: "agentbox/sandbox-claude:latest", MemoryBytes: 2 << 30, DiskBytes: DefaultDisk, CPUs: 2, Timeout: 10 * time.Minute,
		Arguments: chat.Arguments{MaxTurns: 20, PermissionMode: "acceptEdits", AllowedTools: []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep"}}, File: "assistants/coder/package.yao"}
	if fmt.Sprint(*sb) != fmt.Sprint(want) {
		t.Errorf("sandbox:\n got %+v\nwant %+v", *sb, want)
	}
	if coder.HookTimeout != 10*time.Second || coder.Hooks != filepath.Join(root, "assistants/coder/src/index.ts") {
		t.Errorf("hooks: %s %s", coder.Hooks, coder.HookTimeout)
	}
	if len(coder.MCP) != 1 || coder.MCP[0].ServerID != "clock" || coder.MCPServers["clock"].Transport != "stdio" ||
		coder.MCPServers["clock"].Command != "node" || coder.MCPServers["clock"].Env["TZ"] != "UTC" {
		t.Errorf("mcp: %+v %+v", coder.MCP, coder.MCPServers)
	}
	if len(coder.Skills) != 1 || coder.Skills[0].Name != "code-review" || coder.Skills[0].AllowedTools == "" {
		t.Errorf("skills: %+v", coder.Skills)
	}
	if len(coder.Prompts) != 1 || coder.Prompts[0].Role != chat.RoleSystem || !strings.Contains(coder.Prompts[0].Content, "/workspace") {
		t.Errorf("prompts: %+v", coder.Prompts)
	}

	for _, id := range []string{"codex", "gemini", "opencode"} {
		a := app.Assistants[id]
		if a == nil || !a.HasSandbox() || a.Sandbox.Command != id || a.Connector != "scripted."+id || a.Sandbox.Arguments.MaxTurns != 20 ||
			len(a.Tools) != 1 || a.Tools[0].Name != "remember" || a.Hooks != filepath.Join(root, "assistants", id, "src/index.ts") {
			t.Errorf("%s: %+v", id, a)
		}
	}

	qa := app.Assistants["qa"]
	if qa == nil || qa.HasSandbox() || qa.Hooks != "" || qa.HookTimeout != 60*time.Second || qa.Name != "Q&A" || qa.Options.MaxTokens == nil || *qa.Options.MaxTokens != 1024 {
		t.Errorf("qa: %+v", qa)
	}
}

func TestLoadMinimalDefaults(t *testing.T) {
	t.Parallel()
	app, err := Load(filepath.Join(appsDir, "minimal"))
	if err != nil {
		t.Fatal(err)
	}
	a := app.Assistants["hello"]
	if a.Name != "hello" || a.Connector != "claude" || a.Sandbox != nil || a.Prompts != nil || a.Skills != nil {
		t.Errorf("assistant: %+v", a)
	}
	if app.Config.Listen != DefaultListen || app.Config.Cleanup.Retention != sandbox.DefaultRetention {
		t.Errorf("config: %+v", app.Config)
	}
}

// TestLoadBrokenApps: every broken app fails with problems that name an
// existing file, positioned unless they are about a whole file or folder.
func TestLoadBrokenApps(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(appsDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "bad-") || e.Name() == "bad-hook-code" {
			// bad-hook-code loads: its problems are in the hook source,
			// found by the hook engine (agentbox check).
			continue
		}
		n++
		dir := filepath.Join(appsDir, e.Name())
		_, err := Load(dir)
		var le *LoadError
		if !errors.As(err, &le) || len(le.Problems) == 0 {
			t.Errorf("%s: want a LoadError, got %v", e.Name(), err)
			continue
		}
		for _, p := range le.Problems {
			if _, err := os.Stat(filepath.Join(dir, p.File)); err != nil {
				t.Errorf("%s: problem names no existing file: %s", e.Name(), p)
			}
			if p.Line == 0 && !fileLevel(p.Msg) {
				t.Errorf("%s: problem without a position: %s", e.Name(), p)
			}
		}
	}
	if n < 8 {
		t.Fatalf("only %d broken apps", n)
	}
}

// TestOpenServesWhatLoads: Open loads an app in which some assistants
// have errors, the others serving; each failed one has its own errors
// (an assistant's folder, the connector or MCP server it uses), not
// those of an assistant nested in it or of the app's other files.
func TestOpenServesWhatLoads(t *testing.T) {
	t.Parallel()
	app, err := Open(filepath.Join(appsDir, "bad-partial"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(slices.Sorted(maps.Keys(app.Assistants)), ","); got != "badhook,direct,ok,team.lead" {
		t.Errorf("loaded %s (badhook's errors are in its hook code, which the hook engine finds)", got)
	}
	want := map[string]string{
		"badconn":          `assistants/badconn/package.yao:1:44: connector "broken.typo" does not load: connectors/broken/typo.conn.yao has errors`,
		"badfield":         `assistants/badfield/package.yao:4:16: unknown field "temprature" in options (did you mean "temperature"?)`,
		"badmcp":           `assistants/badmcp/package.yao:1:73: MCP server "broken" does not load: its file has errors`,
		"boxed":            `assistants/boxed/package.yao:2:104: mcp server github (mcps/github.mcp.yao): env GITHUB_TOKEN reads $ENV.GITHUB_TOKEN, a credential`,
		"team.lead.helper": `assistants/team/lead/helper/package.yao:1:93: sandbox.timeout: invalid duration "soon"`,
		"twice":            `assistants/twice: both package.json and package.yao: keep one package file`,
	}
	for id, first := range want {
		f := app.Failed[id]
		if f == nil || len(f.Problems) != 1 || !strings.HasPrefix(f.Problems[0].String(), first) || f.Serving() {
			t.Errorf("failed %s = %+v, want one error %q", id, f, first)
		}
	}
	if len(app.Failed) != len(want) {
		t.Errorf("failed: %v", slices.Sorted(maps.Keys(app.Failed)))
	}
	if f := app.Failed["badfield"]; f.Name != "Misspelt" || f.Dir != "assistants/badfield" {
		t.Errorf("badfield = %+v", f)
	}
	// The connector's and the MCP server's own errors are the app's, not
	// only the assistants'.
	var files []string
	for _, p := range app.Errors {
		files = append(files, p.File)
	}
	for _, f := range []string{"connectors/broken/typo.conn.yao", "mcps/broken.mcp.yao"} {
		if !slices.Contains(files, f) {
			t.Errorf("errors lack %s: %v", f, files)
		}
	}
	// Load is strict: any error fails it.
	if _, err := Load(filepath.Join(appsDir, "bad-partial")); err == nil {
		t.Error("Load accepted an app with errors")
	}
	// An error of the app's own settings fails Open too.
	if _, err := Open(filepath.Join(appsDir, "bad-syntax")); err == nil || !strings.Contains(err.Error(), "app.jsonc") {
		t.Errorf("Open of a broken app.jsonc: %v", err)
	}
}

// fileLevel reports problems that concern a whole file or folder.
func fileLevel(msg string) bool {
	for _, s := range []string{"rename", "no package.yao", "invalid assistant id", "no SKILL.md", "also defined by", "cannot derive an id", "missing:", "keep one package file"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func TestLoadErrorText(t *testing.T) {
	t.Parallel()
	var ps []Problem
	for i := range 12 {
		ps = append(ps, Problem{File: "a", Line: i + 1, Col: 1, Msg: "m"})
	}
	e := &LoadError{Root: "/app", Problems: ps}
	s := e.Error()
	if !strings.HasPrefix(s, "app /app: 12 problems\n\ta:1:1: m") || !strings.HasSuffix(s, "... and 2 more (run agentbox check)") {
		t.Fatalf("Error() = %q", s)
	}
	if (Problem{File: "f", Msg: "m"}).String() != "f: m" {
		t.Fatal("file-level problem format")
	}
	if _, err := Load("/does/not/exist"); err == nil || errors.As(err, new(*LoadError)) {
		t.Fatalf("missing folder: %v", err)
	}
}

func TestResolve(t *testing.T) {
	const secret = "sk-test-NEVER-SHOWN-42"
	t.Setenv("AB_TEST_KEY", secret)
	t.Setenv("AB_TEST_HOST", "https://llm.example")
	c := &Connector{ID: "x.y", Type: TypeAnthropic, File: "connectors/x/y.conn.yao",
		Options: ConnectorOptions{Host: "$ENV.AB_TEST_HOST", Key: "$ENV.AB_TEST_KEY", Model: "m", Extra: map[string]any{"a": 1.0}}}
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Key != secret || r.Host != "https://llm.example" || r.Model != "m" || r.Extra["a"] != 1.0 {
		t.Fatalf("resolved: %s", r)
	}
	r.Extra["a"] = 2.0
	if c.Options.Extra["a"] != 1.0 {
		t.Fatal("Extra is shared with the connector")
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&logBuf, nil)).Info("conn", "resolved", r, "options", c.Options)
	lit := &Connector{ID: "lit", Options: ConnectorOptions{Key: secret}}
	for _, s := range []string{r.String(), fmt.Sprintf("%v %+v %#v", r, r, r), fmt.Sprintf("%v %+v %#v", c, *c, c.Options), fmt.Sprint(*lit), logBuf.String()} {
		if strings.Contains(s, secret) {
			t.Fatalf("key shown: %s", s)
		}
	}

	c.Options.Key = "$ENV.AB_TEST_MISSING"
	c.Options.Model = "$ENV.AB_TEST_EMPTY"
	t.Setenv("AB_TEST_EMPTY", "")
	_, err = c.Resolve()
	if err == nil || !errors.Is(err, ErrEnvNotSet) {
		t.Fatalf("missing variable: %v", err)
	}
	for _, want := range []string{"AB_TEST_MISSING", "AB_TEST_EMPTY", "connectors/x/y.conn.yao", "x.y"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}

	s := &MCPServer{ID: "fs", File: "assistants/a/mcps/fs.mcp.yao", Env: map[string]string{"TOKEN": "$ENV.AB_TEST_KEY", "PLAIN": "v"},
		Headers: map[string]string{"Authorization": "$ENV.AB_TEST_NOPE"}}
	env, err := s.ResolveEnv()
	if err != nil || env["TOKEN"] != secret || env["PLAIN"] != "v" {
		t.Fatalf("env: %v %v", env, err)
	}
	if _, err := s.ResolveHeaders(); err == nil || !strings.Contains(err.Error(), "AB_TEST_NOPE") || !strings.Contains(err.Error(), s.File) {
		t.Fatalf("headers: %v", err)
	}

	cfg := &AppConfig{Auth: AuthConfig{Tokens: []TokenConfig{{Token: "$ENV.AB_TEST_KEY", User: "alice"}, {Token: "plain", User: "bob"}}}}
	toks, err := cfg.ResolveTokens()
	if err != nil || toks[secret] != "alice" || toks["plain"] != "bob" {
		t.Fatalf("tokens: %v %v", toks, err)
	}
}

func TestParseMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"4g", 4 << 30, ""}, {"512m", 512 << 20, ""}, {"512M", 512 << 20, ""}, {"4gb", 4 << 30, ""}, {"1.5g", 3 << 29, ""},
		{"65536k", 64 << 20, ""}, {"64g", 64 << 30, ""},
		{"4x", 0, "invalid size"}, {"", 0, "invalid size"}, {"g", 0, "invalid size"}, {"-1g", 0, "invalid size"},
		{"63m", 0, "out of range"}, {"65g", 0, "out of range"}, {"4096", 0, "out of range"},
	}
	for _, tt := range tests {
		got, err := ParseMemory(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseRetention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true}, {"36h", 36 * time.Hour, true}, {"1d12h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true}, {"7x", 0, false}, {"d", 0, false}, {"1d1x", 0, false},
	}
	for _, tt := range tests {
		got, err := parseRetention(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseRetention(%q) = %s, %v", tt.in, got, err)
		}
	}
}

func TestDecodeJSONC(t *testing.T) {
	t.Parallel()
	type inner struct {
		N int     `json:"n"`
		F float64 `json:"f"`
	}
	type target struct {
		S   string            `json:"s"`
		B   bool              `json:"b"`
		L   []string          `json:"l"`
		M   map[string]string `json:"m"`
		In  *inner            `json:"in"`
		Any any               `json:"any"`
		//lint:ignore U1000 an unexported field, which the decoder must not offer as a known one
		skip int
	}
	tests := []struct {
		src  string
		want string
	}{
		{`{"s": "x", "b": true, "l": ["a"], "m": {"k": "v"}, "in": {"n": 3, "f": 1.5}, "any": [1, {"a": null}],}`, ""},
		{"// c\n{/* c */ \"s\": null}", ""},
		{`{"s": 1}`, "f:1:7: s: want a string, got a number"},
		{`{"in": {"n": "3"}}`, "f:1:14: in.n: want an integer, got a string"},
		{`{"in": {"n": 1e400}}`, "f:1:14: in.n: want an integer, got 1e400"},
		{`{"in": {"f": 1e400}}`, "f:1:14: in.f: number 1e400 is out of range"},
		{`{"l": [1, "a", true]}`, "f:1:8: l[0]: want a string, got a number\nf:1:16: l[2]: want a string, got a boolean"},
		{`{"m": {"k": 1}}`, "f:1:13: m.k: want a string, got a number"},
		{`{"in": {"nn": 1}}`, `f:1:9: unknown field "nn" in in (did you mean "n"?)`},
		{`{"zzzzzz": 1}`, `f:1:2: unknown field "zzzzzz" (known: any, b, in, l, m, s)`},
		{`[]`, "f:1:1: file: want an object, got a list"},
		{`{"s": "a", "s": "b"}`, `f:1:12: duplicate field "s"`},
		{"{\n  \"s\": \"a\"\n  \"b\": true\n}", "f:3:3: syntax error: invalid character '\"' after object value (expecting ',' or '}')"},
		{"{\"s\": \"abc", "f:1:11: syntax error: unexpected end of file (a missing } or ], or an unclosed string?)"},
		{"  \n", "f:1:1: file is empty: want a JSON object"},
		{strings.Repeat("[", 200), "f:1:101: nesting is deeper than 100 levels"},
	}
	for _, tt := range tests {
		var v target
		d := decodeJSONC("f", []byte(tt.src), &v)
		var got []string
		for _, p := range d.probs {
			got = append(got, p.String())
		}
		if g := strings.Join(got, "\n"); g != tt.want {
			t.Errorf("decode %q:\n got %s\nwant %s", tt.src, g, tt.want)
		}
	}
}

// TestPackageOptions: package.yao "options" decode strictly into
// chat.ModelOptions, with positioned problems.
func TestPackageOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want string
	}{
		{`{"options": {"temperature": 0.3, "max_tokens": 1024, "stop": "END", "tools": [], /* c */ "response_format": {"type": "json_object"}}}`, ""},
		{`{"options": {"temprature": 1}}`, `f:1:14: unknown field "temprature" in options (did you mean "temperature"?)`},
		{`{"options": {"stop": 3}}`, "f:1:22: options.stop: want a string or a list of strings, got a number"},
		{`{"options": {"max_tokens": "lots"}}`, "f:1:28: options.max_tokens: want an integer, got a string"},
		{`{"options": {"connector": "x"}}`, `f:1:14: unknown field "connector" in options (known: audio, frequency_penalty, logit_bias, max_completion_tokens, max_tokens, model, n, parallel_tool_calls, presence_penalty, reasoning_effort, response_format, seed, stop, stream, temperature, tool_choice, tools, top_p, user)`},
	}
	for _, tt := range tests {
		var raw rawPackage
		d := decodeJSONC("f", []byte(tt.src), &raw)
		var got []string
		for _, p := range d.probs {
			got = append(got, p.String())
		}
		if g := strings.Join(got, "\n"); g != tt.want {
			t.Errorf("decode %q:\n got %s\nwant %s", tt.src, g, tt.want)
		}
	}
	var raw rawPackage
	if d := decodeJSONC("f", []byte(`{"options": {"stop": ["a", "b"], "seed": 7}}`), &raw); len(d.probs) != 0 ||
		!slices.Equal(raw.Options.Stop, []string{"a", "b"}) || raw.Options.Seed == nil || *raw.Options.Seed != 7 {
		t.Errorf("options = %+v, problems %v", raw.Options, d.probs)
	}
}

// FuzzDecodeJSONC: the JSONC loader never panics, and every problem it
// reports is positioned inside the input.
func FuzzDecodeJSONC(f *testing.F) {
	for _, s := range []string{
		`{"name": "x", "connector": "c", "sandbox": {"command": "claude", "max_cpu": 2, "arguments": {"max_turns": 3}}}`,
		"// c\n{\"mcp\": {\"servers\": [{\"server_id\": \"a\", \"tools\": [\"t\"]}]},}",
		`{"options": {"a": [1, {"b": null}], "c": 1e999}}`,
		`{"sandbox": "x"`, `[[[`, `{"a"`, "/* unterminated",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw rawPackage
		d := decodeJSONC("f", data, &raw)
		lines := bytes.Count(data, []byte("\n")) + 1
		for _, p := range d.probs {
			if p.Line < 1 || p.Col < 1 || p.Line > lines || p.File != "f" || p.Msg == "" {
				t.Fatalf("bad problem %+v for %q", p, data)
			}
		}
		// Validation on top of a decode must not panic either.
		if !d.broken && raw.Sandbox != nil {
			app := &App{Config: &AppConfig{}, Agent: &AgentSettings{}}
			l := &loader{connIDs: map[string]bool{}}
			l.loadSandbox(d, &Assistant{ID: "a", Dir: t.TempDir()}, raw.Sandbox, app, "")
		}
	})
}

// FuzzParsePrompts: prompts.yml parsing never panics and positions every
// problem.
func FuzzParsePrompts(f *testing.F) {
	for _, s := range []string{"- role: system\n  content: hi\n", "- role: x\n", "a: [", "- &a [*a]", "- {role: user, content: {a: b}}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, probs := parsePrompts("p.yml", data)
		for _, p := range probs {
			if p.Line < 1 || p.Col < 1 || p.File != "p.yml" {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

func TestResolveTokens(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_TOKEN", "  s3cret-from-env  ")
	t.Setenv("AGENTBOX_TEST_EMPTY", "")
	cfg := &AppConfig{Auth: AuthConfig{Tokens: []TokenConfig{
		{Token: "$ENV.AGENTBOX_TEST_TOKEN", User: "alice"},
		{Token: "literal-token", User: "bob", Team: "acme"},
	}}}
	got, teams, err := cfg.ResolveIdentities()
	if err != nil {
		t.Fatal(err)
	}
	if got["s3cret-from-env"] != "alice" || got["literal-token"] != "bob" || len(got) != 2 {
		t.Errorf("ResolveIdentities users = %v", got)
	}
	if teams["literal-token"] != "acme" || len(teams) != 1 {
		t.Errorf("ResolveIdentities teams = %v", teams)
	}
	bad := []struct {
		name   string
		tokens []TokenConfig
		want   string
	}{
		{"unset var", []TokenConfig{{Token: "$ENV.AGENTBOX_TEST_UNSET_VAR", User: "a"}}, "auth.tokens[0] (user a): AGENTBOX_TEST_UNSET_VAR"},
		{"empty var", []TokenConfig{{Token: "$ENV.AGENTBOX_TEST_EMPTY", User: "a"}}, "AGENTBOX_TEST_EMPTY"},
		{"no var name", []TokenConfig{{Token: "$ENV.", User: "a"}}, "invalid environment reference"},
		{"empty token", []TokenConfig{{Token: " ", User: "a"}}, "auth.tokens[0] (user a): token is empty"},
		{"bad user", []TokenConfig{{Token: "literal-token", User: "a/b"}}, "auth.tokens[0]: "},
		{"no user", []TokenConfig{{Token: "literal-token"}}, "auth.tokens[0]: "},
		{"bad team", []TokenConfig{{Token: "literal-token", User: "a", Team: "../t"}}, "auth.tokens[0]: team"},
		{"duplicate", []TokenConfig{{Token: "literal-token", User: "a"}, {Token: "$ENV.AGENTBOX_TEST_TOKEN", User: "b"}, {Token: "literal-token", User: "c"}}, "auth.tokens[2]: same token as auth.tokens[0]"},
	}
	for _, tt := range bad {
		cfg := &AppConfig{Auth: AuthConfig{Tokens: tt.tokens}}
		_, err := cfg.ResolveTokens()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v, want %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "literal-token") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error leaks the token: %v", tt.name, err)
		}
	}
}
