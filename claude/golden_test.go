package claude

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
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

type goldenFile struct {
	Events  []chat.Event `json:"events"`
	Outcome *Outcome     `json:"outcome"`
}

func parseFile(t *testing.T, path string, opts ParserOptions) goldenFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var g goldenFile
	p := NewParser(func(e chat.Event) { g.Events = append(g.Events, e) }, opts)
	if err := p.Parse(f); err != nil {
		t.Fatal(err)
	}
	g.Outcome = p.Close()
	return g
}

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdataDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no transcripts in " + testdataDir)
	}
	sort.Strings(files)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, ok := goldenOptions[name]
			if !ok {
				opts = ParserOptions{MaxTurns: 30}
			}
			got, err := json.MarshalIndent(parseFile(t, file, opts), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			goldenPath := filepath.Join(testdataDir, name+".golden.json")
			if *update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test ./claude -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run go test ./claude -update and review the diff)\ngot:\n%s", goldenPath, got)
			}
			checkInvariants(t, parseFile(t, file, opts).Events)
		})
	}
}

// checkInvariants verifies what every event stream must satisfy: ids are
// unique per message, every start has one end, deltas come between them.
func checkInvariants(t *testing.T, events []chat.Event) {
	t.Helper()
	state := map[string]string{}
	for i, e := range events {
		switch e.Event {
		case chat.Start:
			if _, dup := state[e.ID]; dup {
				t.Fatalf("event %d: id %s started twice", i, e.ID)
			}
			state[e.ID] = "open"
		case chat.Delta:
			if state[e.ID] != "open" {
				t.Fatalf("event %d: delta for %s which is not open", i, e.ID)
			}
		case chat.End:
			if state[e.ID] != "open" {
				t.Fatalf("event %d: end for %s which is not open", i, e.ID)
			}
			state[e.ID] = "closed"
		}
	}
	for id, s := range state {
		if s != "closed" {
			t.Errorf("message %s never ended", id)
		}
	}
}
