package testrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// fakeChecker answers judges and scripts from fixed verdicts.
type fakeChecker struct{ judgePass, scriptPass bool }

func (f fakeChecker) judge(_ context.Context, a *Assertion, out, in any) *AssertionResult {
	return &AssertionResult{Passed: f.judgePass, Message: "judged"}
}

func (f fakeChecker) script(_ context.Context, a *Assertion, out, in any) *AssertionResult {
	return &AssertionResult{Passed: f.scriptPass, Message: "scripted"}
}

// mustAssertion parses one assertion as a case file holds it.
func mustAssertion(t *testing.T, src string) *Assertion {
	t.Helper()
	var as Assertions
	if err := json.Unmarshal([]byte(src), &as); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	if err := as.check("assert"); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return as[0]
}

func TestAssertions(t *testing.T) {
	t.Parallel()
	text := "Hello! What is your name?"
	jsonText := "Sure:\n```json\n{\"greeting\": \"hello\", \"count\": 2, \"items\": [{\"name\": \"apple\"}, {\"name\": \"pear\"}]}\n```"
	data := map[string]any{"greeting": "hello", "count": 2.0, "tags": []any{"a", "b"}}
	calls := []ToolCall{
		{Name: "mcp__clock__now", Server: "clock", Tool: "now", Arguments: map[string]any{"tz": "UTC"}, Result: map[string]any{"time": "12:00", "ok": true}},
		{Name: "Write", Tool: "Write", Arguments: map[string]any{"file_path": "/workspace/a.txt"}, Result: "File created successfully at: /workspace/a.txt"},
		{Name: "Bash", Tool: "Bash", Arguments: map[string]any{"command": "false"}, Error: "exit status 1"},
	}
	tests := []struct {
		name   string
		assert string
		out    any
		pass   bool
		msg    string
	}{
		{"contains", `{"type": "contains", "value": "your name"}`, text, true, `output contains "your name"`},
		{"contains fails", `{"type": "contains", "value": "Goodbye"}`, text, false, `output does not contain "Goodbye"`},
		{"contains in an object", `{"type": "contains", "value": "\"count\":2"}`, data, true, ""},
		{"contains a number", `{"type": "contains", "value": 2}`, "1 2 3", true, ""},
		{"not_contains", `{"type": "not_contains", "value": "Goodbye"}`, text, true, ""},
		{"not_contains fails", `{"type": "not_contains", "value": "Hello"}`, text, false, `output should not contain "Hello"`},
		{"regex", `{"type": "regex", "value": "(?i)^hello\\b"}`, text, true, ""},
		{"regex fails", `{"type": "regex", "value": "^bye"}`, text, false, `does not match pattern "^bye"`},
		{"equals text", `{"type": "equals", "value": "4"}`, "4", true, "values are equal"},
		{"equals default type", `{"value": "4"}`, "4", true, ""},
		{"equals object by value", `{"type": "equals", "value": {"tags": ["a", "b"], "count": 2, "greeting": "hello"}}`, data, true, ""},
		{"equals fails", `{"type": "equals", "value": "5"}`, "4", false, "expected 5, got 4"},
		{"json_path in text", `{"type": "json_path", "path": "$.items[1].name", "value": "pear"}`, jsonText, true, ""},
		{"json_path in data", `{"type": "json_path", "path": "tags[0]", "value": "a"}`, data, true, ""},
		{"json_path one of", `{"type": "json_path", "path": "count", "value": [1, 2]}`, data, true, "one of"},
		{"json_path list equals list", `{"type": "json_path", "path": "tags", "value": ["a", "b"]}`, data, true, ""},
		{"json_path fails", `{"type": "json_path", "path": "greeting", "value": "bye"}`, data, false, "path greeting: expected bye, got hello"},
		{"json_path missing", `{"type": "json_path", "path": "nope.deeper", "value": 1}`, data, false, "got null"},
		{"json_path not json", `{"type": "json_path", "path": "a", "value": 1}`, text, false, "output is not JSON"},
		{"type string", `{"type": "type", "value": "string"}`, text, true, ""},
		{"type object", `{"type": "type", "value": "object"}`, data, true, ""},
		{"type array", `{"type": "type", "value": "array"}`, []any{1.0}, true, ""},
		{"type null", `{"type": "type", "value": "null"}`, nil, true, ""},
		{"type fails", `{"type": "type", "value": "object"}`, text, false, "expected type object, got string"},
		{"schema", `{"type": "schema", "value": {"type": "object", "required": ["items"], "properties": {"count": {"type": "integer"}}}}`, jsonText, true, ""},
		{"schema fails", `{"type": "schema", "value": {"type": "object", "required": ["farewell"]}}`, data, false, "does not match the schema"},
		{"schema not json", `{"type": "schema", "value": {"type": "object"}}`, text, false, "output is not JSON"},
		{"tool_called by name", `{"type": "tool_called", "value": "Write"}`, nil, true, ""},
		{"tool_called by short name", `{"type": "tool_called", "value": "now"}`, nil, true, ""},
		{"tool_called by suffix", `{"type": "tool_called", "value": "clock__now"}`, nil, true, ""},
		{"tool_called any of", `{"type": "tool_called", "value": ["Read", "Bash"]}`, nil, true, ""},
		{"tool_called with arguments", `{"type": "tool_called", "value": {"name": "Write", "arguments": {"file_path": "/workspace/a.txt"}}}`, nil, true, "with matching arguments"},
		{"tool_called wrong arguments", `{"type": "tool_called", "value": {"name": "Write", "arguments": {"file_path": "/b"}}}`, nil, false, "not called with the expected arguments"},
		{"tool_called fails", `{"type": "tool_called", "value": "Edit"}`, nil, false, `tool "Edit" was not called; called: now, Write, Bash`},
		{"tool_result object", `{"type": "tool_result", "value": {"tool": "now", "result": {"ok": true}}}`, nil, true, ""},
		{"tool_result regex", `{"type": "tool_result", "value": {"tool": "Write", "result": "regex:(?i)created"}}`, nil, true, ""},
		{"tool_result no error", `{"type": "tool_result", "value": {"tool": "Write"}}`, nil, true, "ran without error"},
		{"tool_result error", `{"type": "tool_result", "value": {"tool": "Bash"}}`, nil, false, "returned an error: exit status 1"},
		{"tool_result mismatch", `{"type": "tool_result", "value": {"tool": "now", "result": {"time": "13:00"}}}`, nil, false, "does not match"},
		{"tool_result not called", `{"type": "tool_result", "value": {"tool": "Edit", "result": 1}}`, nil, false, `tool "Edit" was not called`},
		{"agent", `{"type": "agent", "use": "agents:j", "value": "polite"}`, text, true, "judged"},
		{"script", `{"type": "script", "script": "scripts.x.Check"}`, text, false, "scripted"},
		{"negate", `{"type": "contains", "value": "Goodbye", "negate": true}`, text, true, "negated assertion passed"},
		{"negate fails", `{"type": "contains", "value": "Hello", "negate": true}`, text, false, "negated: output contains"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAssertion(t, tt.assert)
			rs := evaluate(context.Background(), fakeChecker{judgePass: true}, Assertions{a}, nil, &Answer{Output: tt.out, ToolCalls: calls})
			if len(rs) != 1 {
				t.Fatalf("%d results", len(rs))
			}
			r := rs[0]
			if r.Passed != tt.pass || !strings.Contains(r.Message, tt.msg) {
				t.Errorf("passed=%v %q, want passed=%v and a message with %q", r.Passed, r.Message, tt.pass, tt.msg)
			}
			if r.Assertion != a {
				t.Error("the result does not carry its assertion")
			}
		})
	}
}

