package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// FuzzParser: no input makes the parser panic, emit an unbalanced stream
// or show a non-JSON line as text. The seeds are the recorded transcripts.
func FuzzParser(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/codex/*.jsonl")
	if len(seeds) == 0 {
		f.Fatal("no transcripts in ../testdata/codex")
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("not json\n" + `{"type":"item.started","item":{"type":"command_execution"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*agentcli.StreamOutcome] {
			return NewParser(emit, ParserOptions{Model: "m", MaxTurns: 3, Skills: []string{"s"}, MCPServers: []string{"agentbox"}})
		})
	})
}
