package cursor

import (
	"flag"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

var update = flag.Bool("update", false, "rewrite testdata/cursor/*.golden.json from the transcripts")

// testdataDir holds transcripts written to the CLI's documented stream-json
// format (see its README.md for the sources) with their parsed events.
const testdataDir = "../testdata/cursor"

// goldenOptions are the parser options a transcript is parsed with (the
// executor passes the same from the assistant).
var goldenOptions = map[string]ParserOptions{
	"tool_kinds": {Skills: []string{"code-check"}, MCPServers: []string{"github"}},
	"mcp_init":   {MCPServers: []string{"github", "broken"}},
}

func TestGolden(t *testing.T) {
	clitest.Golden(t, clitest.GoldenOptions[*Outcome]{
		Dir: testdataDir, Package: "./cursor", Update: *update,
		NewParser: func(name string, emit chat.EmitFunc) clitest.Parser[*Outcome] {
			return NewParser(emit, goldenOptions[name])
		},
		Check: checkCollected,
	})
}

// checkCollected: what a non-streaming client collects is the outcome's
// content (text messages are separated by blank lines in the outcome).
func checkCollected(t *testing.T, g clitest.Transcript[*Outcome]) {
	t.Helper()
	var c chat.Collector
	for _, e := range g.Events {
		c.Add(e)
	}
	if want := strings.ReplaceAll(g.Outcome.Content, "\n\n", ""); c.Text() != want && !strings.Contains(c.Text(), "\n\n") {
		t.Errorf("collected %q, outcome %q", c.Text(), g.Outcome.Content)
	}
}
