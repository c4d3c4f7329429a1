package claude

import (
	"flag"
	"io"
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
		Parse: func(t *testing.T, name string, r io.Reader) clitest.Transcript[*Outcome] {
			opts, ok := goldenOptions[name]
			if !ok {
				opts = ParserOptions{MaxTurns: 30}
			}
			var g clitest.Transcript[*Outcome]
			p := NewParser(func(e chat.Event) { g.Events = append(g.Events, e) }, opts)
			if err := p.Parse(r); err != nil {
				t.Fatal(err)
			}
			g.Outcome = p.Close()
			return g
		},
	})
}
