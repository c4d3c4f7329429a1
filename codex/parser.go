package codex

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// NoticeCLIWarning is a warning the CLI reported in its stream (an error
// item or event that did not end the turn: a retry, unknown model
// metadata).
const NoticeCLIWarning = "cli_warning"

// ParserOptions configure a Parser. The zero value is usable.
type ParserOptions struct {
	// Model is the turn's model, reported in the session event (the CLI
	// does not report it).
	Model string
	// Skills and MCPServers are what the executor configured, reported in
	// the session event.
	Skills, MCPServers []string
	// MaxTurns ends the turn with a max_turns error when the agent starts
	// another model step after MaxTurns (0: no limit). Codex has no limit
	// of its own: a step is counted when the model answers after tool
	// results.
	MaxTurns int
	// Monitor is told when the turn completes.
	Monitor agentcli.Monitor
	// FailureThreshold is the repeated_tool_failure threshold
	// (agentcli.DefaultFailureThreshold when 0).
	FailureThreshold int
}

// Parser turns `codex exec --json` output into chat events: thread.started
// is the session, reasoning items thinking, agent messages text,
// command executions, file changes, MCP and web search calls tool calls
// and results, turn.completed the usage and turn.failed the error.
type Parser struct {
	c     *agentcli.Chat
	opts  ParserOptions
	steps int  // model steps seen
	tools bool // tool results since the last step
	// pending is a stream error not yet shown: the CLI reports the error
	// that fails the turn twice, as an error event and in turn.failed.
	pending string
	// limited: the turn reached MaxTurns; what the CLI prints until it is
	// stopped is not shown.
	limited bool
}

// NewParser returns a parser that sends events to emit.
func NewParser(emit chat.EmitFunc, opts ParserOptions) *Parser {
	return &Parser{opts: opts, steps: 1, c: agentcli.NewChat(emit, agentcli.ChatOptions{IDPrefix: "cx", Monitor: opts.Monitor,
		FailureThreshold: opts.FailureThreshold})}
}

// Parse reads the stream to its end (a recorded transcript).
func (p *Parser) Parse(r io.Reader) error { return agentcli.ReadLines(r, agentcli.ChatLines, p.Line) }

// Line handles one line of the stream (agentcli.Parser).
func (p *Parser) Line(line agentcli.Line) { p.c.Line(line, p.line) }

// Finish is Close (agentcli.Parser).
func (p *Parser) Finish() agentcli.Finished { return p.Close() }

// Close ends open messages and returns the outcome.
func (p *Parser) Close() *agentcli.StreamOutcome {
	p.flush("")
	return p.c.Close()
}

// mcpStartFailed is the warning Codex logs to stderr (RUST_LOG, see the
// executor) for an MCP server that did not start; its JSON stream does
// not report it.
var mcpStartFailed = regexp.MustCompile(`MCP server startup failed server_name="?([^"\s]+)"? error=(.*)`)

// Stderr raises mcp_server_failed for every MCP server Codex's stderr
// says did not start (agentcli.StderrReader).
func (p *Parser) Stderr(tail string) {
	for _, line := range strings.Split(tail, "\n") {
		if m := mcpStartFailed.FindStringSubmatch(line); m != nil {
			p.c.MCPFailed(m[1], "failed", strings.TrimSpace(m[2]))
		}
	}
}

// flush shows the pending stream error as a notice unless failed is it.
func (p *Parser) flush(failed string) {
	if p.pending != "" && p.pending != failed {
		p.c.Notice(NoticeCLIWarning, p.pending, nil)
	}
	p.pending = ""
}

func (p *Parser) line(line string) {
	if p.limited {
		return
	}
	r := gjson.GetMany(line, "type", "thread_id", "item", "usage", "error.message", "message")
	typ := r[0].String()
	if typ == "turn.failed" {
		p.flush(agentcli.String(r[4]))
	} else {
		p.flush("")
	}
	switch typ {
	case "thread.started":
		p.c.Session(agentcli.Session{ID: agentcli.String(r[1]), Model: p.opts.Model, Cwd: "/workspace",
			Skills: append([]string{}, p.opts.Skills...), MCPServers: agentcli.Configured(p.opts.MCPServers)})
	case "turn.started":
	case "item.started", "item.updated":
		p.item(r[2], false)
	case "item.completed":
		p.item(r[2], true)
	case "turn.completed":
		u := r[3]
		p.c.AddUsage(chat.Usage{
			InputTokens:     u.Get("input_tokens").Int() - u.Get("cached_input_tokens").Int(),
			CacheReadTokens: u.Get("cached_input_tokens").Int(),
			OutputTokens:    u.Get("output_tokens").Int(),
			Turns:           p.steps,
		})
		p.c.Result("success")
	case "turn.failed":
		msg := cmp.Or(agentcli.String(r[4]), "the turn failed")
		p.c.Fail(agentcli.Classify(msg), msg)
		p.c.Result("error")
	case "error":
		// A stream error the CLI retries ("Reconnecting... 1/5"), or the
		// one turn.failed repeats.
		p.pending = agentcli.String(r[5])
	default:
		p.c.Skip()
	}
}

