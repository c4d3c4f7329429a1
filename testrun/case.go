package testrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/hint"
	"github.com/agentbox/agentbox/internal/units"
)

// Case is one agent test case: a line (or object) of a JSONL file in Yao's
// format (agent/test types.go, Case).
type Case struct {
	// ID names the case; ids are unique within a file.
	ID string `json:"id"`
	// Input is what the user says: a text, one message {role, content}, or
	// a conversation (a list of messages whose last is the user's turn).
	// Content may be text parts and file parts ({"type": "file", "source":
	// "file://path"}, relative to the JSONL file).
	Input any `json:"input"`
	// Expected, without Assert, is compared with the output as equals is.
	Expected any `json:"expected,omitempty"`
	// Assert holds the assertions (an object, a list, or a type name).
	Assert Assertions `json:"assert,omitempty"`
	// User and Team are the case's user and team ids (-u and -t win).
	User string `json:"user,omitempty"`
	Team string `json:"team,omitempty"`
	// Metadata is the request's metadata (ctx.metadata in hooks).
	Metadata map[string]any `json:"metadata,omitempty"`
	// Options are Yao's per-case context options.
	Options *CaseOptions `json:"options,omitempty"`
	// Skip leaves the case out (reported as skipped).
	Skip bool `json:"skip,omitempty"`
	// Timeout bounds the case ("30s", "2m"); the run's --timeout otherwise.
	Timeout string `json:"timeout,omitempty"`
	// Before and After name functions of the assistant's *_test.ts files
	// ("env_test.Before") run around the case.
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Simulator, with Checkpoints, makes the case dynamic: an assistant
	// plays the user turn after turn until every required checkpoint is
	// reached, it says the goal is achieved, or MaxTurns (default 20).
	Simulator   *Simulator    `json:"simulator,omitempty"`
	Checkpoints []*Checkpoint `json:"checkpoints,omitempty"`
	MaxTurns    int           `json:"max_turns,omitempty"`

	// File and Line say where the case was read from.
	File string `json:"-"`
	Line int    `json:"-"`

	timeout time.Duration
	msgs    *parsedInput
}

// CaseOptions are Yao's per-case context options. agentbox applies
// connector and metadata; the others are Yao's switches for features it
// does not have (history loading, traces, search, modes), accepted so that
// Yao's files load, and listed in the result's notes when set.
type CaseOptions struct {
	Connector            string         `json:"connector,omitempty"`
	Skip                 *CaseSkip      `json:"skip,omitempty"`
	DisableGlobalPrompts bool           `json:"disable_global_prompts,omitempty"`
	Search               *bool          `json:"search,omitempty"`
	Mode                 string         `json:"mode,omitempty"`
	Metadata             map[string]any `json:"metadata,omitempty"`
}

// CaseSkip is Yao's options.skip.
type CaseSkip struct {
	History bool `json:"history,omitempty"`
	Trace   bool `json:"trace,omitempty"`
	Output  bool `json:"output,omitempty"`
	Keyword bool `json:"keyword,omitempty"`
	Search  bool `json:"search,omitempty"`
}

// Simulator is the assistant that plays the user of a dynamic case.
type Simulator struct {
	// Use is the simulator's assistant id (no "agents:" prefix).
	Use     string            `json:"use"`
	Options *SimulatorOptions `json:"options,omitempty"`
}

// SimulatorOptions are passed to the simulator: Metadata's persona and goal
// become fields of its input, the rest its extra.
type SimulatorOptions struct {
	Metadata  map[string]any `json:"metadata,omitempty"`
	Connector string         `json:"connector,omitempty"`
}

// Checkpoint is what a dynamic case waits for in the assistant's answers.
type Checkpoint struct {
	ID          string     `json:"id"`
	Description string     `json:"description,omitempty"`
	Assert      Assertions `json:"assert"`
	// After are checkpoints that must be reached first.
	After []string `json:"after,omitempty"`
	// Required (default true): an optional checkpoint never fails a case.
	Required *bool `json:"required,omitempty"`
}

// IsRequired reports whether the case fails without this checkpoint.
func (cp *Checkpoint) IsRequired() bool { return cp.Required == nil || *cp.Required }

