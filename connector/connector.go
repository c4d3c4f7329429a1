// Package connector holds agentbox's direct, streaming LLM clients: OpenAI
// Chat Completions (and compatible servers), Anthropic Messages, and a
// scripted model (package scripted) for offline use. They speak plain
// net/http with an SSE parser; no provider SDK is involved.
//
// # Streaming
//
// Client.Stream sends one request and emits chat events as the answer
// arrives: text and thinking messages go through start, deltas and end,
// each message with a fresh id; Response.Content joins separate text
// messages with chat.TextSeparator, as a chat.Collector reads the events.
// Thinking is OpenAI's reasoning_content (or reasoning) and Anthropic's
// thinking blocks. An answer cut by the max_tokens limit or a content
// filter also gets a notice event.
//
// # Function calling
//
// The model options' tools, tool_choice, parallel_tool_calls and
// response_format reach the provider (request.go maps them for Anthropic,
// and refuses, naming it, an option a provider has no counterpart for).
// Tools run on the client, never here: when the model asks for tool calls,
// each one is emitted whole as a tool_call event (props name, id, input and
// client: true), returned in Response.ToolCalls, and the answer ends with
// finish reason tool_calls. The client runs them and sends the results as
// tool messages after the assistant message carrying the calls
// (chat.Message.ToolCalls); both providers get them as their own tool
// turns.
//
// # Failures and retries
//
// Every failure is a *chat.Error whose Code is one of the chat.Err* codes
// (timeout, rate_limit, auth, network, invalid_request, upstream, canceled)
// and whose Message says what happened and what to do; its cause is a
// *Failure with the provider's status, request id and retry advice. HTTP 408, 409, 429,
// 5xx and 529 answers, connection errors, a stalled start and a stream cut
// before any output are retried with exponential backoff and jitter,
// honouring Retry-After, within RetryPolicy's bounds; nothing is retried once
// output has been emitted, so a client never sees a duplicated answer. The
// API key never appears in errors, events or logs. With Config.Breaker,
// every attempt goes through the connector's circuit breaker (package
// breaker): repeated network errors, 5xx answers and timeouts open it, and
// calls then fail at once with chat.ErrCircuitOpen until a probe succeeds.
package connector

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
)

// Connector types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeScripted  = "scripted"
)

// Defaults applied to zero Config fields.
const (
	// DefaultTimeout bounds a whole Stream call, retries included.
	DefaultTimeout = 10 * time.Minute
	// DefaultFirstByteTimeout bounds the wait for the first output after a
	// request is sent.
	DefaultFirstByteTimeout = 2 * time.Minute
	// DefaultIdleTimeout bounds a silence in the middle of an answer.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultAnthropicMaxTokens is sent when neither the request nor the
	// options set max_tokens (the Anthropic API requires it).
	DefaultAnthropicMaxTokens = 4096
)

// Config configures one client. Zero durations take the package defaults.
type Config struct {
	// Type is "openai", "anthropic" or "scripted" (see Types).
	Type string
	// Host is the API base URL, with or without a trailing /v1
	// ("https://api.openai.com", "http://127.0.0.1:11434/v1"). Empty means
	// the provider's public API.
	Host string
	// Key is the API key. It is sent in a header only and never printed.
	// Empty sends no key (local servers).
	Key string
	// Model is the default model; Request.Model overrides it.
	Model string
	// Extra holds provider request fields sent with every request
	// (connector-level options); Request.Options override them, and a nil
	// value removes a field. Only fields of the type's whitelist
	// (RequestFields, or Params when set) are sent, the way Yao filters a
	// connector's settings: a connector's host, key, capabilities or
	// protocols never reach a request body.
	Extra map[string]any
	// Params is a connector's supported_params: when non-nil, the strict
	// whitelist for Extra in place of RequestFields, with value bounds
	// applied (Yao's FilterRequestBodyParams).
	Params map[string]ParamSpec
	// AuthMode is how the key is sent: AuthBearer ("Authorization:
	// Bearer KEY", openai's default), AuthXAPIKey ("x-api-key: KEY",
	// anthropic's default) or AuthAPIKey ("api-key: KEY", Azure). Empty
	// takes the type's default.
	AuthMode string
	// APIVersion is the anthropic-version header ("" = AnthropicVersion).
	APIVersion string
	// Script is the scripted connector's script file (package scripted).
	Script string
	// Capabilities are the model's (see Capabilities); nil: the ones
	// ResolveCapabilities gives the type and model without a declaration.
	// They bound the token limit and decide whether images may be sent.
	Capabilities *Capabilities
	// HTTPClient sends the requests (nil: a shared client with sane
	// transport timeouts). Its Timeout should be zero: Timeout,
	// FirstByteTimeout and IdleTimeout bound streaming instead.
	HTTPClient *http.Client
	// Retry bounds retries of failed requests.
	Retry RetryPolicy
	// Timeout bounds a whole Stream call, retries included.
	Timeout time.Duration
	// FirstByteTimeout bounds the time from sending a request to the first
	// output (text, thinking or tool call). A stalled start is retried.
	FirstByteTimeout time.Duration
	// IdleTimeout bounds a silence between outputs once the answer started.
	IdleTimeout time.Duration
	// Breaker is the connector's circuit breaker, shared by every client
	// of the connector (nil: none). Each attempt asks it first; an open
	// one fails the call at once with chat.ErrCircuitOpen.
	Breaker *breaker.Breaker
}