func (p *Parser) item(it gjson.Result, done bool) {
	f := gjson.GetMany(it.Raw, "id", "type", "text", "status")
	id, typ := agentcli.String(f[0]), f[1].String()
	switch typ {
	case "agent_message":
		if done && p.step() {
			p.c.Text(agentcli.String(f[2]))
			p.c.EndText()
		}
	case "reasoning":
		if done && p.step() {
			p.c.Thinking(agentcli.String(f[2]))
			p.c.EndThinking()
		}
	case "command_execution":
		p.tool(id, "shell", typ, done, func() (string, string, bool) {
			in := map[string]any{"command": it.Get("command").String()}
			code := it.Get("exit_code")
			failed := f[3].String() == "failed" || f[3].String() == "declined" || (code.Exists() && code.Type == gjson.Number && code.Int() != 0)
			out := it.Get("aggregated_output").String()
			if code.Type == gjson.Number && code.Int() != 0 {
				out = fmt.Sprintf("%s\n(exit code %d)", out, code.Int())
			}
			return jsonOf(in), out, failed
		})
	case "file_change":
		p.tool(id, "apply_patch", typ, done, func() (string, string, bool) {
			var lines []string
			it.Get("changes").ForEach(func(_, c gjson.Result) bool {
				lines = append(lines, c.Get("kind").String()+" "+c.Get("path").String())
				return true
			})
			return jsonOf(map[string]any{"changes": it.Get("changes").Value()}), strings.Join(lines, "\n"), f[3].String() == "failed"
		})
	case "mcp_tool_call":
		name := "mcp__" + it.Get("server").String() + "__" + it.Get("tool").String()
		p.tool(id, name, typ, done, func() (string, string, bool) {
			args := it.Get("arguments")
			in := args.Raw
			if !args.IsObject() {
				in = "{}"
			}
			if e := it.Get("error.message"); e.Exists() {
				return in, e.String(), true
			}
			var sb strings.Builder
			it.Get("result.content").ForEach(func(_, c gjson.Result) bool {
				if t := c.Get("text"); t.Exists() {
					sb.WriteString(t.String())
				}
				return true
			})
			return in, sb.String(), f[3].String() == "failed"
		})
	case "web_search":
		p.tool(id, "web_search", typ, done, func() (string, string, bool) {
			return jsonOf(map[string]any{"query": it.Get("query").String()}), "", false
		})
	case "error":
		if done {
			p.c.Notice(NoticeCLIWarning, agentcli.String(it.Get("message")), nil)
		}
	case "todo_list":
	default:
		p.c.Skip()
	}
}

// step counts a model step: the first output after tool results starts a
// new one; past MaxTurns the turn ends (false: the output is not shown).
func (p *Parser) step() bool {
	if !p.tools {
		return true
	}
	p.tools = false
	p.steps++
	if p.opts.MaxTurns > 0 && p.steps > p.opts.MaxTurns {
		p.limited = true
		p.c.Fail(chat.ErrMaxTurns, fmt.Sprintf("the agent reached max_turns (%d) before it finished", p.opts.MaxTurns))
		p.c.Result("error_max_turns")
		p.c.Stop()
		return false
	}
	return true
}

// tool announces a call when it starts and reports its result when it
// completes; describe gives its input, output and failure.
func (p *Parser) tool(id, name, kind string, done bool, describe func() (string, string, bool)) {
	if !p.step() {
		return
	}
	in, out, failed := describe()
	p.c.ToolCall(id, name, kind, chat.RawJSON(in))
	if done {
		p.c.ToolResult(id, name, out, failed)
		p.tools = true
	}
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}
