package opencode

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
	clitest.AddTranscripts(f, "../testdata/opencode")
	f.Add([]byte("not json\n" + `{"type":"tool_use","part":{}}` + "\n"))
	// A recorded stderr line naming an MCP server that did not start.
	f.Add([]byte(`timestamp=2026-11-25T01:07:04.396Z level=WARN run=fd09caaa message="server unavailable" key=broken type=local status=failed`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The input is also the CLI's stderr (and log), which the parser
		// reads when the run ends.
		var log chattest.Recorder
		p := NewParser(log.Emit, ParserOptions{})
		p.Stderr(string(data))
		p.Close()
		chattest.Check(t, log.Events())
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return NewParser(emit, ParserOptions{Model: "m", Skills: []string{"s"}, MCPServers: []string{"agentbox"}})
		})
	})
}
