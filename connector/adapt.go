package connector

import (
	"fmt"

	"github.com/agentbox/agentbox/chat"
)

// This file is Yao's capability adapters (yao agent/llm/adapters) and
// what its providers leave out of a request: what an assistant's own
// options become (YaoOptions), and what a client may not ask of a model
// (CheckOptions), which agentbox refuses where Yao would quietly drop it.

// Adjustment is one change YaoOptions made to an assistant's options.
type Adjustment struct {
	// Option is the option's name ("temperature").
	Option string
	// What says what became of it and why.
	What string
}

func (a Adjustment) String() string { return a.Option + " " + a.What }

// anthropicUnsent are the model options Yao's anthropic provider never
// puts in a request (agent/llm/providers/anthropic buildRequestBody),
// with why.
var anthropicUnsent = []struct {
	name string
	set  func(chat.ModelOptions) bool
	why  string
}{
	{"n", func(o chat.ModelOptions) bool { return o.N != nil }, "the Messages API returns one answer"},
	{"presence_penalty", func(o chat.ModelOptions) bool { return o.PresencePenalty != nil }, "the Messages API has no such parameter"},
	{"frequency_penalty", func(o chat.ModelOptions) bool { return o.FrequencyPenalty != nil }, "the Messages API has no such parameter"},
	{"logit_bias", func(o chat.ModelOptions) bool { return o.LogitBias != nil }, "the Messages API has no such parameter"},
	{"seed", func(o chat.ModelOptions) bool { return o.Seed != nil }, "the Messages API has no such parameter"},
	{"user", func(o chat.ModelOptions) bool { return o.User != "" }, "Yao's anthropic provider does not send it"},
	{"response_format", func(o chat.ModelOptions) bool { return len(o.ResponseFormat) > 0 }, "Yao's anthropic provider does not send it"},
	{"audio", func(o chat.ModelOptions) bool { return len(o.Audio) > 0 }, "the Messages API answers in text"},
	{"reasoning_effort", func(o chat.ModelOptions) bool { return o.ReasoningEffort != "" }, "Yao's anthropic provider does not send it (set the connector's thinking option)"},
}

// YaoOptions returns the model options an assistant (package.yao, its
// Create hook) set as Yao's provider for a connector of type typ sends
// them to a model with caps, and what it changed:
//
//   - tools and tool_choice go when the model has no tool calls
//     (ToolCallAdapter);
//   - reasoning_effort goes when the model does not reason, and always for
//     anthropic (ReasoningAdapter, the anthropic provider);
//   - a temperature other than 1 becomes 1 when the model's temperature
//     is not adjustable (ReasoningAdapter);
//   - for anthropic, the options the Messages API has no counterpart for
//     go (n, penalties, logit_bias, seed, user, response_format, audio).
//
// A client's options are checked with CheckOptions instead.
func YaoOptions(typ string, caps Capabilities, o chat.ModelOptions) (chat.ModelOptions, []Adjustment) {
	var adj []Adjustment
	if !caps.ToolCalls {
		if len(o.Tools) > 0 {
			adj = append(adj, Adjustment{"tools", "is not sent: " + noToolCalls(caps)})
			o.Tools = nil
		}
		if len(o.ToolChoice) > 0 {
			adj = append(adj, Adjustment{"tool_choice", "is not sent: " + noToolCalls(caps)})
			o.ToolChoice = nil
		}
	}
	if o.Temperature != nil && *o.Temperature != 1 && !caps.TemperatureAdjustable {
		adj = append(adj, Adjustment{"temperature", fmt.Sprintf("%v is sent as 1: %s", *o.Temperature, fixedTemperature(caps))})
		one := 1.0
		o.Temperature = &one
	}
	if typ == TypeAnthropic {
		for _, u := range anthropicUnsent {
			if u.set(o) {
				adj = append(adj, Adjustment{u.name, "is not sent to an anthropic connector: " + u.why})
			}
		}
		o.N, o.PresencePenalty, o.FrequencyPenalty, o.LogitBias, o.Seed = nil, nil, nil, nil, nil
		o.User, o.ResponseFormat, o.Audio, o.ReasoningEffort = "", nil, nil, ""
	} else if o.ReasoningEffort != "" && !caps.Reasoning {
		adj = append(adj, Adjustment{"reasoning_effort", "is not sent: " + noReasoning(caps)})
		o.ReasoningEffort = ""
	}
	return o, adj
}

// CheckOptions refuses, with a *chat.FieldError naming it, a client's
// option that a model with caps behind a connector of type typ would not
// get as asked (where Yao's adapters would quietly drop or change it):
// tools for a model without tool calls, reasoning_effort for one that
// does not reason, a temperature for one whose temperature is fixed. The
// options Anthropic has no counterpart for are refused when the request
// is built.
func CheckOptions(typ string, caps Capabilities, o chat.ModelOptions) error {
	switch {
	case !caps.ToolCalls && len(o.Tools) > 0:
		return &chat.FieldError{Path: "tools", Problem: noToolCalls(caps)}
	case !caps.ToolCalls && len(o.ToolChoice) > 0:
		return &chat.FieldError{Path: "tool_choice", Problem: noToolCalls(caps)}
	case o.Temperature != nil && *o.Temperature != 1 && !caps.TemperatureAdjustable:
		return &chat.FieldError{Path: "temperature", Problem: fixedTemperature(caps)}
	case o.ReasoningEffort != "" && !caps.Reasoning && typ == TypeOpenAI:
		return &chat.FieldError{Path: "reasoning_effort", Problem: noReasoning(caps)}
	}
	return nil
}

// capsSource says where capabilities come from, for messages.
func capsSource(caps Capabilities) string {
	if caps.Declared {
		return "the connector's options.capabilities"
	}
	return "the capabilities Yao knows the model by (declare options.capabilities in the connector to change them)"
}

func noToolCalls(caps Capabilities) string {
	return "the model takes no tool calls, says " + capsSource(caps) + " (tool_calls)"
}

func fixedTemperature(caps Capabilities) string {
	return "the model's temperature is fixed at 1, says " + capsSource(caps) + " (temperature_adjustable)"
}

func noReasoning(caps Capabilities) string {
	return "the model does not reason, says " + capsSource(caps) + " (reasoning)"
}

// TokenLimit is the answer's token limit a request to a connector of type
// typ carries for options o, as Yao's provider chooses it: OpenAI's takes
// max_completion_tokens before max_tokens, Anthropic's max_tokens first;
// a limit above the model's MaxOutputTokens is lowered to it. 0: the
// options set none.
func TokenLimit(typ string, caps Capabilities, o chat.ModelOptions) int {
	n := 0
	first, second := o.MaxCompletionTokens, o.MaxTokens
	if typ != TypeOpenAI {
		first, second = o.MaxTokens, o.MaxCompletionTokens
	}
	switch {
	case first != nil:
		n = *first
	case second != nil:
		n = *second
	}
	if caps.MaxOutputTokens > 0 && n > caps.MaxOutputTokens {
		n = caps.MaxOutputTokens
	}
	return n
}
