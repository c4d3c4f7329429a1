package agentcli

import (
	"encoding/json"

	"github.com/agentbox/agentbox/executor"
)

// Ask decides a tool call the CLI asked about with approve (the turn's
// Plan.Approve), the run marked busy while the chat's user decides: the
// CLI prints nothing meanwhile, and the idle watchdog must not stop it.
// Without approve the call is denied.
func Ask(approve executor.Approver, m Monitor, tool string, input json.RawMessage, id string) (allow bool, reason string) {
	if approve == nil {
		return false, "Denied: nobody can approve tool calls in this turn."
	}
	if m != nil {
		m.Busy(true)
		defer m.Busy(false)
	}
	return approve(tool, input, id)
}
