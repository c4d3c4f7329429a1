package testrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentbox/agentbox/internal/hint"
	"github.com/agentbox/agentbox/internal/jsonpath"
)

// Assertion is one check of an answer (Yao's Assertion).
type Assertion struct {
	// Type is one of AssertionTypes ("" means equals).
	Type string `json:"type"`
	// Value is the expected value, pattern, type name, schema, tool or
	// criteria, depending on Type.
	Value any `json:"value,omitempty"`
	// Path is json_path's path ("$.field", "items[0].name").
	Path string `json:"path,omitempty"`
	// Script is a script assertion's function ("scripts.tests.Check" or
	// "agents.<assistant>.<file>.<Function>").
	Script string `json:"script,omitempty"`
	// Use is the judge of an agent assertion ("agents:tests.validator").
	Use     string            `json:"use,omitempty"`
	Options *AssertionOptions `json:"options,omitempty"`
	// Message replaces the failure message.
	Message string `json:"message,omitempty"`
	// Negate inverts the result.
	Negate bool `json:"negate,omitempty"`

	re     *regexp.Regexp
	schema *jsonschema.Resolved
}

// AssertionOptions are an agent assertion's connector and the metadata
// passed to the judge.
type AssertionOptions struct {
	Connector string         `json:"connector,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// AssertionTypes are the assertion types, Yao's and schema (which Yao
// documents and agentbox runs).
var AssertionTypes = []string{"equals", "contains", "not_contains", "regex", "json_path", "type", "schema",
	"tool_called", "tool_result", "script", "agent"}

// typeNames are type's values.
var typeNames = []string{"string", "number", "boolean", "array", "object", "null"}

// check validates the assertion when it is loaded.
func (a *Assertion) check() error {
	if a == nil {
		return errors.New("an assertion is null")
	}
	typ := a.Type
	if typ == "" {
		typ = "equals"
	}
	if !slices.Contains(AssertionTypes, typ) {
		msg := "known: " + strings.Join(AssertionTypes, ", ")
		if best := hint.Closest(typ, AssertionTypes); best != "" {
			msg = fmt.Sprintf("did you mean %q?", best)
		}
		return fmt.Errorf("unknown assertion type %q: %s", a.Type, msg)
	}
	switch typ {
	case "contains", "not_contains":
		if a.Value == nil {
			return fmt.Errorf("%s needs a value", typ)
		}
	case "regex":
		s, ok := a.Value.(string)
		if !ok {
			return fmt.Errorf("regex: the value must be a pattern string, got %s", describe(a.Value))
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return fmt.Errorf("regex %q: %v", s, err)
		}
		a.re = re
	case "json_path":
		if strings.TrimSpace(a.Path) == "" {
			return errors.New("json_path needs a path (\"$.field\", \"items[0].name\")")
		}
	case "type":
		s, ok := a.Value.(string)
		if !ok || !slices.Contains(typeNames, s) {
			return fmt.Errorf("type: the value must be one of %s, got %v", strings.Join(typeNames, ", "), a.Value)
		}
	case "schema":
		o, ok := a.Value.(map[string]any)
		if !ok {
			return fmt.Errorf("schema: the value must be a JSON Schema object, got %s", describe(a.Value))
		}
		b, _ := json.Marshal(o)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("schema: %v", err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			return fmt.Errorf("schema: %v", err)
		}
		a.schema = r
	case "tool_called":
		switch v := a.Value.(type) {
		case string:
			if v == "" {
				return errors.New("tool_called: the tool name is empty")
			}
		case []any:
			for _, n := range v {
				if _, ok := n.(string); !ok {
					return errors.New("tool_called: a list of tool names must hold strings")
				}
			}
		case map[string]any:
			if n, _ := v["name"].(string); n == "" {
				return errors.New("tool_called: an object value needs \"name\" (and optional \"arguments\")")
			}
		default:
			return fmt.Errorf("tool_called: the value must be a tool name, a list of names or {name, arguments}, got %s", describe(a.Value))
		}
	case "tool_result":
		v, ok := a.Value.(map[string]any)
		if n, _ := v["tool"].(string); !ok || n == "" {
			return errors.New("tool_result: the value must be {\"tool\": NAME, \"result\": EXPECTED}")
		}
	case "script":
		if a.scriptName() == "" {
			return errors.New("script needs \"script\": the function to run (\"scripts.tests.Check\")")
		}
	case "agent":
		if !strings.HasPrefix(a.Use, "agents:") || strings.TrimPrefix(a.Use, "agents:") == "" {
			return fmt.Errorf("agent needs \"use\": \"agents:<judge assistant>\", got %q", a.Use)
		}
	}
	return nil
}

// scriptName is a script assertion's function: "script", or Yao's
// "use": "scripts:...".
func (a *Assertion) scriptName() string {
	if a.Script != "" {
		return a.Script
	}
	if s, ok := strings.CutPrefix(a.Use, "scripts:"); ok {
		return "scripts." + s
	}
	return ""
}

// AssertionResult is the outcome of one assertion.
type AssertionResult struct {
	Passed    bool       `json:"passed"`
	Message   string     `json:"message,omitempty"`
	Assertion *Assertion `json:"assertion,omitempty"`
	Actual    any        `json:"actual,omitempty"`
	Expected  any        `json:"expected,omitempty"`
}

// Answer is what the assertions of a turn look at.
type Answer struct {
	// Output is Yao's output: what a Next hook returned as data, else the
	// answer text, else the message of the tool results.
	Output any
	// Input is the case's input (given to judges and scripts).
	Input any
	// ToolCalls are the tools the agent called, with their results.
	ToolCalls []ToolCall
}

// checker runs the assertions that need the app: scripts and judges.
type checker interface {
	judge(ctx context.Context, a *Assertion, output, input any) *AssertionResult
	script(ctx context.Context, a *Assertion, output, input any) *AssertionResult
}

// evaluate runs every assertion of as on ans; with none, expected (when
// set) is compared as equals is.
func evaluate(ctx context.Context, ck checker, as Assertions, expected any, ans *Answer) []*AssertionResult {
	if len(as) == 0 {
		if expected == nil {
			return nil
		}
		as = Assertions{{Type: "equals", Value: expected}}
	}
	out := make([]*AssertionResult, 0, len(as))
	for _, a := range as {
		out = append(out, evaluateOne(ctx, ck, a, ans))
	}
	return out
}

// failures joins the messages of the failed assertions (each one's own
// message when it set one), "" when all passed.
func failures(rs []*AssertionResult) string {
	var msgs []string
	for _, r := range rs {
		if r.Passed {
			continue
		}
		msg := r.Message
		if r.Assertion != nil && r.Assertion.Message != "" {
			msg = r.Assertion.Message
		}
		msgs = append(msgs, msg)
	}
	return strings.Join(msgs, "; ")
}

func evaluateOne(ctx context.Context, ck checker, a *Assertion, ans *Answer) *AssertionResult {
	var r *AssertionResult
	switch a.Type {
	case "equals", "":
		r = assertEquals(a, ans.Output)
	case "contains":
		r = assertContains(a, ans.Output)
	case "not_contains":
		r = assertContains(a, ans.Output)
		r.Passed = !r.Passed
		if r.Passed {
			r.Message = fmt.Sprintf("output does not contain %q", toText(a.Value))
		} else {
			r.Message = fmt.Sprintf("output should not contain %q", toText(a.Value))
		}
	case "regex":
		r = assertRegex(a, ans.Output)
	case "json_path":
		r = assertJSONPath(a, ans.Output)
	case "type":
		got := typeOf(ans.Output)
		r = &AssertionResult{Passed: got == a.Value, Actual: got, Expected: a.Value}
		if r.Passed {
			r.Message = fmt.Sprintf("output is of type %s", got)
		} else {
			r.Message = fmt.Sprintf("expected type %v, got %s", a.Value, got)
		}
	case "schema":
		r = assertSchema(a, ans.Output)
	case "tool_called":
		r = assertToolCalled(a, ans.ToolCalls)
	case "tool_result":
		r = assertToolResult(a, ans.ToolCalls)
	case "script":
		r = ck.script(ctx, a, ans.Output, ans.Input)
	case "agent":
		r = ck.judge(ctx, a, ans.Output, ans.Input)
	default:
		r = &AssertionResult{Message: "unknown assertion type: " + a.Type}
	}
	r.Assertion = a
	if a.Negate {
		r.Passed = !r.Passed
		if r.Passed {
			r.Message = "negated assertion passed"
		} else {
			r.Message = "negated: " + r.Message
		}
	}
	return r
}

func assertEquals(a *Assertion, out any) *AssertionResult {
	r := &AssertionResult{Actual: out, Expected: a.Value}
	if sameJSON(out, a.Value) {
		r.Passed, r.Message = true, "values are equal"
	} else {
		r.Message = fmt.Sprintf("expected %s, got %s", preview(a.Value, 200), preview(out, 200))
	}
	return r
}

func assertContains(a *Assertion, out any) *AssertionResult {
	want := toText(a.Value)
	r := &AssertionResult{Actual: out, Expected: a.Value}
	if strings.Contains(toText(out), want) {
		r.Passed, r.Message = true, fmt.Sprintf("output contains %q", want)
	} else {
		r.Message = fmt.Sprintf("output does not contain %q", want)
	}
	return r
}

func assertRegex(a *Assertion, out any) *AssertionResult {
	r := &AssertionResult{Actual: out, Expected: a.Value}
	re := a.re
	if re == nil { // built by hand rather than loaded
		var err error
		if re, err = regexp.Compile(toText(a.Value)); err != nil {
			r.Message = "invalid regex pattern: " + err.Error()
			return r
		}
	}
	if re.MatchString(toText(out)) {
		r.Passed, r.Message = true, fmt.Sprintf("output matches pattern %q", re.String())
	} else {
		r.Message = fmt.Sprintf("output does not match pattern %q", re.String())
	}
	return r
}

// structured returns out as JSON data: an object or list as it is, JSON
// found in text (bare, in a ```json block, or embedded in prose).
func structured(out any) (any, bool) {
	switch v := out.(type) {
	case map[string]any, []any:
		return v, true
	case string:
		return extractJSON(v)
	}
	return nil, false
}

