package opencode

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// Model, Skills and MCPServers are what the executor configured,
	// reported in the session event (the CLI reports none of them).
	Model              string
	Skills, MCPServers []string
	// Monitor is told when the last step finishes.
	Monitor agentcli.Monitor
	// FailureThreshold is the repeated_tool_failure threshold
	// (agentcli.DefaultFailureThreshold when 0).
	FailureThreshold int
	// PermissionMode is the turn's permission_mode, named when opencode
	// refuses a call the mode leaves to a user's approval.
	PermissionMode string
}

// rejected is how opencode answers a call its permission rules leave to
// ask when nobody can answer (`opencode run` without --auto rejects it,
// then ends the session without a result).
const rejected = "rejected permission"

// Parser turns `opencode run --format json` output into chat events: the
// first event's sessionID is the session, text and reasoning parts text
// and thinking, tool parts tool calls with their results, step_finish the
// usage (a step that does not end in tool calls ends the turn) and error
// the turn's error.
type Parser struct {
	c       *agentcli.Chat
	opts    ParserOptions
	session bool
	denied  string // the tool of the last call opencode refused
}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	return &Parser{opts: opts, c: agentcli.NewChat(emit, agentcli.ChatOptions{IDPrefix: "oc", Monitor: opts.Monitor,
		FailureThreshold: opts.FailureThreshold})}
}

// Parse reads the stream to its end (a recorded transcript).
func (p *Parser) Parse(r io.Reader) error { return agentcli.ReadLines(r, agentcli.ChatLines, p.Line) }

// Line handles one line of the stream (agentcli.Parser).
func (p *Parser) Line(line agentcli.Line) { p.c.Line(line, p.line) }

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// mcpUnavailable is the warning opencode logs (--print-logs) for an MCP
// server that did not connect.
var mcpUnavailable = regexp.MustCompile(`message="server unavailable" key=(\S+)(?:.* status=(\S+))?`)

// Stderr raises mcp_server_failed for every MCP server opencode's log
// on stderr says is unavailable (agentcli.StderrReader).
func (p *Parser) Stderr(tail string) { mcpFailures(p.c, tail) }

// mcpFailures raises mcp_server_failed for every MCP server opencode's
// log says is unavailable.
func mcpFailures(c *agentcli.Chat, tail string) {
	for _, m := range mcpUnavailable.FindAllStringSubmatch(tail, -1) {
		c.MCPFailed(strings.Trim(m[1], `"`), cmp.Or(m[2], "failed"), "")
	}
}

// Close ends open messages and returns the outcome. A run that ended
// without a result after opencode refused a call fails with why.
func (p *Parser) Close() *agentcli.StreamOutcome {
	if o := p.c.Outcome(); !o.GotResult && o.Err == nil && p.denied != "" {
		p.c.Fail(chat.ErrExecutor, fmt.Sprintf("opencode stopped after refusing the %s call: %s", p.denied, p.remedy()))
	}
	return p.c.Close()
}

// remedy says why a call was refused and what to set.
func (p *Parser) remedy() string {
	mode := cmp.Or(p.opts.PermissionMode, "default")
	return fmt.Sprintf("permission_mode %s leaves it to a user's approval, which a headless run cannot give; set permission_mode bypassPermissions (or auto) to allow it", mode)
}

func (p *Parser) line(line string) {
	r := gjson.GetMany(line, "type", "sessionID", "part")
	if !p.session && r[1].String() != "" {
		p.session = true
		p.c.Session(agentcli.Session{ID: agentcli.String(r[1]), Model: p.opts.Model, Cwd: "/workspace",
			Skills: append([]string{}, p.opts.Skills...), MCPServers: agentcli.Configured(p.opts.MCPServers)})
	}
	part := r[2]
	switch r[0].String() {
	case "step_start":
	case "text":
		p.c.Text(agentcli.String(part.Get("text")))
		p.c.EndText()
	case "reasoning":
		p.c.Thinking(agentcli.String(part.Get("text")))
		p.c.EndThinking()
	case "tool_use":
		f := gjson.GetMany(part.Raw, "callID", "tool", "state.status", "state.input", "state.output", "state.error")
		id, name := agentcli.String(f[0]), agentcli.String(f[1])
		in := f[3].Raw
		if !f[3].IsObject() {
			in = "{}"
		}
		p.c.ToolCall(id, name, "", chat.RawJSON(in))
		switch f[2].String() {
		case "completed":
			p.c.ToolResult(id, name, f[4].String(), false)
		case "error":
			msg := cmp.Or(f[5].String(), f[4].String())
			p.c.ToolResult(id, name, msg, true)
			if strings.Contains(msg, rejected) {
				p.denied = name
				p.c.Denied(id, name, cmp.Or(p.opts.PermissionMode, "default"), "opencode refused the "+name+" call: "+p.remedy())
			}
		}
	case "step_finish":
		f := gjson.GetMany(part.Raw, "reason", "tokens", "cost")
		t := f[1]
		p.c.AddUsage(chat.Usage{
			InputTokens:         t.Get("input").Int(),
			OutputTokens:        t.Get("output").Int(),
			CacheReadTokens:     t.Get("cache.read").Int(),
			CacheCreationTokens: t.Get("cache.write").Int(),
			CostUSD:             f[2].Float(),
			Turns:               1,
		})
		if f[0].String() != "tool-calls" {
			p.c.Result("success")
		}
	case "error":
		f := gjson.GetMany(line, "error.name", "error.data.message", "error.message", "error.data.statusCode")
		msg := cmp.Or(agentcli.String(f[1]), agentcli.String(f[2]), agentcli.String(f[0]), "the CLI reported an error")
		p.c.Fail(agentcli.StatusCode(int(f[3].Int()), msg), msg)
		p.c.Result("error")
	default:
		p.c.Skip()
	}
}
