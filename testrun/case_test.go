package testrun

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
)

func TestParseCases(t *testing.T) {
	t.Parallel()
	src := `// comments and blank lines are skipped

{"id": "T001", "input": "Hello", "assert": {"type": "contains", "value": "Hi"}}
{"id": "T002", "input": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
  {"role": "user", "content": [{"type": "text", "text": "times"}, {"type": "text", "text": "three"}]}],
 "assert": [{"type": "regex", "value": "\\d+"}, {"type": "not_contains", "value": "error"}], "timeout": "30s"}
{"id": "T003", "input": {"role": "user", "content": "Hi"}, "assert": {"type": "contains", "value": "Hi"}, "options": {"connector": "x.y", "skip": {"history": true}, "metadata": {"a": 1}}}
{"id": "T004", "input": "go", "assertions": [{"type": "equals", "value": 4}], "skip": true, "user": "u1", "team": "t1"}
{"id": "T005", "input": "Hi", "simulator": {"use": "tests.sim", "options": {"metadata": {"goal": "g"}, "connector": "c"}},
 "checkpoints": [{"id": "a", "assert": {"type": "contains", "value": "x"}}, {"id": "b", "after": ["a"], "required": false, "assert": {"type": "regex", "value": "y"}}], "max_turns": 3}
`
	cases, err := ParseCases([]byte(src), "inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 5 {
		t.Fatalf("got %d cases", len(cases))
	}
	if c := cases[0]; c.ID != "T001" || c.Line != 3 || len(c.Assert) != 1 || c.Assert[0].Type != "contains" {
		t.Errorf("T001 = %+v", c)
	}
	c := cases[1]
	if c.Line != 4 || c.TimeoutOr(time.Minute) != 30*time.Second || len(c.Assert) != 2 || c.Assert[0].re == nil {
		t.Errorf("T002 = line %d timeout %v asserts %d", c.Line, c.TimeoutOr(time.Minute), len(c.Assert))
	}
	if m := c.msgs.messages; len(m) != 3 || m[2].Content != "times\nthree" || m[1].Role != chat.RoleAssistant {
		t.Errorf("T002 messages = %+v", m)
	}
	if c := cases[2]; c.Assert[0].Type != "contains" || c.Options.Connector != "x.y" || !c.Options.Skip.History {
		t.Errorf("T003 = %+v", c)
	}
	if c := cases[3]; len(c.Assert) != 1 || c.Assert[0].Type != "equals" || !c.Skip || c.User != "u1" {
		t.Errorf("T004 (assertions alias) = %+v", c)
	}
	if c := cases[4]; !c.Dynamic() || c.maxTurns() != 3 || c.Checkpoints[1].IsRequired() || !c.Checkpoints[0].IsRequired() {
		t.Errorf("T005 = %+v", c)
	}
}

func TestParseCasesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, want string }{
		{"not json", `{"id": "a", "input": }`, "inputs.jsonl:1: invalid JSON"},
		{"not an object", `["a"]`, "a case must be a JSON object"},
		{"missing id", `{"input": "x"}`, `missing "id"`},
		{"missing input", `{"id": "a"}`, `missing "input"`},
		{"unknown field", `{"id": "a", "input": "x", "asert": {"type": "contains", "value": "x"}}`, `unknown case field "asert": did you mean "assert"?`},
		{"unknown assertion field", `{"id": "a", "input": "x", "assert": {"type": "contains", "valu": "x"}}`, `unknown assertion field "valu": did you mean "value"?`},
		{"unknown type", `{"id": "a", "input": "x", "assert": {"type": "contain", "value": "x"}}`, `unknown assertion type "contain": did you mean "contains"?`},
		{"bad regex", `{"id": "a", "input": "x", "assert": {"type": "regex", "value": "("}}`, "regex \"(\""},
		{"regex not string", `{"id": "a", "input": "x", "assert": {"type": "regex", "value": 3}}`, "must be a pattern string"},
		{"json_path without path", `{"id": "a", "input": "x", "assert": {"type": "json_path", "value": 3}}`, "json_path needs a path"},
		{"bad type name", `{"id": "a", "input": "x", "assert": {"type": "type", "value": "str"}}`, "type: the value must be one of"},
		{"bad schema", `{"id": "a", "input": "x", "assert": {"type": "schema", "value": {"type": 5}}}`, "schema:"},
		{"agent without prefix", `{"id": "a", "input": "x", "assert": {"type": "agent", "use": "tests.judge"}}`, `"agents:<judge assistant>"`},
		{"script without name", `{"id": "a", "input": "x", "assert": {"type": "script"}}`, "script needs"},
		{"tool_result without tool", `{"id": "a", "input": "x", "assert": {"type": "tool_result", "value": {"result": 1}}}`, "tool_result: the value must be"},
		{"tool_called bad value", `{"id": "a", "input": "x", "assert": {"type": "tool_called", "value": 3}}`, "tool_called: the value must be"},
		{"bad timeout", `{"id": "a", "input": "x", "timeout": "soon"}`, `timeout "soon"`},
		{"timeout number", `{"id": "a", "input": "x", "timeout": 30}`, "timeout: want a string"},
		{"duplicate id", "{\"id\": \"a\", \"input\": \"x\"}\n{\"id\": \"a\", \"input\": \"y\"}", `inputs.jsonl:2: case id "a" is also used on line 1`},
		{"empty", "// nothing\n\n", "no test cases"},
		{"empty input", `{"id": "a", "input": "  "}`, "the input text is empty"},
		{"ends with assistant", `{"id": "a", "input": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}`, "the last one is the user's turn"},
		{"bad role", `{"id": "a", "input": {"role": "robot", "content": "x"}}`, `role "robot"`},
		{"url image", `{"id": "a", "input": {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}}`, `content part type "image_url" is not supported`},
		{"file without source", `{"id": "a", "input": {"role": "user", "content": [{"type": "file", "url": "http://x"}]}}`, "file://PATH"},
		{"bare type name", `{"id": "a", "input": "x", "assert": "contains"}`, "contains needs a value"},
		{"checkpoints without simulator", `{"id": "a", "input": "x", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}`, "checkpoints need a simulator"},
		{"simulator without checkpoints", `{"id": "a", "input": "x", "simulator": {"use": "s"}}`, "a simulator needs checkpoints"},
		{"checkpoint after unknown", `{"id": "a", "input": "x", "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "after": ["z"], "assert": {"type": "contains", "value": "x"}}]}`, `after names "z"`},
		{"checkpoint without assert", `{"id": "a", "input": "x", "simulator": {"use": "s"}, "checkpoints": [{"id": "c"}]}`, `missing "assert"`},
		{"line of the error", "{\"id\": \"a\", \"input\": \"x\"}\n\n{\"id\": \"b\",\n \"input\": \"x\", \"bogus\": 1}", "inputs.jsonl:3 (case b): unknown case field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCases([]byte(tt.src), "inputs.jsonl")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseCasesReportsEveryBadLine(t *testing.T) {
	t.Parallel()
	src := "{\"id\": \"a\"}\n{\"id\": \"b\", \"input\": \"x\"}\n{\"id\": \"c\", \"input\": \"x\", \"assert\": {\"type\": \"nope\"}}\n"
	_, err := ParseCases([]byte(src), "f.jsonl")
	if err == nil || !strings.Contains(err.Error(), "f.jsonl:1") || !strings.Contains(err.Error(), "f.jsonl:3") {
		t.Fatalf("error = %v", err)
	}
}

func FuzzParseCases(f *testing.F) {
	f.Add([]byte(`{"id": "T001", "input": "Hello", "assert": {"type": "contains", "value": "Hi"}}`))
	f.Add([]byte("// c\n{\"id\": \"a\", \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}], \"assert\": [{\"type\": \"regex\", \"value\": \"(a\"}]}"))
	f.Add([]byte(`{"id": "a", "input": "x", "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "assert": "contains"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := ParseCases(data, "fuzz.jsonl")
		if err != nil {
			return
		}
		for _, c := range cases {
			if c.ID == "" || (c.Input == nil && !c.Dynamic()) {
				t.Fatalf("accepted a case without id or input: %+v", c)
			}
			if c.msgs != nil && len(c.msgs.messages) == 0 {
				t.Fatalf("accepted an input without messages: %+v", c)
			}
		}
	})
}
