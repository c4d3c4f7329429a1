package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
)

// A direct assistant's tools: the MCP servers of its turn (package.yao
// mcp.servers, or the Create hook's mcp_servers) of every transport,
// offered to the model, with the tool loop on the server, the way Yao runs
// them for an assistant without a sandbox (agent/assistant/{mcp,loop,
// agent}.go): tools named <server id, '.' as '_'>__<tool>, at most 20;
// the examples of process tools as a system message after the prompts;
// the calls of a round run at once; each result goes back to the model as
// a tool message (an error as "Error: ..."), until the model answers
// without calling a tool, for at most mcp.options.max_turn rounds; then
// one more call without tools answers from what the tools returned (Yao's
// loop_fallback assistant). With a Next hook, or mcp.options.tool_loop
// false, the first round's results are the turn's tools and no round
// follows (as in Yao).

// Bounds of the server's tool loop.
const (
	// maxServerTools is Yao's MaxMCPTools: the tools offered past it are
	// left out (a notice says so).
	maxServerTools = 20
	// toolParallel bounds the calls of a round that run at once.
	toolParallel = 8
	// mcpConnectTimeout bounds starting or reaching an MCP server and
	// listing its tools.
	mcpConnectTimeout = 30 * time.Second
	// maxMCPStderr bounds what is kept of a stdio server's stderr for the
	// log.
	maxMCPStderr = 4 << 10
)

// NoticeToolsUnavailable is the code of the notice sent when an MCP
// server of a direct assistant's turn cannot be reached (or lists no
// tools): the turn runs without its tools, as Yao skips it.
const NoticeToolsUnavailable = "tools_unavailable"

// serverTool is one tool the server runs for a direct assistant's model.
type serverTool struct {
	// name is what the model sees (Yao's MCPToolName).
	name string
	// server and tool are the server's id as the assistant names it and
	// the tool's own name.
	server, tool string
	description  string
	// schema is the tool's input schema, sent as it is; resolved validates
	// arguments against it (nil: not validated).
	schema   json.RawMessage
	resolved *jsonschema.Resolved
	timeout  time.Duration
	// run calls the tool with the validated arguments; it returns the
	// result's MCP content and whether the server marked it an error, or
	// an error when the call itself failed.
	run func(ctx context.Context, args map[string]any) (content []json.RawMessage, isError bool, err error)
}

// toolbox is a direct turn's tools, offered in order.
type toolbox struct {
	tools  []*serverTool
	byName map[string]*serverTool
	// samples is Yao's system message with the process tools' examples
	// ("" when none has any).
	samples string
	// sessions are the MCP client sessions of the turn, closed when it
	// ends.
	sessions []*mcp.ClientSession
}

func (tb *toolbox) empty() bool { return tb == nil || len(tb.tools) == 0 }

// close ends the turn's MCP sessions (a stdio server's process with it).
func (tb *toolbox) close() {
	if tb == nil {
		return
	}
	for _, s := range tb.sessions {
		_ = s.Close()
	}
	tb.sessions = nil
}

// spec is the tools as the model is offered them: OpenAI's function tools
// (the Anthropic connector maps them).
func (tb *toolbox) spec() json.RawMessage {
	defs := make([]map[string]any, len(tb.tools))
	for i, t := range tb.tools {
		defs[i] = map[string]any{"type": "function", "function": map[string]any{
			"name": t.name, "description": t.description, "parameters": t.schema,
		}}
	}
	b, _ := json.Marshal(defs)
	return b
}

// names are the tools' names, for the connector's events.
func (tb *toolbox) names() map[string]bool {
	out := make(map[string]bool, len(tb.tools))
	for _, t := range tb.tools {
		out[t.name] = true
	}
	return out
}

// mcpToolName is Yao's name of a server's tool for the model
// (agent/assistant/mcp.go MCPToolName).
func mcpToolName(serverID, tool string) string {
	return strings.ReplaceAll(serverID, ".", "_") + "__" + tool
}

