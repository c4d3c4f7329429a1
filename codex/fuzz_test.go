package codex

import (
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// FuzzParser: no input makes the parser panic, emit an unbalanced stream
// or show a non-JSON line as text. The seeds are the recorded transcripts.
func FuzzParser(f *testing.F) {
	clitest.AddTranscripts(f, "../testdata/codex")
	f.Add([]byte("not json\n" + `{"type":"item.started","item":{"type":"command_execution"}}` + "\n"))
	// A recorded stderr line naming an MCP server that did not start.
	f.Add([]byte(`2026-11-25T01:04:26.267050Z  WARN codex_mcp::rmcp_client: MCP server startup failed server_name="broken" error=No such file or directory (os error 2)`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The input is also the CLI's stderr (and log), which the parser
		// reads when the run ends.
		var log chattest.Recorder
		p := NewParser(log.Emit, ParserOptions{})
		p.Stderr(string(data))
		p.Close()
		chattest.Check(t, log.Events())
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return NewParser(emit, ParserOptions{Model: "m", MaxTurns: 3, Skills: []string{"s"}, MCPServers: []string{"agentbox"}})
		})
	})
}
