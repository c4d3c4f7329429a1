package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
)

// Options are a turn's options, one typed value from the request to the
// executor: the model options, the connector and the sandbox arguments. The
// pipeline builds them from the assistant (package.yao "options",
// "connector", sandbox.arguments) with the request's model options over
// them; a Create hook sees them as a plain JS object and may return changes
// (jsapi converts at that border, once); the direct connector gets the
// model options, a CLI executor the sandbox arguments.
//
// Options are decoded strictly wherever they enter (DecodeOptions,
// DecodeModelOptions, the app loader): an unknown field or a value of the
// wrong type is an error that names the field. To add an option, add a
// field with its JSON name to ModelOptions (or Arguments): decoding,
// merging, hooks and agentbox.d.ts's check follow from the type; the
// connector says how it goes on the wire.
type Options struct {
	ModelOptions
	// Connector is the id of the connector the turn uses.
	Connector string `json:"connector,omitempty"`
	// Sandbox holds what a turn may change of a sandboxed assistant's
	// sandbox block: only its arguments (nil for a direct assistant).
	Sandbox *SandboxOptions `json:"sandbox,omitempty"`
	// PromptPreset selects one of the assistant's prompt presets
	// ("chat.friendly") in place of its prompts; an unknown key keeps the
	// prompts (Yao's Create "prompt_preset").
	PromptPreset string `json:"prompt_preset,omitempty"`
	// DisableGlobalPrompts, when set, overrides the assistant's
	// disable_global_prompts for this turn.
	DisableGlobalPrompts *bool `json:"disable_global_prompts,omitempty"`
	// MCPServers replace the assistant's mcp.servers for this turn: ids it
	// may list in package.yao, with an optional tool filter.
	MCPServers []MCPServerOption `json:"mcp_servers,omitempty"`
	// Locale, Theme and Route are what the turn's prompts see as
	// $CTX.LOCALE, $CTX.THEME and $CTX.ROUTE.
	Locale string `json:"locale,omitempty"`
	Theme  string `json:"theme,omitempty"`
	Route  string `json:"route,omitempty"`
	// Metadata is merged over the request's metadata ($CTX.<key> in
	// prompts, ctx.metadata in Next).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// MCPServerOption is one MCP server a turn uses (Yao's Create
// "mcp_servers" entry).
type MCPServerOption struct {
	ServerID string `json:"server_id"`
	// Tools limits the server's tools (empty: all).
	Tools []string `json:"tools,omitempty"`
	// Resources is Yao's resource filter; it is not enforced.
	Resources []string `json:"resources,omitempty"`
}

// ModelOptions are the options passed to the model: the ones Yao allows in
// package.yao "options" (YAO-FORMATS.md §2), plus model and
// reasoning_effort. Unset fields are nil or empty, so an override sets only
// what it names (Merge).
type ModelOptions struct {
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	MaxTokens           *int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int               `json:"max_completion_tokens,omitempty"`
	N                   *int               `json:"n,omitempty"`
	Stop                Stop               `json:"stop,omitempty"`
	PresencePenalty     *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty,omitempty"`
	LogitBias           map[string]float64 `json:"logit_bias,omitempty"`
	User                string             `json:"user,omitempty"`
	Seed                *int64             `json:"seed,omitempty"`
	// ResponseFormat, Tools and ToolChoice are passed to the provider as
	// they are: an object, a list, and a string or an object.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	Tools          json.RawMessage `json:"tools,omitempty"`
	ToolChoice     json.RawMessage `json:"tool_choice,omitempty"`
	// ParallelToolCalls false asks the model for at most one tool call at
	// a time.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Audio is OpenAI's audio output option ({voice, format}), passed as
	// it is.
	Audio json.RawMessage `json:"audio,omitempty"`
	// Stream is refused by the connectors: agentbox always streams.
	Stream          *bool  `json:"stream,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Model overrides the connector's model for a direct assistant.
	Model string `json:"model,omitempty"`
}

// SandboxOptions is the part of a sandbox block a turn may change.
type SandboxOptions struct {
	Arguments *Arguments `json:"arguments,omitempty"`
}

// unknownFieldHint tells why a field is not there.
func (*SandboxOptions) unknownFieldHint(string) string {
	return "only sandbox.arguments may be changed by a hook"
}

// Arguments are the command-specific CLI arguments of a sandboxed
// assistant (package.yao sandbox.arguments). The set is a whitelist: an
// unknown key is an error.
type Arguments struct {
	MaxTurns        int      `json:"max_turns,omitempty"`
	PermissionMode  string   `json:"permission_mode,omitempty"`
	AllowedTools    ToolList `json:"allowed_tools,omitempty"`
	DisallowedTools ToolList `json:"disallowed_tools,omitempty"`
	// Model overrides the connector's model for the CLI.
	Model string `json:"model,omitempty"`
}

// Clone returns a copy of a that shares no memory with it.
func (a Arguments) Clone() Arguments {
	a.AllowedTools = slices.Clone(a.AllowedTools)
	a.DisallowedTools = slices.Clone(a.DisallowedTools)
	return a
}

// ToolList is a list of CLI tool names. In JSON it is a list of strings or,
// as Yao v1 writes it, one comma-separated string ("Bash,Read,Write").
type ToolList []string

// UnmarshalJSON takes a list of strings or a comma-separated string.
func (t *ToolList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		var out ToolList
		for _, name := range strings.Split(one, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out = append(out, name)
			}
		}
		*t = out
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("want a list of tool names or one comma-separated string, got " + jsonKind(b))
	}
	*t = list
	return nil
}

// Stop is the stop option: the sequences that end the answer. In JSON it
// is a string or a list of strings; it is sent as a list.
type Stop []string

// UnmarshalJSON takes a string or a list of strings.
func (s *Stop) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Stop{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("want a string or a list of strings, got " + jsonKind(b))
	}
	*s = list
	return nil
}

// Merge returns o with the fields over sets replacing o's: a non-nil
// pointer, slice, map or raw JSON, a non-empty string, a non-zero number.
// Sandbox arguments merge field by field the same way. max_tokens and
// max_completion_tokens are one limit under two names: when over sets
// either, o's value of the other is dropped, so the two never reach a
// provider together. Neither o nor over is changed.
func (o Options) Merge(over Options) Options {
	out := o
	out.ModelOptions = o.ModelOptions.Merge(over.ModelOptions)
	m := out.ModelOptions
	over.ModelOptions = ModelOptions{}
	overlay(reflect.ValueOf(&out).Elem(), reflect.ValueOf(over))
	out.ModelOptions = m
	return out
}

// Merge returns o with the fields over sets replacing o's (see
// Options.Merge).
func (o ModelOptions) Merge(over ModelOptions) ModelOptions {
	out := o
	if over.MaxTokens != nil || over.MaxCompletionTokens != nil {
		out.MaxTokens, out.MaxCompletionTokens = nil, nil
	}
	overlay(reflect.ValueOf(&out).Elem(), reflect.ValueOf(over))
	return out
}

// TokenLimit returns the answer's token limit the options set:
// max_completion_tokens, else max_tokens; 0 when neither is set.
func (o ModelOptions) TokenLimit() int {
	switch {
	case o.MaxCompletionTokens != nil:
		return *o.MaxCompletionTokens
	case o.MaxTokens != nil:
		return *o.MaxTokens
	}
	return 0
}

// Merge returns a with the fields over sets replacing a's (see
// Options.Merge).
func (a Arguments) Merge(over Arguments) Arguments {
	out := a
	overlay(reflect.ValueOf(&out).Elem(), reflect.ValueOf(over))
	return out
}

// SandboxArguments returns the sandbox arguments the options hold, or def
// when they hold none.
func (o Options) SandboxArguments(def Arguments) Arguments {
	if o.Sandbox == nil || o.Sandbox.Arguments == nil {
		return def
	}
	return *o.Sandbox.Arguments
}

// overlay sets the fields of dst (a settable struct) that src sets.
// Embedded structs overlay field by field; a pointer to a struct set in both
// gets a new struct, the overlay of the two.
func overlay(dst, src reflect.Value) {
	for i := range src.NumField() {
		s, d := src.Field(i), dst.Field(i)
		switch {
		case s.IsZero():
		case s.Kind() == reflect.Struct:
			overlay(d, s)
		case s.Kind() == reflect.Pointer && s.Elem().Kind() == reflect.Struct && !d.IsNil():
			n := reflect.New(s.Elem().Type())
			n.Elem().Set(d.Elem())
			overlay(n.Elem(), s.Elem())
			d.Set(n)
		default:
			d.Set(s)
		}
	}
}

// Check reports a raw JSON option of the wrong kind (tools must be a list,
// response_format an object, tool_choice a string or an object) as a
// *FieldError naming it.
func (o ModelOptions) Check() error {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		want []string
	}{
		{"response_format", o.ResponseFormat, []string{"an object"}},
		{"audio", o.Audio, []string{"an object"}},
		{"tools", o.Tools, []string{"a list"}},
		{"tool_choice", o.ToolChoice, []string{"a string", "an object"}},
	} {
		if len(f.raw) == 0 {
			continue
		}
		if got := jsonKind(f.raw); got != "null" && !slices.Contains(f.want, got) {
			return &FieldError{Path: f.name, Problem: "want " + strings.Join(f.want, " or ") + ", got " + got}
		}
	}
	return nil
}
