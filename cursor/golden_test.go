package cursor

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
			g := parseFile(t, file, goldenOptions[name])
			got, err := json.MarshalIndent(g, "", "  ")
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
				t.Fatalf("%v (run go test ./cursor -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run go test ./cursor -update and review the diff)\ngot:\n%s", goldenPath, got)
			}
			checkInvariants(t, g.Events)
			checkCollected(t, g)
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

// checkCollected: what a non-streaming client collects is the outcome's
// content (text messages are separated by blank lines in the outcome).
func checkCollected(t *testing.T, g goldenFile) {
	t.Helper()
	var c chat.Collector
	for _, e := range g.Events {
		c.Add(e)
	}
	if want := strings.ReplaceAll(g.Outcome.Content, "\n\n", ""); c.Text() != want && !strings.Contains(c.Text(), "\n\n") {
		t.Errorf("collected %q, outcome %q", c.Text(), g.Outcome.Content)
	}
}
