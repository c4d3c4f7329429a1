package bridge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// What a sandbox's model request may carry. The proxy forwards a request
// with the real key, so whatever the request asks of the provider, the
// operator pays for and the provider does on the sandbox's behalf:
// provider-side tools (web search and fetch, code execution, remote MCP
// servers) reach any host from a sandbox without a network, a URL in an
// image or document makes the provider fetch it, a service tier or a beta
// changes the price. So each API's requests are held to an allow list of
// what the supported CLIs send (recorded from Claude Code 2.1.197 and
// 2.1.330, Codex, the Gemini CLI and opencode with their usual models, see
// testdata/cli-requests): top-level fields, tools the CLI runs itself
// (client tools), content that holds its data inline, and the headers
// the CLIs send. A request with anything else is refused with a 400 that
// names the field, never forwarded with it dropped: the agent learns at
// once that it cannot have it, and nothing is silently changed. Headers
// other than the listed ones are not forwarded (they carry no request
// semantics the CLIs need); a beta the list does not know is refused.

// fieldError is a request field the allow list refuses.
type fieldError struct {
	field string // where: "tools[2].type", "mcp_servers"
	why   string
}

func (e *fieldError) Error() string { return e.field + ": " + e.why }

// refusal is how the proxy answers it.
func (e *fieldError) refusal() *refusal {
	return &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: e.Error(), field: e.field, reason: RefusedField}
}

// whyRefused explains the fields the CLIs never send but an agent might,
// by what they would do; others are simply not on the list.
var whyRefused = map[string]string{
	"mcp_servers":          "the provider would connect to these MCP servers on the sandbox's behalf",
	"container":            "provider-side code execution is not available to sandboxes",
	"service_tier":         "it changes the price of the call",
	"speed":                "it changes the price of the call",
	"inference_geo":        "it changes the price of the call",
	"background":           "a background response runs on after the turn",
	"conversation":         "stored conversations are not available to sandboxes",
	"previous_response_id": "stored responses are not available to sandboxes",
	"prompt":               "stored prompts are not available to sandboxes",
	"cachedContent":        "cached contents are not available to sandboxes",
}

// topLevel checks that every top-level key of body is in allowed; the
// body must be a JSON object. Every occurrence of a key is checked (a
// provider's parser may keep the last of repeated keys).
func topLevel(body gjson.Result, allowed []string, each func(k string, v gjson.Result) *fieldError) *fieldError {
	if !body.IsObject() {
		return &fieldError{field: "(body)", why: "the request body is not a JSON object"}
	}
	var ferr *fieldError
	body.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if !slices.Contains(allowed, key) {
			why := whyRefused[key]
			if why == "" {
				why = "not a field the sandboxed CLIs send"
			}
			ferr = &fieldError{field: key, why: why + "; the model proxy does not forward it"}
			return false
		}
		if each != nil {
			ferr = each(key, v)
		}
		return ferr == nil
	})
	return ferr
}

// Top-level fields of each API's requests.
var (
	messagesFields = []string{"model", "messages", "system", "max_tokens", "metadata", "stop_sequences", "stream",
		"temperature", "top_k", "top_p", "tools", "tool_choice", "thinking", "context_management", "output_config", "output_format"}
	countTokensFields = []string{"model", "messages", "system", "tools", "tool_choice", "thinking", "context_management", "output_config", "output_format"}
	responsesFields   = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "store",
		"stream", "stream_options", "include", "prompt_cache_key", "prompt_cache_retention", "text", "max_output_tokens", "max_tool_calls",
		"temperature", "top_p", "top_logprobs", "truncation", "metadata", "user", "safety_identifier", "client_metadata"}
	geminiFields = []string{"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings"}
)

// checkMessages checks a Messages API request (POST /v1/messages).
func checkMessages(body gjson.Result) *fieldError {
	return topLevel(body, messagesFields, messagesField)
}

// checkCountTokens checks a count_tokens request.
func checkCountTokens(body gjson.Result) *fieldError {
	return topLevel(body, countTokensFields, messagesField)
}

