package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentbox/agentbox/internal/units"
)

// Script is what a scripted server answers: a list of turns, each consumed
// by one model request of the agent loop (see the package doc for which
// requests count). A Script is read-only once given to NewServer.
type Script struct {
	// Turns are the scripted model responses, in order.
	Turns []Turn `json:"turns" yaml:"turns"`
}

// Turn is one scripted model response. The zero Turn answers an empty text.
// Text, Thinking and ToolCalls combine into one assistant message (blocks in
// the order thinking, text, tool calls); Error replaces the whole response.
type Turn struct {
	// Text is the assistant's text answer.
	Text string `json:"text,omitempty" yaml:"text,omitempty"`
	// Thinking is an extended-thinking block sent before the text (Anthropic:
	// thinking_delta plus signature_delta; OpenAI: reasoning_content).
	Thinking string `json:"thinking,omitempty" yaml:"thinking,omitempty"`
	// ToolCalls are tool_use blocks (OpenAI: tool_calls) after the text.
	ToolCalls []ToolCall `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	// Error, when set, answers with this HTTP error instead of a message.
	Error *HTTPError `json:"error,omitempty" yaml:"error,omitempty"`
	// Stall sends the response headers and the first events (message_start
	// and a ping) and then hangs until the client goes away or the server
	// closes.
	Stall bool `json:"stall,omitempty" yaml:"stall,omitempty"`
	// CutAfter, when positive, drops the connection after that many SSE
	// events of a streamed response, without a clean end of stream.
	CutAfter int `json:"cut_after,omitempty" yaml:"cut_after,omitempty"`
	// Delay waits this long before responding ("200ms" in files).
	Delay Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	// When restricts the turn to requests that match; nil matches any.
	When *Match `json:"when,omitempty" yaml:"when,omitempty"`
	// Usage overrides the token counts reported; nil computes them from the
	// request and response sizes (about four bytes a token).
	Usage *Usage `json:"usage,omitempty" yaml:"usage,omitempty"`
	// StopReason overrides the stop reason ("end_turn", "tool_use",
	// "max_tokens", ...); empty means tool_use when there are tool calls and
	// end_turn otherwise. OpenAI responses map it to finish_reason.
	StopReason string `json:"stop_reason,omitempty" yaml:"stop_reason,omitempty"`
}

// ToolCall is one tool invocation the model asks for.
type ToolCall struct {
	// ID is the tool_use id; empty means one is generated ("toolu_...",
	// unique within the server).
	ID string `json:"id,omitempty" yaml:"id,omitempty"`
	// Name is the tool name, e.g. "Write" or "Bash". Required.
	Name string `json:"name" yaml:"name"`
	// Input is the tool input, an object (nil sends {}).
	Input any `json:"input,omitempty" yaml:"input,omitempty"`
}

// HTTPError is a scripted API error response.
type HTTPError struct {
	// Status is the HTTP status, 400 to 599 (e.g. 500, 529, 429).
	Status int `json:"status" yaml:"status"`
	// Type is the error type; empty picks the API's usual one for Status
	// (429 rate_limit_error, 529 overloaded_error, 500 api_error, ...).
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Message is the error message; empty gives a generic one.
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
	// RetryAfter, when positive, sets the retry-after header (seconds).
	RetryAfter int `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
}

// Match selects the requests a turn answers. All set fields must match.
type Match struct {
	// AfterToolResult matches when the latest user message (OpenAI: the
	// trailing tool messages) holds a tool_result for a tool call of this
	// tool name.
	AfterToolResult string `json:"after_tool_result,omitempty" yaml:"after_tool_result,omitempty"`
	// Contains matches when the latest user message's text contains this.
	Contains string `json:"contains,omitempty" yaml:"contains,omitempty"`
	// PromptContains matches when the user's latest prompt (the latest user
	// message with text and no tool result) contains this, also on the
	// requests after a tool result of that turn: a script tells one prompt's
	// agent loop from another's with it.
	PromptContains string `json:"prompt_contains,omitempty" yaml:"prompt_contains,omitempty"`
	// Sees matches when a message the request added after the model's
	// latest answer, of any role, tool results included, contains this:
	// Claude Code hands a message its user sent into a running turn to
	// the model's next request as a system reminder, in the tool result's
	// content or as a role "system" message beside it.
	Sees string `json:"sees,omitempty" yaml:"sees,omitempty"`
}

// Usage is the token usage a response reports.
type Usage struct {
	InputTokens  int `json:"input_tokens" yaml:"input_tokens"`
	OutputTokens int `json:"output_tokens" yaml:"output_tokens"`
}

// Duration is a time.Duration written as a Go duration string ("200ms",
// "1.5s") in script files; see units.ParseDuration. It is never negative.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "200ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "200ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"200ms\"")
	}
	return d.set(s)
}

// MarshalYAML writes the duration as a string such as "200ms".
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML reads a duration string such as "200ms".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!int" || n.Tag == "!!float" {
		return fmt.Errorf("line %d: duration must be a string like \"200ms\"", n.Line)
	}
	if err := d.set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

func (d *Duration) set(s string) error {
	v, err := units.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. \"200ms\")", s)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// LoadScript reads a script file: JSON for .json, YAML for .yaml/.yml.
// Decoding is strict: unknown fields, wrong types and invalid turns are
// errors naming the file, line and column.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	s, err := ParseScript(data, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return s, nil
}

