package assistant

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// Overridable is what a request may change of an assistant's model options
// (package.yao "overridable"), each option with its bounds. The operator
// pays for the model with the connector's key, so a caller changes only
// what the assistant allows; any other option in a request is refused with
// an error naming it.
//
// In package.yao every entry is an option name (as in "options") and one of:
//
//	true                          any value
//	false                         not changeable (the same as leaving it out)
//	4096                          a number: the most a numeric option may be
//	["gpt-4o", "gpt-4o-mini"]     the allowed values
//	{"min": 0, "max": 1, "allowed_values": [...]}   Yao's supported_params bounds
//
// max_tokens and max_completion_tokens are one limit under two names: a
// rule for one applies to the other unless it has its own.
//
// Without "overridable" the assistant has DefaultOverridable: direct
// assistants let requests change sampling and function calling
// (temperature, top_p, stop, presence_penalty, frequency_penalty, seed,
// user, logit_bias, response_format, tools, tool_choice,
// parallel_tool_calls; tools, tool_choice and response_format only when
// the assistant sets none of its own) and lower, never raise, the token
// limit; the model, reasoning_effort and n stay the assistant's. Sandboxed
// assistants let requests lower the token limit only.
type Overridable struct {
	// Rules by option name; an option without a rule may not be changed.
	Rules map[string]Bound
	// Explicit is set when package.yao has "overridable" (false: the
	// default rules).
	Explicit bool
}

// Bound limits the values a request may give one option. The zero Bound
// allows any value.
type Bound struct {
	// Min and Max bound a number (nil: unbounded).
	Min, Max *float64
	// Values are the allowed values (strings or numbers); nil allows any.
	Values []any
	// AtMostOwn bounds a token limit by the assistant's own one: a request
	// may lower it, never raise it (the default for max_tokens).
	AtMostOwn bool
}

// sandboxOverridable are the options a sandboxed assistant may let requests
// change: its coding agent chooses its own sampling and tools; the model
// proxy holds it to the model and token limit.
var sandboxOverridable = []string{"model", "max_tokens", "max_completion_tokens"}

// clientTools are the options that carry a client's function calling.
var clientTools = []string{"tools", "tool_choice", "parallel_tool_calls", "response_format"}

// DefaultOverridable returns the rules of an assistant without
// "overridable" (see Overridable).
func DefaultOverridable(sandboxed bool) *Overridable {
	rules := map[string]Bound{
		"max_tokens":            {AtMostOwn: true},
		"max_completion_tokens": {AtMostOwn: true},
	}
	if !sandboxed {
		for _, k := range []string{"temperature", "top_p", "stop", "presence_penalty", "frequency_penalty",
			"seed", "user", "logit_bias", "response_format", "tools", "tool_choice", "parallel_tool_calls"} {
			rules[k] = Bound{}
		}
	}
	return &Overridable{Rules: rules}
}

// optionKinds are the JSON kinds of the model options: "number", "string"
// or "" for options that take only true or false in "overridable".
var optionKinds = func() map[string]string {
	out := map[string]string{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[chat.ModelOptions]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		t := f.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Float64, reflect.Int, reflect.Int64:
			out[name] = "number"
		case reflect.String:
			out[name] = "string"
		default:
			out[name] = ""
		}
	}
	delete(out, "stream") // agentbox always streams
	return out
}()

// parseOverridable checks package.yao "overridable" and builds its rules.
func parseOverridable(d *doc, raw map[string]any, sandboxed bool) *Overridable {
	o := &Overridable{Rules: map[string]Bound{}, Explicit: true}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p := "overridable." + name
		kind, known := optionKinds[name]
		switch {
		case !known:
			d.errPath(p, "%s: %q is not a model option%s", p, name, suggest(name, slices.Sorted(maps.Keys(optionKinds))))
			continue
		case sandboxed && !slices.Contains(sandboxOverridable, name) && raw[name] != false:
			d.errPath(p, "%s: a sandboxed assistant lets requests change only %s: its coding agent chooses its own sampling and tools",
				p, strings.Join(sandboxOverridable, ", "))
			continue
		}
		b, ok := parseBound(d, p, kind, raw[name])
		if ok {
			o.Rules[name] = b
		}
	}
	for _, pair := range [][2]string{{"max_tokens", "max_completion_tokens"}, {"max_completion_tokens", "max_tokens"}} {
		if b, ok := o.Rules[pair[0]]; ok {
			if _, set := raw[pair[1]]; !set {
				o.Rules[pair[1]] = b
			}
		}
	}
	return o
}

// parseBound reads one rule; ok is false for false and for a broken rule.
func parseBound(d *doc, p, kind string, v any) (Bound, bool) {
	switch x := v.(type) {
	case bool:
		return Bound{}, x
	case float64:
		if kind != "number" {
			d.errPath(p, "%s: a number is the most a numeric option may be; for this option use true, false or a list of allowed values", p)
			return Bound{}, false
		}
		return Bound{Max: &x}, true
	case []any:
		vals, ok := allowedValues(d, p, kind, x)
		return Bound{Values: vals}, ok
	case map[string]any:
		var b Bound
		ok := true
		for _, k := range slices.Sorted(maps.Keys(x)) {
			switch k {
			case "min", "max":
				n, isNum := x[k].(float64)
				switch {
				case !isNum:
					d.errPath(p+"."+k, "%s.%s: want a number", p, k)
					ok = false
				case kind != "number":
					d.errPath(p+"."+k, "%s.%s: only numeric options have bounds", p, k)
					ok = false
				case k == "min":
					b.Min = &n
				default:
					b.Max = &n
				}
			case "allowed_values":
				list, isList := x[k].([]any)
				if !isList {
					d.errPath(p+"."+k, "%s.%s: want a list", p, k)
					ok = false
					continue
				}
				vals, good := allowedValues(d, p+"."+k, kind, list)
				b.Values, ok = vals, ok && good
			default:
				d.errPath(p+"."+k, "%s: unknown field %q (known: allowed_values, max, min)", p, k)
				ok = false
			}
		}
		if ok && b.Min != nil && b.Max != nil && *b.Min > *b.Max {
			d.errPath(p, "%s: min %v is over max %v", p, *b.Min, *b.Max)
			ok = false
		}
		return b, ok
	case nil:
		d.errPath(p, "%s: want true, false, a number, a list of allowed values or {min, max, allowed_values}, got null", p)
	default:
		d.errPath(p, "%s: want true, false, a number, a list of allowed values or {min, max, allowed_values}, got a string", p)
	}
	return Bound{}, false
}