// messagesField checks the inside of a Messages API field: tools the
// client runs, content whose sources are inline.
func messagesField(k string, v gjson.Result) *fieldError {
	switch k {
	case "tools":
		return eachItem(v, "tools", func(at string, t gjson.Result) *fieldError {
			return eachKey(t, at, func(at, k string, v gjson.Result) *fieldError {
				// A tool without a type, or "custom", is the CLI's own; every
				// typed one (web_search_*, web_fetch_*, code_execution_*,
				// bash_*, computer_*, mcp_toolset, tool_search_*) is the
				// provider's or runs in its container.
				if k == "type" && v.String() != "custom" {
					return &fieldError{field: at, why: fmt.Sprintf("%s is a provider-side tool; only the CLI's own tools (no type, or \"custom\") pass", v.Raw)}
				}
				return nil
			})
		})
	case "system":
		return messageContent(v, "system")
	case "messages":
		return eachItem(v, "messages", func(at string, m gjson.Result) *fieldError {
			return eachKey(m, at, func(at, k string, v gjson.Result) *fieldError {
				if k == "content" {
					return messageContent(v, at)
				}
				return nil
			})
		})
	}
	return nil
}

// messageContent checks a string or a list of content blocks: every
// source must hold its data (base64, text, nested content blocks), not
// point the provider at a URL or a stored file, and tool results' content
// is checked alike.
func messageContent(v gjson.Result, at string) *fieldError {
	if v.Type == gjson.String {
		return nil
	}
	return eachItem(v, at, func(at string, b gjson.Result) *fieldError {
		return eachKey(b, at, func(at, k string, v gjson.Result) *fieldError {
			switch k {
			case "type":
				if v.String() == "container_upload" {
					return &fieldError{field: at, why: "files of the provider's containers are not available to sandboxes"}
				}
			case "source":
				if !v.IsObject() {
					return nil // a search result's source is a citation string
				}
				return eachKey(v, at, func(at, k string, v gjson.Result) *fieldError {
					switch {
					case k == "type" && !slices.Contains([]string{"base64", "text", "content"}, v.String()):
						return &fieldError{field: at, why: fmt.Sprintf("a source of type %s makes the provider fetch or read it; send the data inline (base64)", v.Raw)}
					case k == "content":
						return messageContent(v, at)
					}
					return nil
				})
			case "content":
				return messageContent(v, at)
			}
			return nil
		})
	})
}

// checkResponses checks a Responses API request.
func checkResponses(body gjson.Result) *fieldError {
	return topLevel(body, responsesFields, func(k string, v gjson.Result) *fieldError {
		switch k {
		case "tools":
			return responsesTools(v, "tools", true)
		case "input":
			if v.Type == gjson.String {
				return nil
			}
			// Items are messages (content: parts), function and tool
			// outputs (output: a string or parts), reasoning and the
			// CLI's own history; only parts can point elsewhere.
			return eachItem(v, "input", func(at string, item gjson.Result) *fieldError {
				return eachKey(item, at, func(at, k string, v gjson.Result) *fieldError {
					if (k == "content" || k == "output") && v.IsArray() {
						return eachItem(v, at, responsesPart)
					}
					return nil
				})
			})
		}
		return nil
	})
}

// responsesTools checks Responses API tools: functions and custom tools,
// which the CLI runs, and (at the top) namespaces of them (Codex groups
// its sub-agent tools so). web_search, file_search, code_interpreter,
// computer_use, image_generation and remote mcp tools run at the
// provider.
func responsesTools(v gjson.Result, at string, namespaces bool) *fieldError {
	return eachItem(v, at, func(at string, t gjson.Result) *fieldError {
		return eachKey(t, at, func(at, k string, v gjson.Result) *fieldError {
			switch {
			case k == "type" && (v.String() == "function" || v.String() == "custom" || namespaces && v.String() == "namespace"):
			case k == "type":
				return &fieldError{field: at, why: fmt.Sprintf("%s is a provider-side tool; only the CLI's own tools (function, custom) pass", v.Raw)}
			case k == "tools" && namespaces:
				return responsesTools(v, at, false)
			}
			return nil
		})
	})
}

// responsesPart checks one content part: images inline (data: URLs),
// files inline (file_data), never a URL or a stored file the provider
// would fetch or read.
func responsesPart(at string, p gjson.Result) *fieldError {
	return eachKey(p, at, func(at, k string, v gjson.Result) *fieldError {
		switch k {
		case "image_url":
			if u := v.String(); v.Type != gjson.String || !strings.HasPrefix(strings.ToLower(u), "data:") {
				return &fieldError{field: at, why: "an image URL makes the provider fetch it; send the image inline (a data: URL)"}
			}
		case "file_url", "file_id":
			return &fieldError{field: at, why: "a file URL or stored file makes the provider fetch or read it; send the file inline (file_data)"}
		}
		return nil
	})
}