// Dynamic reports whether the case is driven by a simulator.
func (c *Case) Dynamic() bool { return c.Simulator != nil && len(c.Checkpoints) > 0 }

// maxTurns is a dynamic case's turn bound.
func (c *Case) maxTurns() int {
	if c.MaxTurns > 0 {
		return c.MaxTurns
	}
	return 20
}

// TimeoutOr returns the case's timeout, def when it sets none.
func (c *Case) TimeoutOr(def time.Duration) time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return def
}

// caseFields are the keys a case may have, for "did you mean".
var caseFields = []string{"id", "input", "expected", "assert", "assertions", "user", "team", "metadata", "options",
	"skip", "timeout", "before", "after", "simulator", "checkpoints", "max_turns"}

// LoadCases reads a JSONL file of cases. Blank lines and lines starting
// with // are skipped; an object may span lines. Unknown fields, wrong
// types, a missing id or input, duplicate ids, bad timeouts, unknown
// assertion types and bad patterns are errors naming file:line.
func LoadCases(path string) ([]*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("test cases: %s does not exist", path)
		}
		return nil, fmt.Errorf("test cases: %w", err)
	}
	return ParseCases(data, path)
}

// ParseCases parses JSONL cases; name is used in messages.
func ParseCases(data []byte, name string) ([]*Case, error) {
	data = blankComments(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	var cases []*Case
	seen := map[string]int{}
	var errs []error
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			break
		}
		line := lineAt(data, start)
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line = lineAt(data, int(se.Offset)-1)
			}
			errs = append(errs, fmt.Errorf("%s:%d: invalid JSON: %v", name, line, err))
			break // the decoder cannot resynchronise
		}
		c, err := parseCase(raw)
		if err != nil {
			id := ""
			if c != nil && c.ID != "" {
				id = " (case " + c.ID + ")"
			}
			errs = append(errs, fmt.Errorf("%s:%d%s: %v", name, line, id, err))
			continue
		}
		c.File, c.Line = name, line
		if prev, dup := seen[c.ID]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: case id %q is also used on line %d", name, line, c.ID, prev))
			continue
		}
		seen[c.ID] = line
		cases = append(cases, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no test cases (want one JSON object a line: {\"id\": \"T001\", \"input\": \"Hello\", \"assert\": {...}})", name)
	}
	return cases, nil
}

// parseCase decodes and checks one case.
func parseCase(raw json.RawMessage) (*Case, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("a case must be a JSON object")
	}
	// "assertions" is the name generated cases use (Yao's mapToCase).
	var alias struct {
		Assertions json.RawMessage `json:"assertions"`
	}
	_ = json.Unmarshal(raw, &alias)
	type plain Case
	var c plain
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	delete(fields, "assertions")
	for k := range fields {
		if !slices.Contains(caseFields, k) {
			return &Case{ID: idOf(fields)}, unknownField("case", k, caseFields)
		}
	}
	clean, _ := json.Marshal(fields)
	if err := strictUnmarshal(clean, &c); err != nil {
		return &Case{ID: idOf(fields)}, err
	}
	tc := Case(c)
	if tc.Assert == nil && len(alias.Assertions) > 0 {
		if err := tc.Assert.UnmarshalJSON(alias.Assertions); err != nil {
			return &tc, fmt.Errorf("assertions: %w", err)
		}
	}
	return &tc, tc.check()
}

func idOf(fields map[string]json.RawMessage) string {
	var id string
	_ = json.Unmarshal(fields["id"], &id)
	return id
}