// String describes the configuration without the key.
func (c Config) String() string {
	k := ""
	if c.Key != "" {
		k = " key=[redacted]"
	}
	return fmt.Sprintf("%s %s model=%s%s", c.Type, c.Host, c.Model, k)
}

// Request is one chat completion to stream.
type Request struct {
	// Model overrides the connector's model when set.
	Model string
	// System is the system prompt (may be empty).
	System string
	// Messages is the conversation, oldest first. System messages inside it
	// are added to the system prompt for providers that take it apart.
	Messages []chat.Message
	// Options are the turn's model options, sent as request fields over
	// Fields. Options.Model chooses the model when Model is empty.
	Options chat.ModelOptions
	// Fields are provider request fields (temperature, thinking, ...)
	// sent as they are, over the connector's Extra; a nil value removes
	// the field. A "model" field chooses the model when neither Model nor
	// Options.Model does; "messages", "stream" (and for Anthropic
	// "system") are refused, in Fields and Options alike.
	Fields map[string]any
	// MaxTokens bounds the answer; zero leaves it to Options, then to the
	// provider (Anthropic: DefaultAnthropicMaxTokens).
	MaxTokens int
	// ServerTools names the tools of Options.Tools that the caller runs
	// itself (a direct assistant's MCP tools): a call of one is emitted
	// without the client flag.
	ServerTools map[string]bool
}

// Response is a finished answer.
type Response struct {
	// Content is the answer text; Thinking the reasoning text, if any.
	Content  string `json:"content"`
	Thinking string `json:"thinking,omitempty"`
	// ToolCalls are the tools the model asked for (not executed).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     chat.Usage `json:"usage"`
	// FinishReason is the provider's stop reason as sent ("stop",
	// "end_turn", "length", "max_tokens", "tool_calls", "tool_use", ...);
	// chat.FinishReason says it in OpenAI's words.
	FinishReason string `json:"finish_reason,omitempty"`
	// Model is the model that answered, as the provider reports it.
	Model string `json:"model,omitempty"`
	// Attempts is how many HTTP requests the answer took (1 without
	// retries).
	Attempts int `json:"attempts"`
}

// ToolCall is a tool call the model asked for.
type ToolCall = chat.ToolCall

// Client streams chat completions. Implementations are safe for concurrent
// use.
type Client interface {
	// Type is the connector type ("openai", ...).
	Type() string
	// Model is the default model.
	Model() string
	// Stream sends req and emits events as the answer arrives. On failure
	// it returns a *chat.Error (and emits no error event: the caller
	// decides how to report it). Events already emitted stay valid: a message started
	// before a failure is always ended.
	Stream(ctx context.Context, req *Request, emit chat.EmitFunc) (*Response, error)
}

// constructors is the registry of connector types.
var constructors = map[string]func(Config) (Client, error){
	TypeAnthropic: newAnthropic,
	TypeOpenAI:    newOpenAI,
	TypeScripted:  newScripted,
}

