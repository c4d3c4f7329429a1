package gemini

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

// NoticeCLIWarning is a warning the CLI reported in its stream (an error
// event of severity warning, or one that did not end the turn).
const NoticeCLIWarning = "cli_warning"

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// Skills and MCPServers are what the executor configured, reported in
	// the session event (the CLI's init event lists neither).
	Skills, MCPServers []string
	// Monitor is told when the result arrives.
	Monitor agentcli.Monitor
	// FailureThreshold is the repeated_tool_failure threshold
	// (agentcli.DefaultFailureThreshold when 0).
	FailureThreshold int
	// PermissionMode is the turn's permission_mode, named when the CLI
	// withholds a tool the mode leaves to a user's approval.
	PermissionMode string
}

// withheld are the built-in tools that need approval under the approval
// modes other than yolo: headless, the CLI leaves them out of the agent's
// tools, and a call of one fails as "Tool ... not found".
var withheld = map[string]bool{"run_shell_command": true, "write_file": true, "replace": true, "web_fetch": true}

// notFound is the CLI's answer to a call of a tool it does not offer.
var notFound = regexp.MustCompile(`^Tool "([^"]+)" not found`)

// mcpFailed is how the CLI's debug log reports an MCP server that did
// not connect.
var mcpFailed = regexp.MustCompile(`\[MCP error\] Error (?:during discovery for|connecting to) MCP server '([^']+)': ([^\n]*)`)

// Parser turns `gemini --output-format stream-json` output into chat
// events: init is the session, assistant messages (deltas) text,
// tool_use and tool_result tool calls and results, error events notices
// and result the usage, or the error that ended the turn. There is no
// thinking: the CLI's headless loop (0.61.0) drops the model's thoughts,
// and stream-json has no event for them (only its ACP mode sends them).
type Parser struct {
	c    *agentcli.Chat
	opts ParserOptions
}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	return &Parser{opts: opts, c: agentcli.NewChat(emit, agentcli.ChatOptions{IDPrefix: "gm", Monitor: opts.Monitor,
		FailureThreshold: opts.FailureThreshold})}
}

// Stderr raises mcp_server_failed for every MCP server the CLI's debug
// log (Plan.LogFile, after the stderr tail) says did not connect
// (agentcli.StderrReader).
func (p *Parser) Stderr(text string) { mcpFailures(p.c, text) }

// mcpFailures raises mcp_server_failed for every MCP server text (the
// debug log) says did not connect.
func mcpFailures(c *agentcli.Chat, text string) {
	for _, m := range mcpFailed.FindAllStringSubmatch(text, -1) {
		c.MCPFailed(m[1], "failed", strings.TrimSpace(m[2]))
	}
}

// Parse reads the stream to its end (a recorded transcript).
func (p *Parser) Parse(r io.Reader) error { return agentcli.ReadLines(r, agentcli.ChatLines, p.Line) }

// Line handles one line of the stream (agentcli.Parser).
func (p *Parser) Line(line agentcli.Line) { p.c.Line(line, p.line) }

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// Close ends open messages and returns the outcome.
func (p *Parser) Close() *agentcli.StreamOutcome { return p.c.Close() }

func (p *Parser) line(line string) {
	r := gjson.GetMany(line, "type", "session_id", "model", "role", "content", "delta")
	switch r[0].String() {
	case "init":
		p.c.Session(agentcli.Session{ID: agentcli.String(r[1]), Model: agentcli.String(r[2]), Cwd: "/workspace",
			Skills: append([]string{}, p.opts.Skills...), MCPServers: agentcli.Configured(p.opts.MCPServers)})
	case "message":
		if r[3].String() != "assistant" {
			return
		}
		p.c.Text(agentcli.String(r[4]))
		if !r[5].Bool() {
			p.c.EndText()
		}
	case "tool_use":
		f := gjson.GetMany(line, "tool_id", "tool_name", "parameters")
		in := f[2].Raw
		if !f[2].IsObject() {
			in = "{}"
		}
		p.c.ToolCall(agentcli.String(f[0]), agentcli.String(f[1]), "", chat.RawJSON(in))
	case "tool_result":
		f := gjson.GetMany(line, "tool_id", "status", "output", "error.message")
		failed := f[1].String() != "success"
		out := f[2].String()
		if failed {
			out = cmp.Or(f[3].String(), out)
		}
		id := agentcli.String(f[0])
		p.c.ToolResult(id, "", out, failed)
		if m := notFound.FindStringSubmatch(out); failed && m != nil && withheld[m[1]] && p.opts.PermissionMode != "" && approvalModes[p.opts.PermissionMode] != "yolo" {
			p.c.Denied(id, m[1], p.opts.PermissionMode, fmt.Sprintf(
				"the Gemini CLI withholds %s under permission_mode %s: it needs a user's approval, which a headless run cannot give; set permission_mode bypassPermissions (or auto) to allow it",
				m[1], p.opts.PermissionMode))
		}
	case "error":
		f := gjson.GetMany(line, "severity", "message")
		p.c.Notice(NoticeCLIWarning, agentcli.String(f[1]), map[string]any{"severity": f[0].String()})
	case "result":
		p.result(line)
	default:
		p.c.Skip()
	}
}

func (p *Parser) result(line string) {
	f := gjson.GetMany(line, "status", "error.type", "error.message", "stats")
	st := f[3]
	cached := st.Get("cached").Int()
	p.c.AddUsage(chat.Usage{
		InputTokens:     st.Get("input_tokens").Int() - cached,
		CacheReadTokens: cached,
		OutputTokens:    st.Get("output_tokens").Int(),
		Turns:           max(1, int(st.Get("tool_calls").Int())+1),
	})
	p.c.Outcome().Usage.DurationMS = st.Get("duration_ms").Int()
	if f[0].String() == "success" {
		p.c.Result("success")
		return
	}
	typ, msg := f[1].String(), cmp.Or(agentcli.String(f[2]), "the CLI reported an error")
	code := agentcli.Classify(msg)
	subtype := "error"
	if strings.Contains(typ, "TurnLimited") {
		code, subtype = chat.ErrMaxTurns, "error_max_turns"
	}
	p.c.Fail(code, msg)
	p.c.Result(subtype)
}