// check validates a decoded case.
func (c *Case) check() error {
	switch {
	case strings.TrimSpace(c.ID) == "":
		return errors.New("missing \"id\"")
	case c.Input == nil && !c.Dynamic():
		return errors.New("missing \"input\"")
	}
	if c.Timeout != "" {
		d, err := units.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q: want a duration such as \"30s\" or \"2m\"", c.Timeout)
		}
		c.timeout = d
	}
	if c.Input != nil {
		p, err := parseInput(c.Input)
		if err != nil {
			return fmt.Errorf("input: %w", err)
		}
		c.msgs = p
	}
	if err := c.Assert.check("assert"); err != nil {
		return err
	}
	if c.Simulator != nil && len(c.Checkpoints) == 0 {
		return errors.New("a simulator needs checkpoints: the case ends when they are reached")
	}
	if len(c.Checkpoints) > 0 && c.Simulator == nil {
		// Yao runs such a case as a plain one; its checkpoints are then
		// never looked at, which is surely not what its author meant.
		return errors.New("checkpoints need a simulator (\"simulator\": {\"use\": \"tests.simulator\"}) to drive the conversation")
	}
	if c.Simulator != nil && strings.TrimSpace(c.Simulator.Use) == "" {
		return errors.New("simulator.use: missing: name the assistant that plays the user")
	}
	ids := map[string]bool{}
	for i, cp := range c.Checkpoints {
		where := fmt.Sprintf("checkpoints[%d]", i)
		if cp == nil || cp.ID == "" {
			return fmt.Errorf("%s: missing \"id\"", where)
		}
		if ids[cp.ID] {
			return fmt.Errorf("%s: checkpoint id %q is used twice", where, cp.ID)
		}
		ids[cp.ID] = true
		if len(cp.Assert) == 0 {
			return fmt.Errorf("%s (%s): missing \"assert\"", where, cp.ID)
		}
		if err := cp.Assert.check(where + ".assert"); err != nil {
			return err
		}
	}
	for i, cp := range c.Checkpoints {
		for _, a := range cp.After {
			if !ids[a] {
				return fmt.Errorf("checkpoints[%d] (%s): after names %q, which is not a checkpoint of this case", i, cp.ID, a)
			}
		}
	}
	if c.MaxTurns < 0 {
		return fmt.Errorf("max_turns %d: want a positive number", c.MaxTurns)
	}
	return nil
}

// Assertions is a case's "assert": Yao accepts one assertion object, a
// list of them, or a bare type name ("contains").
type Assertions []*Assertion

// UnmarshalJSON reads an object, a list of objects or a string.
func (as *Assertions) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*as = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*as = Assertions{{Type: s}}
		return nil
	case b[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		out := make(Assertions, 0, len(items))
		for i, it := range items {
			a, err := parseAssertion(it)
			if err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, a)
		}
		*as = out
		return nil
	case b[0] == '{':
		a, err := parseAssertion(b)
		if err != nil {
			return err
		}
		*as = Assertions{a}
		return nil
	}
	return errors.New("want an assertion object, a list of them, or a type name")
}

// assertionFields are the keys an assertion may have.
var assertionFields = []string{"type", "value", "path", "script", "use", "options", "message", "negate"}

func parseAssertion(b []byte) (*Assertion, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, errors.New("an assertion must be an object like {\"type\": \"contains\", \"value\": \"Hi\"}")
	}
	for k := range fields {
		if !slices.Contains(assertionFields, k) {
			return nil, unknownField("assertion", k, assertionFields)
		}
	}
	var a Assertion
	if err := strictUnmarshal(b, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (as Assertions) check(where string) error {
	for i, a := range as {
		w := where
		if len(as) > 1 {
			w = fmt.Sprintf("%s[%d]", where, i)
		}
		if err := a.check(); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// strictUnmarshal decodes JSON refusing unknown fields, with messages that
// name the field and suggest a close known one.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: want %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s", f)
		}
		return err
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "float64":
		return "a number"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	}
	return k
}

func unknownField(what, k string, known []string) error {
	if best := hint.Closest(k, known); best != "" {
		return fmt.Errorf("unknown %s field %q: did you mean %q?", what, k, best)
	}
	return fmt.Errorf("unknown %s field %q (known: %s)", what, k, strings.Join(known, ", "))
}

// commentLine matches a line that is a // comment.
var commentLine = regexp.MustCompile(`(?m)^[ \t]*//.*$`)

// blankComments replaces comment lines with spaces, so offsets and line
// numbers stay those of the file.
func blankComments(data []byte) []byte {
	return commentLine.ReplaceAllFunc(data, func(m []byte) []byte { return bytes.Repeat([]byte(" "), len(m)) })
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// lineAt is the 1-based line of byte offset i.
func lineAt(data []byte, i int) int {
	i = min(max(i, 0), len(data))
	return bytes.Count(data[:i], []byte("\n")) + 1
}
