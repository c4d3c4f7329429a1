package opencode

import (
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/acp"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// TestGoldenACP parses the Agent Client Protocol transcripts of a kept
// CLI (testdata/opencode/acp, see its README) as the kept executor does;
// permission.jsonl is a call its rules leave to ask, refused.
func TestGoldenACP(t *testing.T) {
	clitest.ACPGolden(t, "../testdata/opencode/acp", "./opencode", *update, func(conn *acp.Conn, emit chat.EmitFunc) *acp.Parser {
		return acpParser(conn, emit, &agentcli.Plan{Model: "test-model", PermissionMode: "acceptEdits"}, nil)
	})
}
