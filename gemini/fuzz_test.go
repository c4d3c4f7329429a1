package gemini

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
	clitest.AddTranscripts(f, "../testdata/gemini")
	f.Add([]byte("not json\n" + `{"type":"tool_use","tool_name":"x"}` + "\n"))
	// A recorded stderr line naming an MCP server that did not start.
	f.Add([]byte("[2026-11-25T01:05:35.751Z] [LOG] [MCP error] Error during discovery for MCP server 'broken': spawn /nonexistent/mcp ENOENT\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The input is also the CLI's stderr (and log), which the parser
		// reads when the run ends.
		var log chattest.Recorder
		p := NewParser(log.Emit, ParserOptions{})
		p.Stderr(string(data))
		p.Close()
		chattest.Check(t, log.Events())
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return NewParser(emit, ParserOptions{Skills: []string{"s"}, MCPServers: []string{"agentbox"}})
		})
	})
}
