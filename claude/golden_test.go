package claude

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
	"github.com/agentbox/agentbox/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/claude/*.golden.json from the transcripts")

// testdataDir holds hand-made edge cases (edge_*.jsonl) and, in a folder
// per supported CLI version, transcripts recorded from it (see
// record_test.go), with their parsed events.
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
	dirs := []string{testdataDir}
	for _, v := range supportedVersions(t) {
		dirs = append(dirs, filepath.Join(testdataDir, v))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			clitest.Golden(t, clitest.GoldenOptions[*Outcome]{
				Dir: dir, Package: "./claude", Update: *update,
				NewParser: func(name string, emit chat.EmitFunc) clitest.Parser[*Outcome] {
					opts, ok := goldenOptions[name]
					if !ok {
						opts = ParserOptions{MaxTurns: 30}
					}
					return NewParser(emit, opts)
				},
			})
		})
	}
}

// supportedVersions are the CLI versions scripts/versions.sh pins.
func supportedVersions(t *testing.T) []string {
	pins := testenv.Pins(t)
	out := []string{pins["CLAUDE_VERSION"]}
	if v := pins["CLAUDE_LATEST_VERSION"]; v != "" && v != out[0] {
		out = append(out, v)
	}
	return out
}

// TestRecordedVersions: every supported version has its recorded
// transcripts, each scenario of record_test.go (a version added to
// scripts/versions.sh is recorded with go test ./claude -run TestRecord
// -record, then -update).
func TestRecordedVersions(t *testing.T) {
	for _, v := range supportedVersions(t) {
		for _, sc := range recordScenarios {
			for _, ext := range []string{".jsonl", ".golden.json"} {
				if _, err := os.Stat(filepath.Join(testdataDir, v, sc.name+ext)); err != nil {
					t.Errorf("CLI %s: no recorded %s%s (go test ./claude -run TestRecord -record, then -update): %v", v, sc.name, ext, err)
				}
			}
		}
	}
}