// Gemini API objects, by the keys the CLI sends. The API also takes
// snake_case names (function_declarations, max_output_tokens): they are
// not on these lists, so nothing passes under a second name.
var (
	geminiContentKeys = []string{"role", "parts"}
	geminiPartKeys    = []string{"text", "thought", "thoughtSignature", "inlineData", "functionCall", "functionResponse",
		"executableCode", "codeExecutionResult", "videoMetadata"}
	geminiToolKeys = []string{"functionDeclarations"}
	// generationConfig is checked key by key so that the token limit
	// (maxOutputTokens, held to Limits.MaxTokens) has one name.
	geminiGenerationKeys = []string{"stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities",
		"candidateCount", "maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty", "frequencyPenalty",
		"responseLogprobs", "logprobs", "thinkingConfig", "mediaResolution"}
)

// checkGemini checks a generateContent or streamGenerateContent request.
func checkGemini(body gjson.Result) *fieldError {
	return topLevel(body, geminiFields, func(k string, v gjson.Result) *fieldError { return geminiField(k, k, v) })
}

// checkGeminiCount checks a countTokens request: contents, or a whole
// generateContent request.
func checkGeminiCount(body gjson.Result) *fieldError {
	return topLevel(body, []string{"contents", "generateContentRequest"}, func(k string, v gjson.Result) *fieldError {
		if k == "generateContentRequest" {
			return onlyKeys(v, k, append([]string{"model"}, geminiFields...), func(gk string, v gjson.Result) *fieldError {
				return geminiField(k+"."+gk, gk, v)
			})
		}
		return geminiField(k, k, v)
	})
}

// geminiField checks field k (at path at) of a generateContent request.
func geminiField(at, k string, v gjson.Result) *fieldError {
	switch k {
	case "contents":
		return eachItem(v, at, geminiContent)
	case "systemInstruction":
		if v.Type == gjson.String {
			return nil
		}
		return geminiContent(at, v)
	case "tools":
		// Function declarations only: googleSearch, urlContext,
		// codeExecution, computerUse, fileSearch, googleMaps and retrieval
		// run at the provider.
		return eachItem(v, at, func(at string, t gjson.Result) *fieldError {
			return onlyKeysWhy(t, at, geminiToolKeys, "a provider-side tool; only function declarations pass", nil)
		})
	case "generationConfig":
		return onlyKeys(v, at, geminiGenerationKeys, nil)
	}
	return nil
}

// geminiContent checks a Content: its parts hold their data (inlineData);
// fileData (a URI the provider reads) does not pass.
func geminiContent(at string, c gjson.Result) *fieldError {
	return onlyKeys(c, at, geminiContentKeys, func(k string, v gjson.Result) *fieldError {
		if k == "parts" {
			return eachItem(v, at+".parts", geminiPart)
		}
		return nil
	})
}

func geminiPart(at string, p gjson.Result) *fieldError {
	return onlyKeysWhy(p, at, geminiPartKeys, "a part the provider would fetch or read (fileData), or one the CLI does not send", func(k string, v gjson.Result) *fieldError {
		if k == "functionResponse" {
			// A function response may carry parts of its own.
			return eachKey(v, at+".functionResponse", func(at, k string, v gjson.Result) *fieldError {
				if k == "parts" {
					return eachItem(v, at, geminiPart)
				}
				return nil
			})
		}
		return nil
	})
}

// onlyKeys checks that object v (at path at) has only keys in allowed,
// and runs each on every key.
func onlyKeys(v gjson.Result, at string, allowed []string, each func(k string, v gjson.Result) *fieldError) *fieldError {
	return onlyKeysWhy(v, at, allowed, "not a field the sandboxed CLIs send", each)
}

func onlyKeysWhy(v gjson.Result, at string, allowed []string, why string, each func(k string, v gjson.Result) *fieldError) *fieldError {
	return eachKey(v, at, func(at, k string, v gjson.Result) *fieldError {
		if !slices.Contains(allowed, k) {
			return &fieldError{field: at, why: why + "; the model proxy does not forward it"}
		}
		if each != nil {
			return each(k, v)
		}
		return nil
	})
}

// eachKey runs f on every key of object v, with the key's path; a value
// that is not an object has none (the provider refuses what it cannot
// parse).
func eachKey(v gjson.Result, at string, f func(at, k string, v gjson.Result) *fieldError) *fieldError {
	if !v.IsObject() {
		return nil
	}
	var ferr *fieldError
	v.ForEach(func(k, val gjson.Result) bool {
		key := k.String()
		ferr = f(at+"."+key, key, val)
		return ferr == nil
	})
	return ferr
}

// eachItem runs f on every element of array v, with its path.
func eachItem(v gjson.Result, at string, f func(at string, v gjson.Result) *fieldError) *fieldError {
	if !v.IsArray() {
		return nil
	}
	var ferr *fieldError
	i := 0
	v.ForEach(func(_, item gjson.Result) bool {
		ferr = f(fmt.Sprintf("%s[%d]", at, i), item)
		i++
		return ferr == nil
	})
	return ferr
}