// directTools gathers the tools of a direct turn's MCP servers (run's, the
// Create hook's choice applied): a process server's from its mapping, a
// stdio, http or sse server's from the server itself, reached now. A
// server that cannot be reached is left out with a notice, as Yao skips
// it. The caller closes the toolbox.
func (t *turn) directTools(ctx context.Context, app *assistant.App, run *assistant.Assistant, hc *jsapi.Context) *toolbox {
	tb := &toolbox{byName: map[string]*serverTool{}}
	if len(run.MCP) == 0 {
		return tb
	}
	scripts := t.p.hooks.Scripts(app)
	var samples strings.Builder
	type listed struct {
		tools []*serverTool
		err   error
	}
	// Servers are reached at once; their tools are offered in
	// package.yao's order.
	lists := make([]listed, len(run.MCP))
	var wg sync.WaitGroup
	for i, ref := range run.MCP {
		def := run.MCPServers[ref.ServerID]
		if def == nil {
			continue
		}
		if def.Transport == "process" {
			lists[i].tools = processTools(ref, def, scripts, hc, t.p.log)
			continue
		}
		wg.Go(func() {
			sess, tools, err := t.mcpTools(ctx, app, ref, def)
			if sess != nil {
				t.mu.Lock()
				tb.sessions = append(tb.sessions, sess)
				t.mu.Unlock()
			}
			lists[i] = listed{tools, err}
		})
	}
	wg.Wait()
	for i, ref := range run.MCP {
		l := lists[i]
		if l.err != nil {
			t.p.log.Warn("MCP server not reached: its tools are not offered", "assistant", run.ID, "server", ref.ServerID, "error", l.err)
			chat.Notice(t.emit, t.nextID("notice"), NoticeToolsUnavailable,
				fmt.Sprintf("MCP server %s is not available: %v; this turn runs without its tools", ref.ServerID, l.err))
			continue
		}
		for _, st := range l.tools {
			if len(tb.tools) >= maxServerTools {
				t.p.log.Warn("MCP tools past the limit are not offered", "assistant", run.ID, "limit", maxServerTools, "tool", st.name)
				chat.Notice(t.emit, t.nextID("notice"), NoticeToolsUnavailable,
					fmt.Sprintf("the model is offered at most %d tools (as in Yao): %s and the tools after it are left out", maxServerTools, st.name))
				tb.samples = samples.String()
				return tb
			}
			if _, dup := tb.byName[st.name]; dup {
				t.p.log.Warn("MCP tool offered twice under one name: the first is kept", "assistant", run.ID, "tool", st.name)
				continue
			}
			tb.tools = append(tb.tools, st)
			tb.byName[st.name] = st
			if def := run.MCPServers[ref.ServerID]; def.Process != nil {
				if pt, ok := def.Process.Tool(st.tool); ok {
					writeSamples(&samples, st.name, st.description, pt.Samples)
				}
			}
		}
	}
	tb.samples = samples.String()
	return tb
}

// allowed reports whether ref lets the model use tool (an empty filter
// allows every tool).
func allowed(ref assistant.MCPRef, tool string) bool {
	return len(ref.Tools) == 0 || slices.Contains(ref.Tools, tool)
}

// processTools are a process server's tools: each runs its process of the
// app's scripts with the tool's arguments and the request's ctx (Yao
// passes the agent's context after the arguments).
func processTools(ref assistant.MCPRef, def *assistant.MCPServer, scripts *jsapi.Scripts, hc *jsapi.Context, log *slog.Logger) []*serverTool {
	var out []*serverTool
	for _, pt := range def.Process.Tools {
		if !allowed(ref, pt.Name) {
			continue
		}
		st := &serverTool{name: mcpToolName(ref.ServerID, pt.Name), server: ref.ServerID, tool: pt.Name,
			description: pt.Description, schema: pt.InputSchema, resolved: resolveSchema(pt.InputSchema, log)}
		proc, name := pt.Process, pt.Name
		st.run = func(ctx context.Context, args map[string]any) ([]json.RawMessage, bool, error) {
			v, err := scripts.Run(ctx, hc, proc, []any{args})
			if err != nil {
				if ctx.Err() != nil {
					return nil, false, ctx.Err()
				}
				// gou's process client answers a failed process as an error
				// result (mcp/process/tools.go).
				return textContent(fmt.Sprintf("Error executing tool %s: %v", name, err)), true, nil
			}
			return processContent(v), false, nil
		}
		out = append(out, st)
	}
	return out
}

