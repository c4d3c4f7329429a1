package assistant

import (
	"fmt"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/internal/units"
)

// ApprovalCommands are the sandbox commands whose CLI can ask before a
// tool runs: Claude Code through its permission prompt tool, Codex
// through its app server's approval requests, the Gemini CLI and
// opencode through the Agent Client Protocol. A direct assistant's MCP
// tool loop, run by the server, asks too.
var ApprovalCommands = map[string]bool{"claude": true, "codex": true, "gemini": true, "opencode": true}

// parseApproval checks an "approval" block (package.yao's or app.jsonc's)
// at path.
func parseApproval(d *doc, path string, raw approval.Raw) *approval.Policy {
	p, probs := approval.Parse(raw, units.ParseDuration)
	for _, pr := range probs {
		d.errPath(path+"."+pr.Path, "%s.%s", path, pr.Message)
	}
	return p
}

// checkApproval refuses a policy an assistant's executor cannot keep: a
// CLI that cannot ask (ApprovalCommands) runs its tools without asking
// the server, so neither ask nor deny rules would hold. The app's default policy is left
// out for such an assistant, with a warning.
func checkApproval(d *doc, a *Assistant) {
	if a.Approval.Empty() || a.Sandbox == nil {
		return
	}
	if ApprovalCommands[a.Sandbox.Command] {
		if a.Sandbox.Command != "claude" {
			return
		}
		for i, r := range a.Approval.Ask {
			if approval.ReadOnly[r.Tool()] && d.has("approval") {
				d.errPath(fmt.Sprintf("approval.ask[%d]", i), "approval.ask[%d] %q: Claude Code reads, lists and searches its workspace without asking: deny such calls, or leave them allowed", i, r.Text)
			}
		}
		return
	}
	if d.has("approval") {
		d.errPath("approval", "approval: the %s command's CLI runs its tools without asking agentbox, so these rules cannot be kept: tool approval works with the claude, codex, gemini and opencode commands and with direct assistants' MCP tools", a.Sandbox.Command)
		return
	}
	d.warnPath("sandbox", "app.jsonc's approval policy does not apply: the %s command's CLI runs its tools without asking agentbox (tool approval works with the claude, codex, gemini and opencode commands and direct assistants' MCP tools)", a.Sandbox.Command)
	a.Approval = nil
}
