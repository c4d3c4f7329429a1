package connector

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// This file is where a Request becomes a provider's request body: the
// model options as request fields (OpenAI's names as they are, translated
// for Anthropic), the connector's and the caller's raw fields around them,
// and the conversation with its tool calls. A provider that names a field
// differently, or cannot take one, says so here.

// mergeOptions returns the request fields: extra (the connector's
// options), overlaid with fields (nil values delete), overlaid with
// options (the model options as the provider names them), refusing keys
// the client sets itself. max_tokens and max_completion_tokens are one
// limit: when options set it, extra's and fields' values under either name
// go, so the two names never travel together. A "model" option is not a
// request field: Stream has already chosen the model from it.
func mergeOptions(extra, fields, options map[string]any, reserved ...string) (map[string]any, error) {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range fields {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	_, a := options["max_tokens"]
	_, b := options["max_completion_tokens"]
	if a || b {
		delete(out, "max_tokens")
		delete(out, "max_completion_tokens")
	}
	maps.Copy(out, options)
	delete(out, "model")
	for _, k := range reserved {
		if _, ok := out[k]; ok {
			return nil, fmt.Errorf("option %q is set by agentbox and cannot be given in the options", k)
		}
	}
	return out, nil
}

// optionFields is where model options become request fields for the
// OpenAI API and compatible servers, as Yao's openai provider puts them
// (agent/llm/providers/openai buildRequestBody): each option that is set,
// under its name, as it is (Stop as a list, raw JSON as it came), except
// the token limit, which goes as max_completion_tokens (the name OpenAI's
// reasoning models require; max_tokens they refuse), lowered to the
// model's max_output_tokens.
func optionFields(o chat.ModelOptions, caps Capabilities) map[string]any {
	m := map[string]any{}
	set := func(k string, ok bool, v any) {
		if ok {
			m[k] = v
		}
	}
	if o.Temperature != nil {
		m["temperature"] = *o.Temperature
	}
	if o.TopP != nil {
		m["top_p"] = *o.TopP
	}
	if n := TokenLimit(TypeOpenAI, caps, o); n > 0 || o.MaxTokens != nil || o.MaxCompletionTokens != nil {
		m["max_completion_tokens"] = n
	}
	if o.N != nil {
		m["n"] = *o.N
	}
	set("stop", o.Stop != nil, []string(o.Stop))
	if o.PresencePenalty != nil {
		m["presence_penalty"] = *o.PresencePenalty
	}
	if o.FrequencyPenalty != nil {
		m["frequency_penalty"] = *o.FrequencyPenalty
	}
	set("logit_bias", o.LogitBias != nil, o.LogitBias)
	set("user", o.User != "", o.User)
	if o.Seed != nil {
		m["seed"] = *o.Seed
	}
	set("response_format", len(o.ResponseFormat) > 0, o.ResponseFormat)
	set("tools", len(o.Tools) > 0, o.Tools)
	set("tool_choice", len(o.ToolChoice) > 0, o.ToolChoice)
	if o.ParallelToolCalls != nil {
		m["parallel_tool_calls"] = *o.ParallelToolCalls
	}
	set("audio", len(o.Audio) > 0, o.Audio)
	if o.Stream != nil {
		m["stream"] = *o.Stream
	}
	set("reasoning_effort", o.ReasoningEffort != "", o.ReasoningEffort)
	set("model", o.Model != "", o.Model)
	return m
}

// unsupported is the error for a model option a provider cannot honour.
func unsupported(field, provider, why string) error {
	return &chat.FieldError{Path: field, Problem: "not supported by " + provider + " connectors: " + why}
}

// anthropicFields translates model options (OpenAI's names and shapes) to
// Messages API fields: stop becomes stop_sequences, user metadata.user_id,
// the token limit max_tokens, response_format json_schema
// output_config.format, function tools Anthropic tools and tool_choice
// (with parallel_tool_calls) Anthropic's tool_choice. Options the API has
// no counterpart for are errors naming them, never dropped.
func anthropicFields(o chat.ModelOptions, caps Capabilities) (map[string]any, error) {
	m := map[string]any{}
	if o.Temperature != nil {
		m["temperature"] = *o.Temperature
	}
	if o.TopP != nil {
		m["top_p"] = *o.TopP
	}
	if o.MaxTokens != nil || o.MaxCompletionTokens != nil {
		m["max_tokens"] = TokenLimit(TypeAnthropic, caps, o)
	}
	if o.N != nil && *o.N != 1 {
		return nil, unsupported("n", TypeAnthropic, "the API returns one answer")
	}
	if o.Stop != nil {
		m["stop_sequences"] = []string(o.Stop)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"presence_penalty", o.PresencePenalty != nil},
		{"frequency_penalty", o.FrequencyPenalty != nil},
		{"logit_bias", o.LogitBias != nil},
		{"seed", o.Seed != nil},
	} {
		if f.set {
			return nil, unsupported(f.name, TypeAnthropic, "the Messages API has no such parameter")
		}
	}
	if o.ReasoningEffort != "" {
		return nil, unsupported("reasoning_effort", TypeAnthropic, "set the connector's thinking option instead")
	}
	if len(o.Audio) > 0 {
		return nil, unsupported("audio", TypeAnthropic, "the Messages API answers in text")
	}
	if o.User != "" {
		m["metadata"] = map[string]any{"user_id": o.User}
	}
	if len(o.ResponseFormat) > 0 && string(o.ResponseFormat) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(o.ResponseFormat, &rf); err != nil {
			return nil, &chat.FieldError{Path: "response_format", Problem: err.Error()}
		}
		switch rf.Type {
		case "text":
		case "json_schema":
			if len(rf.JSONSchema.Schema) == 0 {
				return nil, &chat.FieldError{Path: "response_format.json_schema.schema", Problem: "missing: give the JSON Schema the answer must follow"}
			}
			m["output_config"] = map[string]any{"format": map[string]any{"type": "json_schema", "schema": rf.JSONSchema.Schema}}
		case "json_object":
			return nil, unsupported("response_format", TypeAnthropic, `the API has no JSON mode; use {"type": "json_schema"} with a schema`)
		default:
			return nil, &chat.FieldError{Path: "response_format.type", Problem: fmt.Sprintf("%q is not one of text, json_schema, json_object", rf.Type)}
		}
	}
	if len(o.Tools) > 0 && string(o.Tools) != "null" {
		tools, err := anthropicTools(o.Tools)
		if err != nil {
			return nil, err
		}
		m["tools"] = tools
	}
	choice, err := anthropicToolChoice(o.ToolChoice, o.ParallelToolCalls)
	if err != nil {
		return nil, err
	}
	if choice != nil {
		m["tool_choice"] = choice
	}
	if o.Stream != nil {
		m["stream"] = *o.Stream
	}
	return m, nil
}

