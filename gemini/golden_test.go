package gemini

import (
	"flag"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

var update = flag.Bool("update", false, "rewrite testdata/gemini/*.golden.json from the transcripts")

// TestGolden parses the transcripts recorded from the real CLI (see
// testdata/gemini/README.md) and compares events and outcome with the golden
// files.
func TestGolden(t *testing.T) {
	clitest.Golden(t, clitest.GoldenOptions[*agentcli.StreamOutcome]{
		Dir: "../testdata/gemini", Package: "./gemini", Update: *update,
		NewParser: func(name string, emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return NewParser(emit, ParserOptions{Skills: []string{"code-check"}, MCPServers: []string{"agentbox"}})
		},
	})
}