// Types lists the connector types, sorted.
func Types() []string {
	out := make([]string, 0, len(constructors))
	for k := range constructors {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// New returns a client for cfg. It checks the configuration and starts
// nothing: no connection is made until Stream.
func New(cfg Config) (Client, error) {
	ctor, ok := constructors[cfg.Type]
	if !ok {
		return nil, fmt.Errorf("connector type %q is unknown (want one of %s)", cfg.Type, strings.Join(Types(), ", "))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"timeout", cfg.Timeout}, {"first byte timeout", cfg.FirstByteTimeout}, {"idle timeout", cfg.IdleTimeout},
		{"retry base delay", cfg.Retry.BaseDelay}, {"retry max delay", cfg.Retry.MaxDelay}, {"retry max elapsed", cfg.Retry.MaxElapsed},
	} {
		if d.v < 0 {
			return nil, fmt.Errorf("%s connector: %s is negative (%v)", cfg.Type, d.name, d.v)
		}
	}
	if cfg.Retry.MaxAttempts < 0 {
		return nil, fmt.Errorf("%s connector: retry max attempts is negative (%d)", cfg.Type, cfg.Retry.MaxAttempts)
	}
	return ctor(cfg)
}

// caps returns the capabilities of model behind the connector.
func (c Config) caps(model string) Capabilities {
	if c.Capabilities != nil {
		return *c.Capabilities
	}
	return ResolveCapabilities(c.Type, model, nil)
}

// withDefaults fills zero fields of cfg.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FirstByteTimeout == 0 {
		c.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient()
	}
	c.Retry = c.Retry.withDefaults()
	return c
}

// defaultHTTPClient is shared by clients without their own, so connections
// to a provider are pooled across assistants.
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSHandshakeTimeout = 15 * time.Second
	t.MaxIdleConnsPerHost = 32
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
})

// Auth modes of Config.AuthMode (Yao's auth_mode).
const (
	AuthBearer  = "bearer"
	AuthXAPIKey = "x-api-key"
	AuthAPIKey  = "api-key"
)

// AuthModes lists the auth modes, sorted.
var AuthModes = []string{AuthAPIKey, AuthBearer, AuthXAPIKey}

// setKey sets the key header for mode (def when mode is empty).
func setKey(h http.Header, mode, def, key string) {
	if key == "" {
		return
	}
	switch cmpOr(mode, def) {
	case AuthXAPIKey:
		h.Set("X-Api-Key", key)
	case AuthAPIKey:
		h.Set("Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Endpoint returns the URL a connector of type typ with host calls: the
// type's public API when host is empty, else host with the API path
// joined the way Yao joins it (a host ending in "/" is the full base
// path; otherwise "/v1" comes first), also accepting a host that already
// ends in /v1 or in the API path. It is what `agentbox check` prints and
// what the clients call.
func Endpoint(typ, host string) (string, error) {
	switch typ {
	case TypeOpenAI:
		return endpoint(typ, host, openAIDefaultHost, "/chat/completions")
	case TypeAnthropic:
		return endpoint(typ, host, anthropicDefaultHost, "/messages")
	}
	return "", fmt.Errorf("connector type %q has no endpoint", typ)
}

// DefaultHost is the public API of typ ("" for a type without one).
func DefaultHost(typ string) string {
	switch typ {
	case TypeOpenAI:
		return openAIDefaultHost
	case TypeAnthropic:
		return anthropicDefaultHost
	}
	return ""
}

// endpoint joins host and the API path: a host ending in "/" is used as
// the base path as it is (Yao's connector.BuildAPIURL); otherwise "/v1"
// is added unless the host already ends in /v1 or is the full endpoint.
func endpoint(typ, host, def, path string) (string, error) {
	if host == "" {
		host = def
	}
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s connector: host %q is not an http(s) URL (want for example %q)", typ, redactURL(host), def)
	}
	if u.User != nil {
		return "", fmt.Errorf("%s connector: host %q carries credentials; put the key in the connector's key option", typ, redactURL(host))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s connector: host %q has a query or fragment; give only the base URL", typ, host)
	}
	slash := strings.HasSuffix(u.Path, "/")
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, path):
	case strings.HasSuffix(p, "/v1"), slash:
		p += path
	default:
		p += "/v1" + path
	}
	u.Path = p
	return u.String(), nil
}

// redactURL hides a userinfo part of a URL-ish string.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("redacted")
		return u.String()
	}
	return s
}