// openAITool is a tool of a Chat Completions request.
type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

func anthropicTools(raw json.RawMessage) ([]map[string]any, error) {
	var tools []openAITool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, &chat.FieldError{Path: "tools", Problem: "want a list of {type: function, function: {name, description, parameters}}: " + err.Error()}
	}
	out := make([]map[string]any, 0, len(tools))
	for i, t := range tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, unsupported(p+".type", TypeAnthropic, fmt.Sprintf("only function tools are, not %q", t.Type))
		}
		if t.Function.Name == "" {
			return nil, &chat.FieldError{Path: p + ".function.name", Problem: "missing"}
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tool := map[string]any{"name": t.Function.Name, "input_schema": schema}
		if t.Function.Description != "" {
			tool["description"] = t.Function.Description
		}
		if t.Function.Strict != nil && *t.Function.Strict {
			tool["strict"] = true
		}
		out = append(out, tool)
	}
	return out, nil
}

// anthropicToolChoice maps tool_choice ("auto", "none", "required" or
// {type: function, function: {name}}) and parallel_tool_calls to
// Anthropic's tool_choice; nil when neither is set.
func anthropicToolChoice(raw json.RawMessage, parallel *bool) (map[string]any, error) {
	var choice map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			switch s {
			case "auto":
				choice = map[string]any{"type": "auto"}
			case "none":
				choice = map[string]any{"type": "none"}
			case "required":
				choice = map[string]any{"type": "any"}
			default:
				return nil, &chat.FieldError{Path: "tool_choice", Problem: fmt.Sprintf("%q is not one of auto, none, required", s)}
			}
		} else {
			var c struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(raw, &c); err != nil || c.Type != "function" || c.Function.Name == "" {
				return nil, &chat.FieldError{Path: "tool_choice", Problem: `want "auto", "none", "required" or {"type": "function", "function": {"name": ...}}`}
			}
			choice = map[string]any{"type": "tool", "name": c.Function.Name}
		}
	}
	if parallel != nil && !*parallel {
		if choice == nil {
			choice = map[string]any{"type": "auto"}
		}
		if choice["type"] != "none" {
			choice["disable_parallel_tool_use"] = true
		}
	}
	return choice, nil
}

// intOption reads an integer option (JSON numbers decode as float64).
func intOption(m map[string]any, k string) (int, bool, error) {
	v, ok := m[k]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case int:
		return n, true, nil
	case int64:
		return int(n), true, nil
	case float64:
		if n == float64(int(n)) {
			return int(n), true, nil
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i), true, nil
		}
	}
	return 0, false, fmt.Errorf("option %q must be a whole number, not %v", k, v)
}

// checkRoles rejects messages with unknown roles, and tool calls on
// messages other than the assistant's.
func checkRoles(msgs []chat.Message) error {
	for i, m := range msgs {
		switch m.Role {
		case chat.RoleSystem, chat.RoleDeveloper, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return fmt.Errorf("message %d has role %q (want system, developer, user, assistant or tool)", i, m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != chat.RoleAssistant {
			return fmt.Errorf("message %d has role %q and tool calls; only assistant messages carry tool calls", i, m.Role)
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return fmt.Errorf("message %d: tool call %d needs an id and a name", i, j)
			}
		}
	}
	return nil
}

// answered reports, for each message, whether it is a tool message that
// answers a tool call of an earlier assistant message. Other tool messages
// (a result without its call, as some histories hold) cannot go to a
// provider as tool results and travel as user text instead (asText).
func answered(msgs []chat.Message) []bool {
	out := make([]bool, len(msgs))
	calls := map[string]bool{}
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = true
		}
		out[i] = m.Role == chat.RoleTool && m.ToolCallID != "" && calls[m.ToolCallID]
	}
	return out
}

// asText turns a tool message that answers no call into user text, so no
// history is lost.
func asText(m chat.Message) chat.Message {
	label := "Tool result"
	if m.Name != "" {
		label += " (" + m.Name + ")"
	}
	return chat.Message{Role: chat.RoleUser, Content: label + ":\n" + m.Content}
}

// input is a tool call's input as a JSON object for Anthropic's tool_use.
func input(in chat.RawJSON) json.RawMessage {
	t := strings.TrimSpace(string(in))
	if t == "" || t[0] != '{' || !json.Valid([]byte(t)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(t)
}