// processContent is a process's result as MCP content, as gou's process
// client makes it (convertToToolContent): a string as text, anything else
// as JSON text.
func processContent(v any) []json.RawMessage {
	switch x := v.(type) {
	case nil:
		return textContent("")
	case string:
		return textContent(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return textContent(fmt.Sprint(v))
	}
	return textContent(string(b))
}

// textContent is one text part of MCP content, its fields in the MCP
// order (Yao's errors quote it).
func textContent(s string) []json.RawMessage {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", s})
	return []json.RawMessage{b}
}

// resolveSchema resolves an input schema for validating arguments (nil
// when it cannot be: the arguments then go as they are).
func resolveSchema(raw json.RawMessage, log *slog.Logger) *jsonschema.Resolved {
	if len(raw) == 0 {
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		log.Warn("tool input schema not usable for validation", "error", err)
		return nil
	}
	r, err := s.Resolve(nil)
	if err != nil {
		log.Warn("tool input schema not usable for validation", "error", err)
		return nil
	}
	return r
}

// mcpTools reaches a stdio, http or sse server for a direct turn and lists
// its tools.
func (t *turn) mcpTools(ctx context.Context, app *assistant.App, ref assistant.MCPRef, def *assistant.MCPServer) (*mcp.ClientSession, []*serverTool, error) {
	sess, transport, err := connectMCP(ctx, app, def)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
	defer cancel()
	var out []*serverTool
	for tool, err := range sess.Tools(cctx, nil) {
		if err != nil {
			return sess, nil, stdioError(fmt.Errorf("list tools: %w", err), transport)
		}
		if !allowed(ref, tool.Name) {
			continue
		}
		schema, _ := json.Marshal(tool.InputSchema)
		st := &serverTool{name: mcpToolName(ref.ServerID, tool.Name), server: ref.ServerID, tool: tool.Name,
			description: tool.Description, schema: schema, resolved: resolveSchema(schema, t.p.log), timeout: def.Timeout}
		name := tool.Name
		st.run = func(ctx context.Context, args map[string]any) ([]json.RawMessage, bool, error) {
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				return nil, false, err
			}
			content := make([]json.RawMessage, 0, len(res.Content))
			for _, c := range res.Content {
				b, err := json.Marshal(c)
				if err == nil {
					content = append(content, b)
				}
			}
			return content, res.IsError, nil
		}
		out = append(out, st)
	}
	return sess, out, nil
}

// connectMCP reaches a stdio, http or sse server. A stdio server runs on
// this host (as Yao runs it), in the app folder, with its env's $ENV
// values resolved; an http or sse server is reached with its headers. The
// session lives on ctx (the turn's); the caller closes it.
func connectMCP(ctx context.Context, app *assistant.App, def *assistant.MCPServer) (*mcp.ClientSession, mcp.Transport, error) {
	var transport mcp.Transport
	switch def.Transport {
	case "stdio":
		cmd := exec.Command(def.Command, def.Args...)
		cmd.Dir = app.Root
		env, err := mcpEnv(def)
		if err != nil {
			return nil, nil, err
		}
		cmd.Env = env
		cmd.Stderr = &tailWriter{max: maxMCPStderr}
		transport = &mcp.CommandTransport{Command: cmd}
	case "http", "sse":
		h := http.Header{}
		for _, k := range slices.Sorted(maps.Keys(def.Headers)) {
			v, err := assistant.ResolveValue(def.Headers[k])
			if err != nil {
				return nil, nil, fmt.Errorf("header %s: %w", k, err)
			}
			h.Set(k, v)
		}
		client := &http.Client{Transport: headerTransport{h: h, rt: http.DefaultTransport}}
		if def.Transport == "sse" {
			transport = &mcp.SSEClientTransport{Endpoint: def.URL, HTTPClient: client}
		} else {
			transport = &mcp.StreamableClientTransport{Endpoint: def.URL, HTTPClient: client}
		}
	default:
		return nil, nil, fmt.Errorf("transport %q", def.Transport)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbox", Version: "1"}, nil)
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, stdioError(err, transport)
	}
	return sess, transport, nil
}