// ParseScript decodes a script from data in format "json" or "yaml" (also
// "yml"), with the same strictness as LoadScript. Errors start with
// "LINE:COL: " so callers can prefix a file name.
func ParseScript(data []byte, format string) (*Script, error) {
	switch strings.ToLower(strings.TrimPrefix(format, ".")) {
	case "json":
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line, col := lineCol(data, max(se.Offset-1, 0))
				return nil, fmt.Errorf("%d:%d: invalid JSON: %v", line, col, se)
			}
			return nil, fmt.Errorf("1:1: invalid JSON: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("1:1: script must be an object with a \"turns\" list")
		}
	case "yaml", "yml":
	default:
		return nil, fmt.Errorf("1:1: unknown script format %q (want json or yaml)", format)
	}
	// JSON is parsed as YAML too (JSON is a subset of YAML's flow style), so
	// both formats share one strict, positioned decoder.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s", positioned(err.Error()))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("1:1: empty script (want a \"turns\" list)")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%d:%d: script must be a mapping with a \"turns\" list", root.Line, root.Column)
	}
	if errs := checkFields(root, reflect.TypeOf(Script{}), ""); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var s Script
	if err := root.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s", positioned(err.Error()))
	}
	var turnNodes []*yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "turns" && root.Content[i+1].Kind == yaml.SequenceNode {
			turnNodes = root.Content[i+1].Content
		}
	}
	var errs []error
	for i, t := range s.Turns {
		if err := t.validate(); err != nil {
			line, col := 1, 1
			if i < len(turnNodes) {
				line, col = turnNodes[i].Line, turnNodes[i].Column
			}
			errs = append(errs, fmt.Errorf("%d:%d: turn %d: %w", line, col, i+1, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &s, nil
}

// Validate reports the first invalid turn of s, for scripts built in Go.
func (s *Script) Validate() error {
	for i, t := range s.Turns {
		if err := t.validate(); err != nil {
			return fmt.Errorf("turn %d: %w", i+1, err)
		}
	}
	return nil
}

func (t *Turn) validate() error {
	for i, c := range t.ToolCalls {
		if strings.TrimSpace(c.Name) == "" {
			return fmt.Errorf("tool call %d has no name", i+1)
		}
		if c.Input != nil {
			if _, ok := normalize(c.Input).(map[string]any); !ok {
				return fmt.Errorf("tool call %d (%s): input must be an object", i+1, c.Name)
			}
		}
	}
	if e := t.Error; e != nil {
		if e.Status < 400 || e.Status > 599 {
			return fmt.Errorf("error status %d is not an HTTP error (want 400-599)", e.Status)
		}
		if t.Text != "" || t.Thinking != "" || len(t.ToolCalls) > 0 || t.Stall || t.CutAfter != 0 {
			return fmt.Errorf("an error turn cannot also have text, thinking, tool calls, stall or cut_after")
		}
		if e.RetryAfter < 0 {
			return fmt.Errorf("negative retry_after %d", e.RetryAfter)
		}
	}
	if t.CutAfter < 0 {
		return fmt.Errorf("negative cut_after %d", t.CutAfter)
	}
	if t.Stall && t.CutAfter > 0 {
		return fmt.Errorf("stall and cut_after exclude each other")
	}
	if t.Delay < 0 {
		return fmt.Errorf("negative delay")
	}
	if t.When != nil && t.When.AfterToolResult == "" && t.When.Contains == "" && t.When.PromptContains == "" && t.When.Sees == "" {
		return fmt.Errorf("when: set after_tool_result, contains, prompt_contains or sees")
	}
	if t.Usage != nil && (t.Usage.InputTokens < 0 || t.Usage.OutputTokens < 0) {
		return fmt.Errorf("negative usage")
	}
	return nil
}

// checkFields reports every mapping key that names no field of t, with its
// position and the known field names.
func checkFields(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(Duration(0)) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return []error{fmt.Errorf("%d:%d: %s must be a mapping", n.Line, n.Column, name(path))}
		}
		fields := map[string]reflect.Type{}
		var known []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = f.Type
			known = append(known, tag)
		}
		sort.Strings(known)
		var errs []error
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("%d:%d: unknown field %q in %s (known: %s)", k.Line, k.Column, k.Value, name(path), strings.Join(known, ", ")))
				continue
			}
			if seen[k.Value] {
				errs = append(errs, fmt.Errorf("%d:%d: duplicate field %q in %s", k.Line, k.Column, k.Value, name(path)))
			}
			seen[k.Value] = true
			errs = append(errs, checkFields(v, ft, join(path, k.Value))...)
		}
		return errs
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Tag == "!!null" {
				return nil
			}
			return []error{fmt.Errorf("%d:%d: %s must be a list", n.Line, n.Column, name(path))}
		}
		var errs []error
		for i, c := range n.Content {
			errs = append(errs, checkFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	}
	return nil
}

func name(path string) string {
	if path == "" {
		return "script"
	}
	return path
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// positioned rewrites yaml.v3's "yaml: line N: msg" into "N:1: msg".
func positioned(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
		_, rest, _ := strings.Cut(msg, ":")
		return fmt.Sprintf("%d:1:%s", line, rest)
	}
	return "1:1: " + msg
}

func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// normalize turns YAML-decoded values (map[string]any, but possibly
// map[any]any from Go callers) into JSON-encodable ones.
func normalize(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	case json.RawMessage:
		var out any
		if json.Unmarshal(x, &out) == nil {
			return out
		}
	}
	// Structs and other Go values: round-trip through JSON.
	if v != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Struct || (rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Struct) {
			b, err := json.Marshal(v)
			if err == nil {
				var out any
				if json.Unmarshal(b, &out) == nil {
					return out
				}
			}
		}
	}
	return v
}