func assertJSONPath(a *Assertion, out any) *AssertionResult {
	r := &AssertionResult{Expected: a.Value}
	data, ok := structured(out)
	if !ok {
		r.Message = "output is not JSON: " + preview(out, 200)
		return r
	}
	got := jsonpath.Get(data, a.Path)
	r.Actual = got
	if sameJSON(got, a.Value) {
		r.Passed, r.Message = true, fmt.Sprintf("path %s equals the expected value", a.Path)
		return r
	}
	// A list of expected values matches a value that is any one of them
	// (Yao's IN semantics).
	if list, isList := a.Value.([]any); isList {
		if _, gotList := got.([]any); !gotList {
			for _, want := range list {
				if sameJSON(got, want) {
					r.Passed, r.Message = true, fmt.Sprintf("path %s equals one of the expected values", a.Path)
					return r
				}
			}
		}
	}
	r.Message = fmt.Sprintf("path %s: expected %s, got %s", a.Path, preview(a.Value, 100), preview(got, 100))
	return r
}

func assertSchema(a *Assertion, out any) *AssertionResult {
	r := &AssertionResult{Actual: out}
	data, ok := structured(out)
	if !ok {
		if _, isText := out.(string); isText || out == nil {
			r.Message = "output is not JSON: " + preview(out, 200)
			return r
		}
		data = out
	}
	if err := a.schema.Validate(data); err != nil {
		r.Message = "output does not match the schema: " + err.Error()
		return r
	}
	r.Passed, r.Message = true, "output matches the schema"
	return r
}

