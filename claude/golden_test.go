package claude

import (
	"flag"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

var update = flag.Bool("update", false, "rewrite testdata/claude/*.golden.json from the transcripts")

// testdataDir holds recorded CLI transcripts (NAME.jsonl, see
// record_test.go) and hand-made edge cases, with their parsed events.
const testdataDir = "../testdata/claude"

// goldenOptions are the parser options each transcript was produced with
// (the executor passes the same from the assistant).
var goldenOptions = map[string]ParserOptions{
	"max_turns":       {MaxTurns: 2},
	"mcp_skills":      {MaxTurns: 30, Skills: []string{"code-check", "not-installed"}},
	"tool_failures":   {MaxTurns: 30},
	"edge_near_max":   {MaxTurns: 4},
	"edge_subagent":   {MaxTurns: 30},
	"edge_no_partial": {MaxTurns: 30},
}

func TestGolden(t *testing.T) {
	clitest.Golden(t, clitest.GoldenOptions[*Outcome]{
		Dir: testdataDir, Package: "./claude", Update: *update,
		NewParser: func(name string, emit chat.EmitFunc) clitest.Parser[*Outcome] {
			opts, ok := goldenOptions[name]
			if !ok {
				opts = ParserOptions{MaxTurns: 30}
			}
			return NewParser(emit, opts)
		},
	})
}