func TestNoToolsCalled(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`{"type": "tool_called", "value": "x"}`, `{"type": "tool_result", "value": {"tool": "x"}}`} {
		rs := evaluate(context.Background(), fakeChecker{}, Assertions{mustAssertion(t, src)}, nil, &Answer{Output: "hi"})
		if rs[0].Passed || rs[0].Message != "no tools were called" {
			t.Errorf("%s: %+v", src, rs[0])
		}
	}
}

func TestExpectedAndFailures(t *testing.T) {
	t.Parallel()
	if rs := evaluate(context.Background(), fakeChecker{}, nil, nil, &Answer{Output: "x"}); rs != nil {
		t.Errorf("no assertions and no expected = %v, want none", rs)
	}
	rs := evaluate(context.Background(), fakeChecker{}, nil, map[string]any{"a": 1}, &Answer{Output: map[string]any{"a": 1.0}})
	if len(rs) != 1 || !rs[0].Passed {
		t.Errorf("expected = %+v", rs)
	}
	as := Assertions{mustAssertion(t, `{"type": "contains", "value": "a"}`), mustAssertion(t, `{"type": "contains", "value": "z", "message": "must say z"}`),
		mustAssertion(t, `{"type": "regex", "value": "^q"}`)}
	rs = evaluate(context.Background(), fakeChecker{}, as, nil, &Answer{Output: "abc"})
	if got := failures(rs); got != `must say z; output does not match pattern "^q"` {
		t.Errorf("failures = %q", got)
	}
}

func TestExtractJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{`{"a": 1}`, `{"a":1}`},
		{"  [1, 2] ", `[1,2]`},
		{"Here:\n```json\n{\"a\": [1]}\n```\nDone.", `{"a":[1]}`},
		{"```\n{\"b\": true}\n```", `{"b":true}`},
		{`The verdict is {"passed": false, "reason": "no {braces} here"} as you see.`, `{"passed":false,"reason":"no {braces} here"}`},
		{`first [oops then {"ok": 1}`, `{"ok":1}`},
		{"no json at all", ""},
		{`{"broken": }`, ""},
	}
	for _, tt := range tests {
		v, ok := extractJSON(tt.in)
		got := ""
		if ok {
			b, _ := json.Marshal(v)
			got = string(b)
		}
		if got != tt.want {
			t.Errorf("extractJSON(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, "```json\n[1]\n```", `x {"a": "}"} y`, `[[[`, `{"a": "\"}"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := extractJSON(s)
		if !ok {
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("extracted a value that is not JSON: %v", err)
		}
	})
}
