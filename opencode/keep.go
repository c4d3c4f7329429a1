package opencode

import (
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
)

// A kept chat's CLI runs `opencode acp`: the Agent Client Protocol on
// stdio (package acp), one process for all the chat's turns, each a
// session/prompt of the session it opened (or resumed: session/resume,
// which replays nothing). A call its permission rules leave to ask is
// refused with a permission_denied notice, as `opencode run` without
// --auto refuses it; under an approval policy every call asks, and the
// policy (the chat's user, where it says ask) answers (acp.Options.Approve):
// such a turn runs on ACP even when the CLI is not kept. Its usage is the prompt's response's: the last model step's
// tokens (the bridge meters them all). The plan agent is not kept: ACP
// starts the build agent.

var _ agentcli.Keeper = cli{}

// NextMessage implements agentcli.Keeper: a session/prompt request.
func (cli) NextMessage(next agentcli.Next) ([]byte, error) { return acp.NextMessage(next) }

// acpParser is the parser of a kept CLI's turn.
func acpParser(conn *acp.Conn, emit chat.EmitFunc, plan *agentcli.Plan, m agentcli.Monitor) *acp.Parser {
	return acp.NewParser(conn, emit, acp.Options{
		IDPrefix: "oc", Program: "opencode", Model: plan.Model, Skills: plan.Skills, MCPServers: plan.MCP.Names(), Monitor: m,
		FailureThreshold: plan.FailureThreshold, PermissionMode: plan.PermissionMode, Approve: plan.Approve,
		Stderr: func(c *agentcli.Chat, text string) { mcpFailures(c, text) },
	})
}
