package scripted_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/scripted"
)

func TestLoadScriptExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "testdata/good.json")
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "bad-") {
			continue
		}
		s, err := scripted.LoadScript(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(s.Turns) == 0 {
			t.Errorf("%s: no turns", f)
		}
	}
	s, err := scripted.LoadScript("testdata/good.json")
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(s.Turns[0].Delay) != 10*time.Millisecond || s.Turns[1].ToolCalls[0].Input.(map[string]any)["command"] != "ls" || s.Turns[1].When.Contains != "list" {
		t.Errorf("decoded %+v", s.Turns)
	}
	w, err := scripted.LoadScript("testdata/write-file.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Turns[0].ToolCalls[0].Input.(map[string]any)["content"] != "hello\n" || w.Turns[1].When.AfterToolResult != "Write" {
		t.Errorf("decoded %+v", w.Turns)
	}
}

func TestLoadScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string
	}{
		{"testdata/bad-unknown-field.yaml", []string{
			`testdata/bad-unknown-field.yaml:3:5: unknown field "txet" in turns[1] (known: cut_after, delay, error,`,
			`6:9: unknown field "argz" in turns[1].tool_calls[0] (known: id, input, name)`,
		}},
		{"testdata/bad-syntax.json", []string{"testdata/bad-syntax.json:4:18: invalid JSON"}},
		{"testdata/bad-turn.json", []string{
			"testdata/bad-turn.json:4:5: turn 2: error status 200 is not an HTTP error",
			"5:5: turn 3: tool call 1 has no name",
		}},
		{"testdata/missing.yaml", []string{"no such file"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			t.Parallel()
			_, err := scripted.LoadScript(tt.file)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, format, data, want string
	}{
		{"format", "toml", "turns = []", `unknown script format "toml"`},
		{"empty", "yaml", "", "empty script"},
		{"not a map", "yaml", "- text: a", "must be a mapping"},
		{"json array", "json", `[]`, "must be an object"},
		{"turns not list", "yaml", "turns: 3", "turns must be a list"},
		{"bad delay", "yaml", "turns:\n  - delay: soon", `2:1: bad duration "soon"`},
		{"numeric delay", "yaml", "turns:\n  - delay: 5", "duration must be a string"},
		{"wrong type", "yaml", "turns:\n  - cut_after: many", "2:1: cannot unmarshal"},
		{"error and text", "yaml", "turns:\n  - text: a\n    error: {status: 500}", "2:5: turn 1: an error turn cannot also have"},
		{"empty when", "yaml", "turns:\n  - when: {}", "when: set after_tool_result, contains, prompt_contains or sees"},
		{"input not object", "yaml", "turns:\n  - tool_calls: [{name: X, input: [1]}]", "input must be an object"},
		{"duplicate", "yaml", "turns:\n  - text: a\n    text: b", `3:5: duplicate field "text"`},
		{"yaml syntax", "yaml", "turns:\n  - text: [", "2:1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := scripted.ParseScript([]byte(tt.data), tt.format)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzParseScript(f *testing.F) {
	for _, seed := range []string{"turns: []", "turns:\n  - text: a\n", `{"turns":[{"text":"a"}]}`, "turns:\n  - delay: 1s\n    when: {contains: x}"} {
		f.Add([]byte(seed), "yaml")
		f.Add([]byte(seed), "json")
	}
	f.Fuzz(func(t *testing.T, data []byte, format string) {
		s, err := scripted.ParseScript(data, format)
		if err == nil && s.Validate() != nil {
			t.Fatalf("parsed script fails Validate: %v", s.Validate())
		}
	})
}
