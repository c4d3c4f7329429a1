package gemini

import (
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
)

// A kept chat's CLI runs `gemini --acp`: the Agent Client Protocol on
// stdio (package acp), one process for all the chat's turns, each a
// session/prompt of the session it opened (or loaded, to resume the
// chat's). Its updates say less than stream-json: a tool call carries
// neither the tool's name (it is read from the call's id) nor its input,
// and a command's output is not sent (a file edit's diff and an error
// are). Under an approval policy every turn runs on ACP, kept or not: the
// CLI asks before its commands, edits and fetches and the policy answers
// (acp.Options.Approve).

var _ agentcli.Keeper = cli{}

// NextMessage implements agentcli.Keeper: a session/prompt request.
func (cli) NextMessage(next agentcli.Next) ([]byte, error) { return acp.NextMessage(next) }

// callSuffix is what the CLI adds to a tool's name to make a call's id:
// NAME-MILLIS-N (its own) or NAME_MILLIS_N (the model's).
var callSuffix = regexp.MustCompile(`[-_]\d{10,}[-_]\d+$`)

// toolName is the tool a call's id names.
func toolName(id, title string) string {
	if i := strings.Index(id, "__"); i > 0 {
		return id[:i]
	}
	if name := callSuffix.ReplaceAllString(id, ""); name != id && name != "" {
		return name
	}
	return title
}

// acpParser is the parser of a kept CLI's turn.
func acpParser(conn *acp.Conn, emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) *acp.Parser {
	return acp.NewParser(conn, emit, acp.Options{
		IDPrefix: "gm", Program: "the Gemini CLI", Skills: plan.Skills, MCPServers: plan.MCP.Names(), Monitor: m,
		FailureThreshold: plan.FailureThreshold, PermissionMode: plan.PermissionMode, ToolName: toolName, Approve: plan.Approve, MaxTurns: plan.MaxTurns,
		Stderr: func(c *agentcli.Chat, text string) { mcpFailures(c, text) },
	})
}