func assertToolCalled(a *Assertion, calls []ToolCall) *AssertionResult {
	r := &AssertionResult{Expected: a.Value}
	if len(calls) == 0 {
		r.Message = "no tools were called"
		return r
	}
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Tool
	}
	r.Actual = names
	switch v := a.Value.(type) {
	case string:
		for _, c := range calls {
			if matchToolName(c, v) {
				r.Passed, r.Message = true, fmt.Sprintf("tool %q was called", v)
				return r
			}
		}
		r.Message = fmt.Sprintf("tool %q was not called; called: %s", v, strings.Join(names, ", "))
	case []any:
		for _, want := range v {
			s, _ := want.(string)
			for _, c := range calls {
				if matchToolName(c, s) {
					r.Passed, r.Message = true, fmt.Sprintf("tool %q was called", s)
					return r
				}
			}
		}
		r.Message = "none of the expected tools was called; called: " + strings.Join(names, ", ")
	case map[string]any:
		name, _ := v["name"].(string)
		args, hasArgs := v["arguments"]
		for _, c := range calls {
			if !matchToolName(c, name) {
				continue
			}
			if !hasArgs || subsetMatch(c.Arguments, args) {
				r.Passed = true
				r.Message = fmt.Sprintf("tool %q was called", name)
				if hasArgs {
					r.Message += " with matching arguments"
				}
				return r
			}
		}
		if hasArgs {
			r.Message = fmt.Sprintf("tool %q was not called with the expected arguments; called: %s", name, strings.Join(names, ", "))
		} else {
			r.Message = fmt.Sprintf("tool %q was not called; called: %s", name, strings.Join(names, ", "))
		}
	}
	return r
}

