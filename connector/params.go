package connector

import (
	"reflect"
	"slices"
)

// requestFields are the request fields a connector's own settings may add
// to a request body, per type: Yao's per-provider whitelist
// (YAO-FORMATS.md §4; gou connector/params.go). Everything else a
// connector file holds (host, key, capabilities, protocols, ...) is
// configuration and never reaches the model API.
var requestFields = map[string][]string{
	TypeOpenAI: {
		"audio", "enable_thinking", "frequency_penalty", "logit_bias", "max_completion_tokens", "max_tokens", "n",
		"presence_penalty", "reasoning", "reasoning_effort", "response_format", "seed", "stop", "stream",
		"stream_options", "temperature", "thinking", "thinkingConfig", "tool_choice", "tools", "top_p", "user",
	},
	TypeAnthropic: {
		"max_tokens", "stop_sequences", "stream", "temperature", "thinking", "tool_choice", "tools", "top_k", "top_p",
	},
}

// RequestFields returns the request fields a connector of type typ may
// send from its own settings, sorted (nil for a type without a request
// body of its own, such as scripted).
func RequestFields(typ string) []string { return slices.Clone(requestFields[typ]) }

// ParamSpec bounds one field of a connector's supported_params: numbers
// are clamped to [Min, Max]; a value not in AllowedValues becomes the
// first allowed value (Yao's clamp rules).
type ParamSpec struct {
	Min           *float64 `json:"min,omitempty"`
	Max           *float64 `json:"max,omitempty"`
	AllowedValues []any    `json:"allowed_values,omitempty"`
}

// connectorFields returns the fields of cfg.Extra that may be sent: those
// of cfg.Params when set (clamped), else those of the type's whitelist.
func connectorFields(typ string, cfg Config) map[string]any {
	out := make(map[string]any, len(cfg.Extra))
	if cfg.Params != nil {
		for k, v := range cfg.Extra {
			spec, ok := cfg.Params[k]
			if !ok {
				continue
			}
			out[k] = spec.clamp(v)
		}
		return out
	}
	allowed := requestFields[typ]
	for k, v := range cfg.Extra {
		if slices.Contains(allowed, k) {
			out[k] = v
		}
	}
	return out
}

// clamp applies the spec's bounds to v.
func (s ParamSpec) clamp(v any) any {
	f, isNum := number(v)
	if !isNum {
		return s.allowed(v)
	}
	if s.Min != nil && f < *s.Min {
		f = *s.Min
	}
	if s.Max != nil && f > *s.Max {
		f = *s.Max
	}
	if len(s.AllowedValues) > 0 {
		return s.allowed(f)
	}
	if _, isInt := v.(int); isInt {
		return int(f)
	}
	return f
}

// allowed returns v when AllowedValues is empty or holds it, else the
// first allowed value.
func (s ParamSpec) allowed(v any) any {
	if len(s.AllowedValues) == 0 {
		return v
	}
	vf, vNum := number(v)
	for _, a := range s.AllowedValues {
		if af, aNum := number(a); vNum && aNum && af == vf {
			return v
		}
		if reflect.DeepEqual(a, v) {
			return v
		}
	}
	return s.AllowedValues[0]
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}