// Headers the proxy forwards, by API: what the CLIs send (their SDKs'
// metadata, session ids for the provider's caching, the API version), and
// nothing that selects an account, project or organisation to bill
// (OpenAI-Organization, OpenAI-Project, X-Goog-User-Project) or another
// key. Authorization headers are the proxy's own (rewrite).
var (
	commonHeaders    = []string{"Content-Type", "Accept", "User-Agent"}
	anthropicHeaders = []string{"Anthropic-Version", "Anthropic-Beta", "Anthropic-Dangerous-Direct-Browser-Access",
		"X-App", "X-Claude-Code-Session-Id", "X-Claude-Code-Agent-Id", "X-Session-Id", "X-Session-Affinity"}
	openaiHeaders = []string{"Originator", "Session-Id", "Thread-Id", "X-Client-Request-Id", "X-Codex-Beta-Features",
		"X-Codex-Turn-Metadata", "X-Codex-Window-Id", "X-Session-Id", "X-Session-Affinity"}
	geminiHeaders = []string{"X-Goog-Api-Client"}
)

// forwardHeader reports whether header name (canonical) of a request of
// API a goes upstream. The Stainless SDKs' X-Stainless-* headers (language,
// version, retry count) are metadata.
func forwardHeader(a api, name string) bool {
	if slices.Contains(commonHeaders, name) {
		return true
	}
	switch a {
	case apiAnthropic:
		return slices.Contains(anthropicHeaders, name) || strings.HasPrefix(name, "X-Stainless-")
	case apiOpenAI:
		return slices.Contains(openaiHeaders, name) || strings.HasPrefix(name, "X-Stainless-")
	case apiGemini:
		return slices.Contains(geminiHeaders, name)
	}
	return false
}

// filterHeaders removes from h every header a request of API a does not
// forward (chat: translated for an OpenAI-compatible host, which gets the
// common ones only) and returns their names.
func filterHeaders(h http.Header, a api, chat bool) (dropped []string) {
	for name := range h {
		if chat && !slices.Contains(commonHeaders, name) || !chat && !forwardHeader(a, name) {
			delete(h, name)
			dropped = append(dropped, name)
		}
	}
	slices.Sort(dropped)
	return dropped
}

// anthropicBetas are the betas the supported CLIs send (recorded: Claude
// Code 2.1.197 and 2.1.330 with Sonnet, Opus and Haiku models, with
// subagents; opencode's anthropic provider), plus token counting and
// fine-grained tool streaming, which their SDKs send on some calls. None
// adds a provider-side tool or a price: not fast-mode, code-execution,
// files-api, mcp-client, mcp-servers, skills, web-search, advisor-tool or
// the hosted-agent betas. context-1m (long-context pricing), which Claude
// Code sends for a "[1m]" model and for its default model, passes only
// when the turn's model asks for it (Limits.Model).
var anthropicBetas = []string{
	"claude-code-20250219",
	"interleaved-thinking-2025-05-14",
	"fine-grained-tool-streaming-2025-05-14",
	"context-management-2025-06-27",
	"prompt-caching-scope-2026-01-05",
	"mid-conversation-system-2026-04-07",
	"mid-conversation-tool-changes-2026-07-01",
	"per-turn-control-2026-07-01",
	"effort-2025-11-24",
	"advanced-tool-use-2025-11-20",
	"thinking-token-count-2026-05-13",
	"thinking-display-updates-2026-08-18",
	"redact-thinking-2026-02-12",
	"structured-outputs-2025-11-13",
	"structured-outputs-2025-12-15",
	"token-counting-2024-11-01",
}

// contextBeta is the beta of the 1M-token context.
const contextBeta = "context-1m-2025-08-07"

// checkBetas checks every value of the Anthropic-Beta headers (each a
// comma-separated list) against anthropicBetas, and contextBeta against
// longContext.
func checkBetas(h http.Header, longContext bool) *fieldError {
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			b = strings.TrimSpace(b)
			if b == contextBeta && !longContext {
				return &fieldError{field: "anthropic-beta", why: fmt.Sprintf("beta %q (long-context pricing) is allowed only when the assistant's model asks for it (a model name ending in %q)", b, "[1m]")}
			}
			if b != "" && b != contextBeta && !slices.Contains(anthropicBetas, b) {
				return &fieldError{field: "anthropic-beta", why: fmt.Sprintf("beta %q is not one the sandboxed CLIs use; the model proxy does not forward it", b)}
			}
		}
	}
	return nil
}
