package connector

import (
	"cmp"
	"slices"
	"strings"
)

// Capabilities are what a model can take, which decides what a request to
// it carries, as Yao's capability adapters decide it (yao
// agent/llm/adapters, agent/llm/providers/{openai,anthropic}): a model
// without tool calls gets no tools, one without vision no images, one
// whose temperature is fixed temperature 1, one without reasoning no
// reasoning_effort; a token limit above MaxOutputTokens is lowered to it.
// A connector declares them in options.capabilities; without that they
// are the model's known ones (ResolveCapabilities).
type Capabilities struct {
	// Vision is the image input format: "" (none), VisionOpenAI,
	// VisionClaude, VisionBase64 or VisionDefault (declared as true).
	Vision                string
	ToolCalls             bool
	Audio                 bool
	Reasoning             bool
	Streaming             bool
	JSON                  bool
	Multimodal            bool
	TemperatureAdjustable bool
	// MaxInputTokens and MaxOutputTokens are the model's context window
	// and answer bounds (0: unknown).
	MaxInputTokens  int
	MaxOutputTokens int
	// Declared is set when they come from the connector's
	// options.capabilities rather than the model's known ones.
	Declared bool
}

// Vision formats of Capabilities.Vision (Yao agent/context VisionFormat).
const (
	VisionOpenAI  = "openai"
	VisionClaude  = "claude"
	VisionBase64  = "base64"
	VisionDefault = "default"
)

// HasVision reports whether the model takes images.
func (c Capabilities) HasVision() bool { return c.Vision != "" }

// modelCaps is one entry of a known-models table: a name pattern and the
// capabilities of the models whose names contain it.
type modelCaps struct {
	pattern string
	caps    Capabilities
}

// knownOpenAI are Yao's default capabilities of models behind openai
// connectors (gou connector/openai/defaults.go). None says temperature
// is adjustable; resolution makes it so for the models without reasoning.
var knownOpenAI = []modelCaps{
	{"gemini-3-pro", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gemini-2.5-pro", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gemini-2.5-flash", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"claude-opus-4.5", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"claude-4.5-sonnet", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"claude-4.5-haiku", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gpt-5.1", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gpt-5", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gpt-5-mini", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"gpt-4o", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"o3", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Reasoning: true, Multimodal: true}},
	{"o1", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Reasoning: true, Multimodal: true}},
	{"grok-4", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"grok-4.1-fast", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"kimi-k2", Capabilities{ToolCalls: true, Reasoning: true, Streaming: true, JSON: true}},
	{"deepseek-v3", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"deepseek-r1", Capabilities{Reasoning: true, Streaming: true, JSON: true}},
	{"deepseek-chat", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"qwen3-235b", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"qwen3-max", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"qwen3-vl", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"qwen3-omni", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Audio: true, Streaming: true, JSON: true, Multimodal: true}},
	{"qwen2.5", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"doubao-seed", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"glm-4.6", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"glm-4v", Capabilities{Vision: VisionOpenAI, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true}},
	{"minimax-m2", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"mistral-large", Capabilities{ToolCalls: true, Streaming: true, JSON: true}},
	{"text-embedding", Capabilities{}},
	{"dall-e", Capabilities{}},
	{"gpt-image", Capabilities{}},
	{"seedream", Capabilities{}},
}

// knownAnthropic are Yao's default capabilities of models behind
// anthropic connectors (gou connector/anthropic/defaults.go). None says
// temperature is adjustable, and for anthropic connectors Yao does not
// make it so: these models get temperature 1.
var knownAnthropic = []modelCaps{
	{"claude-opus-4", Capabilities{Vision: VisionClaude, ToolCalls: true, Reasoning: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 200000, MaxOutputTokens: 32768}},
	{"claude-sonnet-4", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 200000, MaxOutputTokens: 16384}},
	{"claude-haiku-4", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 200000, MaxOutputTokens: 8192}},
	{"claude-3-5-sonnet", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 200000, MaxOutputTokens: 8192}},
	{"claude-3-5-haiku", Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 200000, MaxOutputTokens: 8192}},
	{"kimi-k2", Capabilities{ToolCalls: true, Reasoning: true, Streaming: true, JSON: true, MaxInputTokens: 131072, MaxOutputTokens: 131072}},
	{"kimi-k2.5", Capabilities{Vision: VisionClaude, ToolCalls: true, Reasoning: true, Streaming: true, JSON: true, Multimodal: true, MaxInputTokens: 262142, MaxOutputTokens: 262142}},
	{"kimi-for-coding", Capabilities{ToolCalls: true, Reasoning: true, Streaming: true, JSON: true, MaxInputTokens: 131072, MaxOutputTokens: 131072}},
}

