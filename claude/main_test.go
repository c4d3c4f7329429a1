package claude

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/bridge/bridgetest"
)

// TestMain lets the test binary play the MCP server the tool filter tests
// put behind the filter (bridgetest.StdioEnv).
func TestMain(m *testing.M) {
	bridgetest.ServeStdioIfAsked()
	os.Exit(m.Run())
}