func assertToolResult(a *Assertion, calls []ToolCall) *AssertionResult {
	r := &AssertionResult{Expected: a.Value}
	spec, _ := a.Value.(map[string]any)
	name, _ := spec["tool"].(string)
	want, hasWant := spec["result"]
	if len(calls) == 0 {
		r.Message = "no tools were called"
		return r
	}
	for _, c := range calls {
		if !matchToolName(c, name) {
			continue
		}
		r.Actual = c.Result
		switch {
		case c.Error != "":
			r.Message = fmt.Sprintf("tool %q returned an error: %s", name, c.Error)
		case !hasWant || want == nil:
			r.Passed, r.Message = true, fmt.Sprintf("tool %q ran without error", name)
		case matchResult(c.Result, want):
			r.Passed, r.Message = true, fmt.Sprintf("tool %q's result matches", name)
		default:
			r.Message = fmt.Sprintf("tool %q's result does not match: got %s", name, preview(c.Result, 200))
		}
		return r
	}
	r.Message = fmt.Sprintf("tool %q was not called", name)
	return r
}

// matchToolName matches Yao's way: the exact name, the name after a
// server prefix ("agents_expense_tools__setup", "mcp__clock__now"), or a
// part of it.
func matchToolName(c ToolCall, want string) bool {
	if want == "" {
		return false
	}
	for _, got := range []string{c.Name, c.Tool} {
		if got == want || strings.HasSuffix(got, "__"+want) || strings.HasSuffix(got, "."+want) || strings.Contains(got, want) {
			return true
		}
	}
	return false
}

// subsetMatch reports whether every key of want is in got with an equal
// value (got may be JSON text).
func subsetMatch(got, want any) bool {
	w, ok := want.(map[string]any)
	if !ok {
		return sameJSON(got, want)
	}
	if s, isText := got.(string); isText {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return false
		}
		got = v
	}
	g, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range w {
		gv, has := g[k]
		if !has || !sameJSON(gv, wv) {
			return false
		}
	}
	return true
}

// matchResult matches a tool result against an expected pattern: objects
// by their keys (recursively), "regex:..." strings as patterns, others by
// value. A result that is JSON text is decoded first.
func matchResult(got, want any) bool {
	if s, isText := got.(string); isText {
		if _, wantText := want.(string); !wantText {
			var v any
			if json.Unmarshal([]byte(s), &v) == nil {
				got = v
			}
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, has := g[k]
			if !has || !matchResult(gv, wv) {
				return false
			}
		}
		return true
	case string:
		if p, ok := strings.CutPrefix(w, "regex:"); ok {
			re, err := regexp.Compile(p)
			return err == nil && re.MatchString(fmt.Sprint(got))
		}
		return fmt.Sprint(got) == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	}
	return sameJSON(got, want)
}

// typeOf names a JSON value's type as Yao's type assertion does.
func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64, float32, int, int64, json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// sameJSON compares two values as JSON data.
func sameJSON(a, b any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize round-trips v through JSON so numbers, maps and lists compare
// alike whatever Go types they came as.
func normalize(v any) any {
	switch v.(type) {
	case nil, string, bool, float64:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// toText is a value as the text assertions see it: a string as it is,
// anything else as JSON.
func toText(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// preview is a value's text, cut to n runes.
func preview(v any, n int) string {
	s := toText(v)
	if v == nil {
		s = "null"
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// fence matches a fenced code block.
var fence = regexp.MustCompile("(?s)```(?:json|JSON)?\\s*\n(.*?)\n?```")

// extractJSON finds JSON in a model's text: the whole text, a fenced code
// block, or the first balanced {...} or [...] in it.
func extractJSON(s string) (any, bool) {
	try := func(t string) (any, bool) {
		t = strings.TrimSpace(t)
		if t == "" || (t[0] != '{' && t[0] != '[') {
			return nil, false
		}
		var v any
		if json.Unmarshal([]byte(t), &v) != nil {
			return nil, false
		}
		return v, true
	}
	if v, ok := try(s); ok {
		return v, true
	}
	for _, m := range fence.FindAllStringSubmatch(s, -1) {
		if v, ok := try(m[1]); ok {
			return v, true
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '{' && s[i] != '[' {
			continue
		}
		if end := balanced(s, i); end > i {
			if v, ok := try(s[i : end+1]); ok {
				return v, true
			}
		}
	}
	return nil, false
}

// balanced returns the index of the bracket closing the one at i, minding
// strings, or -1.
func balanced(s string, i int) int {
	depth, inStr, esc := 0, false, false
	for j := i; j < len(s); j++ {
		c := s[j]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}