// mcpEnv is a stdio server's environment on the host: the server's own
// variables ($ENV values resolved) over a minimal base, not the server
// process's whole environment.
func mcpEnv(def *assistant.MCPServer) ([]string, error) {
	env := hostBaseEnv()
	for _, k := range slices.Sorted(maps.Keys(def.Env)) {
		v, err := assistant.ResolveValue(def.Env[k])
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// stdioError adds the end of a stdio server's stderr to err.
func stdioError(err error, transport mcp.Transport) error {
	if ct, ok := transport.(*mcp.CommandTransport); ok {
		if tw, ok := ct.Command.Stderr.(*tailWriter); ok {
			if tail := strings.TrimSpace(tw.String()); tail != "" {
				return fmt.Errorf("%w (stderr: %s)", err, tail)
			}
		}
	}
	return err
}

// headerTransport adds an MCP server's headers to each request.
type headerTransport struct {
	h  http.Header
	rt http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.rt.RoundTrip(r)
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = w.buf[over:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

var _ io.Writer = (*tailWriter)(nil)

// writeSamples adds a tool's examples to Yao's samples message
// (agent/assistant/mcp.go buildMCPTools): at most three per tool, inputs
// and outputs as Go prints them.
func writeSamples(b *strings.Builder, name, description string, samples []assistant.ToolSample) {
	if len(samples) == 0 {
		return
	}
	if b.Len() == 0 {
		b.WriteString("\n\n## MCP Tool Usage Examples\n\n")
		b.WriteString("The following examples demonstrate how to use MCP tools correctly:\n\n")
	}
	fmt.Fprintf(b, "### %s\n\n", name)
	if description != "" {
		fmt.Fprintf(b, "**Description**: %s\n\n", description)
	}
	for i, s := range samples {
		if i >= 3 {
			break
		}
		fmt.Fprintf(b, "**Example %d", i+1)
		if s.Name != "" {
			fmt.Fprintf(b, " - %s", s.Name)
		}
		b.WriteString("**:\n")
		if d, ok := s.Metadata["description"].(string); ok && d != "" {
			fmt.Fprintf(b, "- Description: %s\n", d)
		}
		if s.Input != nil {
			fmt.Fprintf(b, "- Input: `%v`\n", s.Input)
		}
		if s.Output != nil {
			fmt.Fprintf(b, "- Output: `%v`\n", s.Output)
		}
		b.WriteString("\n")
	}
}

// hostEnvPassed are the variables of the server's environment a stdio MCP
// server on the host gets besides its own env: what a program needs to run
// (find commands, a home for caches, the locale), not the server's
// credentials.
var hostEnvPassed = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT"}

func hostBaseEnv() []string {
	var env []string
	for _, k := range hostEnvPassed {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// appendTools is the tools a model is offered: the options' own (a JSON
// array) followed by the server's.
func appendTools(own, server json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(own)) == 0 || bytes.Equal(bytes.TrimSpace(own), []byte("null")) {
		return server, nil
	}
	var a, b []json.RawMessage
	if err := json.Unmarshal(own, &a); err != nil {
		return nil, fmt.Errorf("want a list of tools: %w", err)
	}
	if err := json.Unmarshal(server, &b); err != nil {
		return nil, err
	}
	return json.Marshal(append(a, b...))
}

// processHostTools are the tools of the process MCP servers a sandboxed
// assistant lists, as the bridge's host tools: the agent calls
// mcp__agentbox__<server>__<tool>, which runs the tool's process on the
// host with the request's ctx, as a direct assistant's model would. The
// turn at hand (a kept chat's later turns too) decides which of them may
// run: a Create hook's mcp_servers leaves the others answering an error.
func (t *turn) processHostTools(app *assistant.App, a *assistant.Assistant) []bridge.Tool {
	scripts := t.p.hooks.Scripts(app)
	cur, hcRef := t.cur, t.hookCtx
	var out []bridge.Tool
	for _, ref := range a.MCP {
		def := a.MCPServers[ref.ServerID]
		if def == nil || def.Process == nil {
			continue
		}
		for _, pt := range def.Process.Tools {
			if !allowed(ref, pt.Name) {
				continue
			}
			name := mcpToolName(ref.ServerID, pt.Name)
			if !validHostTool(name) {
				t.p.log.Warn("process tool not offered to the sandbox: its name is too long or not a tool name", "assistant", a.ID, "tool", name)
				continue
			}
			server, tool, proc := ref.ServerID, pt.Name, pt.Process
			out = append(out, bridge.Tool{
				Name:        name,
				Description: pt.Description,
				InputSchema: pt.InputSchema,
				Handler: func(ctx context.Context, raw json.RawMessage) (any, error) {
					if at := cur.Load(); at != nil && !at.offers(server, tool) {
						return nil, fmt.Errorf("tool %s is not offered in this turn (the Create hook chose other MCP servers)", name)
					}
					var args any = map[string]any{}
					if len(raw) > 0 {
						if err := json.Unmarshal(raw, &args); err != nil {
							return nil, fmt.Errorf("failed to parse arguments: %w", err)
						}
					}
					v, err := scripts.Run(ctx, hcRef.Load(), proc, []any{args})
					if err != nil {
						return nil, fmt.Errorf("Error executing tool %s: %v", tool, err)
					}
					return v, nil
				},
			})
		}
	}
	return out
}

// validHostTool reports whether name fits the bridge's tool names.
func validHostTool(name string) bool {
	if len(name) == 0 || len(name) > 48 {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

// offers reports whether the turn's MCP servers (after its Create hook)
// include server's tool.
func (t *turn) offers(server, tool string) bool {
	run := t.mcpRun.Load()
	if run == nil {
		run = t.asst
	}
	for _, ref := range run.MCP {
		if ref.ServerID == server {
			return allowed(ref, tool)
		}
	}
	return false
}