func allowedValues(d *doc, p, kind string, list []any) ([]any, bool) {
	if kind == "" {
		d.errPath(p, "%s: this option takes only true or false", p)
		return nil, false
	}
	if len(list) == 0 {
		d.errPath(p, "%s: an empty list allows nothing; use false", p)
		return nil, false
	}
	ok := true
	for i, v := range list {
		_, isNum := v.(float64)
		_, isStr := v.(string)
		if (kind == "number" && !isNum) || (kind == "string" && !isStr) {
			d.errPath(fmt.Sprintf("%s[%d]", p, i), "%s[%d]: want a %s", p, i, kind)
			ok = false
		}
	}
	return list, ok
}

// CheckOverride reports the first option of req (a request's model
// options, sorted by name) that a may not be given by requests, or that is
// out of its bounds, as a *chat.FieldError naming it. ceiling is the token
// limit that applies when the assistant sets none (0: none), for the
// default "lower, never raise" rule.
func (a *Assistant) CheckOverride(req chat.ModelOptions, ceiling int) error {
	o := a.Overridable
	if o == nil {
		o = DefaultOverridable(a.Sandbox != nil)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(b, &set); err != nil {
		return err
	}
	own := a.ownFunctionOptions()
	for _, name := range slices.Sorted(maps.Keys(set)) {
		rule, ok := o.Rules[name]
		if !ok {
			return &chat.FieldError{Path: name, Problem: a.refusal(name, o)}
		}
		if !o.Explicit && own[name] {
			return &chat.FieldError{Path: name, Problem: fmt.Sprintf(
				`assistant %q sets its own %s, which requests do not replace unless its package.yao "overridable" lists it`, a.ID, name)}
		}
		if err := a.within(name, rule, set[name], ceiling); err != nil {
			return &chat.FieldError{Path: name, Problem: err.Error()}
		}
	}
	return nil
}

// ownFunctionOptions are the function-calling options the assistant sets
// itself: by default a request may bring its own tools, not replace the
// assistant's.
func (a *Assistant) ownFunctionOptions() map[string]bool {
	return map[string]bool{
		"tools":           len(a.Options.Tools) > 0,
		"tool_choice":     len(a.Options.ToolChoice) > 0,
		"response_format": len(a.Options.ResponseFormat) > 0,
	}
}

// refusal says why a request may not set an option.
func (a *Assistant) refusal(name string, o *Overridable) string {
	switch {
	case name == "stream":
		return "agentbox always streams from the model; choose streaming with the request's own stream field"
	case a.Sandbox != nil && slices.Contains(clientTools, name):
		return fmt.Sprintf("assistant %q runs a coding agent in a sandbox, which uses its own tools (package.yao tools, MCP servers); "+
			"a client's functions cannot be offered to it, since the agent runs to its end within one request in a sandbox removed after it. "+
			"Use a direct assistant (no sandbox block) for function calling", a.ID)
	case a.Sandbox != nil && !slices.Contains(sandboxOverridable, name):
		return fmt.Sprintf("assistant %q runs a coding agent in a sandbox, which chooses its own sampling; requests may change only %s",
			a.ID, strings.Join(sandboxOverridable, ", "))
	case o.Explicit:
		return fmt.Sprintf(`assistant %q does not let requests change it (its package.yao "overridable" does not list it)`, a.ID)
	}
	return fmt.Sprintf(`assistant %q does not let requests change it: by default requests may change only %s; the assistant's package.yao "overridable" can allow more`,
		a.ID, strings.Join(slices.Sorted(maps.Keys(o.Rules)), ", "))
}

// within checks one option's value against its rule.
func (a *Assistant) within(name string, b Bound, raw json.RawMessage, ceiling int) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	if b.Values != nil && !slices.ContainsFunc(b.Values, func(x any) bool { return x == v }) {
		return fmt.Errorf("%s is not one of the values assistant %q allows: %s", show(v), a.ID, showAll(b.Values))
	}
	n, isNum := v.(float64)
	if !isNum {
		return nil
	}
	if b.Min != nil && n < *b.Min {
		return fmt.Errorf("%v is under the least value assistant %q allows, %v", n, a.ID, *b.Min)
	}
	if b.Max != nil && n > *b.Max {
		return fmt.Errorf("%v is over the most assistant %q allows, %v", n, a.ID, *b.Max)
	}
	if b.AtMostOwn {
		limit := a.Options.TokenLimit()
		if limit == 0 {
			limit = ceiling
		}
		if limit > 0 && n > float64(limit) {
			return fmt.Errorf("%v is over the token limit of assistant %q, %d: requests may lower it, not raise it", n, a.ID, limit)
		}
	}
	if (name == "max_tokens" || name == "max_completion_tokens") && (n < 1 || n != math.Trunc(n)) {
		return fmt.Errorf("%v is not a positive whole number", n)
	}
	return nil
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func showAll(vs []any) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = show(v)
	}
	return strings.Join(out, ", ")
}