func init() {
	// Yao walks its tables in Go's random map order and takes the first
	// pattern the model name contains, so "gpt-5-mini" may get gpt-5's
	// entry; here the longest pattern that matches wins, which is always
	// the most specific one.
	for _, t := range [][]modelCaps{knownOpenAI, knownAnthropic} {
		slices.SortStableFunc(t, func(a, b modelCaps) int { return cmp.Compare(len(b.pattern), len(a.pattern)) })
	}
}

// KnownCapabilities returns Yao's default capabilities of model behind a
// connector of type typ, and whether the model is known (its name
// contains a pattern of the type's table, case-insensitively).
func KnownCapabilities(typ, model string) (Capabilities, bool) {
	table := knownOpenAI
	if typ == TypeAnthropic {
		table = knownAnthropic
	}
	m := strings.ToLower(model)
	if m == "" {
		return Capabilities{}, false
	}
	for _, e := range table {
		if strings.Contains(m, e.pattern) {
			return e.caps, true
		}
	}
	return Capabilities{}, false
}

// ResolveCapabilities returns the capabilities a connector of type typ
// with model has, as Yao resolves them (gou connector/{openai,anthropic}
// resolveCapabilities): the declared ones (options.capabilities) when
// declared is non-nil, else the model's known ones, else the type's
// fallback (openai: only an adjustable temperature, so no tools and no
// images; anthropic: tools, images as base64, streaming, JSON and an
// adjustable temperature). For openai connectors a model without
// reasoning always has an adjustable temperature. A scripted connector
// can do everything.
func ResolveCapabilities(typ, model string, declared map[string]any) Capabilities {
	var c Capabilities
	switch {
	case typ == TypeScripted:
		return Capabilities{Vision: VisionClaude, ToolCalls: true, Audio: true, Reasoning: true, Streaming: true, JSON: true, Multimodal: true, TemperatureAdjustable: true}
	case declared != nil:
		c = declaredCapabilities(declared)
	default:
		known, ok := KnownCapabilities(typ, model)
		switch {
		case ok:
			c = known
		case typ == TypeAnthropic:
			c = Capabilities{Vision: VisionClaude, ToolCalls: true, Streaming: true, JSON: true, Multimodal: true, TemperatureAdjustable: true}
		default:
			c = Capabilities{TemperatureAdjustable: true}
		}
	}
	if typ == TypeOpenAI && !c.Reasoning {
		c.TemperatureAdjustable = true
	}
	return c
}

// declaredCapabilities reads a connector's options.capabilities the way
// gou decodes them: booleans, vision as a boolean or a format name, and
// the token bounds; what is absent is false.
func declaredCapabilities(m map[string]any) Capabilities {
	c := Capabilities{Declared: true}
	flag := func(k string) bool {
		b, _ := m[k].(bool)
		return b
	}
	c.ToolCalls, c.Audio, c.Reasoning = flag("tool_calls"), flag("audio"), flag("reasoning")
	c.Streaming, c.JSON, c.Multimodal = flag("streaming"), flag("json"), flag("multimodal")
	c.TemperatureAdjustable = flag("temperature_adjustable")
	switch v := m["vision"].(type) {
	case bool:
		if v {
			c.Vision = VisionDefault
		}
	case string:
		c.Vision = v
	}
	num := func(k string) int {
		switch n := m[k].(type) {
		case float64:
			return int(n)
		case int:
			return n
		}
		return 0
	}
	c.MaxInputTokens, c.MaxOutputTokens = num("max_input_tokens"), num("max_output_tokens")
	return c
}
