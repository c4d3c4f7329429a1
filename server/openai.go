package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
	"github.com/agentbox/agentbox/pipeline"
)

// completionRequest is the envelope of an OpenAI Chat Completions request:
// what the server reads itself. Every other field is a model option
// (completionOptions), decoded strictly.
type completionRequest struct {
	Model         string         `json:"model"`
	Messages      []wireMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	// ChatID is an agentbox extension (or the X-Chat-ID header).
	ChatID   string         `json:"chat_id"`
	N        *int           `json:"n"`
	Metadata map[string]any `json:"metadata"`
	Locale   string         `json:"locale"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionEnvelope are the request fields that are not model options:
// the envelope's, and hints that do not change the answer (accepted and
// not passed on).
var completionEnvelope = []string{"model", "messages", "stream", "stream_options", "chat_id", "n", "metadata", "locale",
	"store", "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier"}

// completionRefused are OpenAI request fields agentbox cannot honour, with
// what to do instead; "false" values (logprobs: false) are harmless.
var completionRefused = map[string]string{
	"logprobs":           "log probabilities are not available",
	"top_logprobs":       "log probabilities are not available",
	"functions":          "use tools",
	"function_call":      "use tool_choice",
	"audio":              "answers are text",
	"modalities":         "answers are text",
	"prediction":         "predicted outputs are not available",
	"web_search_options": "web search is not available; give the assistant a tool",
	"verbosity":          "not available",
}

// completion is a non-streaming chat.completion response.
type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *openAIUsage       `json:"usage"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
	Logprobs     *struct{}         `json:"logprobs"`
}

type completionMessage struct {
	Role string `json:"role"`
	// Content is null when the answer is only tool calls.
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	Refusal          *string        `json:"refusal"`
}

// completionChunk is one chat.completion.chunk of a stream.
type completionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked
	// for usage (stream_options.include_usage), absent otherwise.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Event is set, with no choices, on a chunk that tells of what the
	// agent waits for: a tool call asking the user's approval
	// (approval_requested, approval_resolved), answered through the native
	// API. Clients that do not know it see a chunk without choices.
	Event *agentboxEvent `json:"agentbox_event,omitempty"`
}

// agentboxEvent is a chat event of the native stream carried in a chunk.
type agentboxEvent struct {
	Type  string         `json:"type"`
	Props map[string]any `json:"props"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

// openAIUsage is usage in OpenAI's terms. Prompt tokens include cached
// ones (OpenAI's convention); chat.Usage counts them apart (Anthropic's).
type openAIUsage struct {
	PromptTokens        int64               `json:"prompt_tokens"`
	CompletionTokens    int64               `json:"completion_tokens"`
	TotalTokens         int64               `json:"total_tokens"`
	PromptTokensDetails *promptTokenDetails `json:"prompt_tokens_details,omitempty"`
}

type promptTokenDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

func toOpenAIUsage(u chat.Usage) *openAIUsage {
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens
	out := &openAIUsage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
	if u.CacheReadTokens > 0 {
		out.PromptTokensDetails = &promptTokenDetails{CachedTokens: u.CacheReadTokens}
	}
	return out
}

// completions is POST /v1/chat/completions: the assistant is the model.
// Text events become content, thinking events reasoning_content, a direct
// assistant's function calls tool_calls (finish_reason "tool_calls"); the
// tools a sandboxed agent ran itself are not part of this API and reach
// native and Responses API clients only.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, user string) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var in completionRequest
	if err := decodeJSON(body, &in, false); err != nil {
		writeError(w, s.log, err)
		return
	}
	if in.Model == "" {
		writeError(w, s.log, fieldErr("model", "missing: set it to an assistant id (GET /v1/models lists them)"))
		return
	}
	if in.N != nil && *in.N != 1 {
		writeError(w, s.log, fieldErr("n", "%d is not supported: only one choice (n=1) is", *in.N))
		return
	}
	if _, err := s.lookup(in.Model); err != nil {
		writeError(w, s.log, err)
		return
	}
	msgs, err := toMessages("messages", in.Messages)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	opts, err := passedOptions(body, completionEnvelope, completionRefused)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	cid, _, err := chatID(r, in.ChatID)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	w.Header().Set("X-Chat-ID", cid)
	req := &pipeline.Request{
		UserID: user, TeamID: teamOf(r), ChatID: cid, AssistantID: in.Model, Messages: msgs,
		Locale: locale(r, in.Locale), Metadata: in.Metadata, Client: clientOf(r, in.Metadata), Options: opts,
	}
	if in.Stream {
		s.streamCompletion(w, r, req, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		return
	}
	s.completion(w, r, req)
}

// passedOptions decodes the request fields that are not in envelope as the
// turn's model options, strictly: an unknown field, a refused one (unless
// its value is false, null, 0 or empty) or a value of the wrong type is a
// 400 naming it.
func passedOptions(body []byte, envelope []string, refused map[string]string) (chat.ModelOptions, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return chat.ModelOptions{}, badRequest("invalid JSON: %v", err)
	}
	for _, k := range envelope {
		delete(all, k)
	}
	for k, why := range refused {
		raw, ok := all[k]
		if !ok {
			continue
		}
		switch string(raw) {
		case "false", "null", "0", `""`, "[]", `["text"]`:
			delete(all, k)
			continue
		}
		return chat.ModelOptions{}, fieldErr(k, "not supported: %s", why)
	}
	b, err := json.Marshal(all)
	if err != nil {
		return chat.ModelOptions{}, badRequest("invalid JSON: %v", err)
	}
	opts, err := chat.DecodeModelOptions("", b)
	if err != nil {
		return chat.ModelOptions{}, optionsError(err)
	}
	return opts, nil
}

// answer is what a turn's events and response say, as one OpenAI answer:
// the text and reasoning read the way a stream sends them (text messages
// joined with chat.TextSeparator), the client's tool calls, the finish
// reason.
type answer struct {
	text, reasoning chat.Collector
	calls           []chat.ToolCall
}

func newAnswer() *answer { return &answer{reasoning: chat.Collector{Type: chat.TypeThinking}} }

// add records e and returns what it adds: text, reasoning, or a client
// tool call.
func (a *answer) add(e chat.Event) (text, reasoning string, call *chat.ToolCall) {
	text = a.text.Append(e)
	reasoning = a.reasoning.Append(e)
	if tc, ok := clientCall(e); ok {
		a.calls = append(a.calls, tc)
		call = &a.calls[len(a.calls)-1]
	}
	return text, reasoning, call
}

// clientCall returns the function call a tool_call event asks the client
// to run (props client: true, from a direct assistant's model).
func clientCall(e chat.Event) (chat.ToolCall, bool) {
	if e.Type != chat.TypeToolCall || e.Event != chat.Start || e.Props["client"] != true {
		return chat.ToolCall{}, false
	}
	tc := chat.ToolCall{}
	tc.ID, _ = e.Props["id"].(string)
	tc.Name, _ = e.Props["name"].(string)
	switch in := e.Props["input"].(type) {
	case chat.RawJSON:
		tc.Input = in
	case nil:
		tc.Input = chat.RawJSON("{}")
	default:
		b, _ := json.Marshal(in)
		tc.Input = b
	}
	return tc, true
}

// final returns the answer text: a Next hook's replacement (a string it
// returned as data) when there is one, else what the events said.
func (a *answer) final(resp *pipeline.Response) string {
	if resp != nil {
		if s, ok := resp.Data.(string); ok {
			return s
		}
	}
	return a.text.Text()
}

// finishReason is the response's, "stop" when it gives none.
func finishReason(resp *pipeline.Response) string {
	if resp != nil && resp.FinishReason != "" {
		return resp.FinishReason
	}
	return chat.FinishStop
}

func toWireCalls(calls []chat.ToolCall, indexed bool) []wireToolCall {
	out := make([]wireToolCall, 0, len(calls))
	for i, tc := range calls {
		w := wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments()}}
		if indexed {
			n := i
			w.Index = &n
		}
		out = append(out, w)
	}
	return out
}

func (s *Server) completion(w http.ResponseWriter, r *http.Request, req *pipeline.Request) {
	a := newAnswer()
	stream := chat.NewSerial(func(e chat.Event) { a.add(e) })
	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	stream.Close()
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, s.log, err)
		}
		return
	}
	var usage chat.Usage
	if resp != nil {
		usage = resp.Usage
	}
	msg := completionMessage{Role: chat.RoleAssistant, ReasoningContent: a.reasoning.Text(), ToolCalls: toWireCalls(a.calls, false)}
	if text := a.final(resp); text != "" || len(a.calls) == 0 {
		msg.Content = &text
	}
	writeJSON(w, http.StatusOK, completion{
		ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(), Model: req.AssistantID,
		Choices: []completionChoice{{Message: msg, FinishReason: finishReason(resp)}},
		Usage:   toOpenAIUsage(usage),
	})
}

func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, req *pipeline.Request, includeUsage bool) {
	id, created := newID("chatcmpl-"), time.Now().Unix()
	frame := func(c completionChunk) []byte {
		c.ID, c.Object, c.Created, c.Model = id, "chat.completion.chunk", created, req.AssistantID
		if includeUsage && c.Usage == nil {
			c.Usage = json.RawMessage("null")
		}
		b, _ := json.Marshal(c) // only strings, numbers and raw JSON: cannot fail
		return dataFrame(b)
	}
	delta := func(d chunkDelta, finish *string) []byte {
		return frame(completionChunk{Choices: []chunkChoice{{Delta: d, FinishReason: finish}}})
	}
	st := newSSEStream(w, s.cfg.Heartbeat, func(raw func([]byte) error) error {
		empty := ""
		return raw(delta(chunkDelta{Role: chat.RoleAssistant, Content: &empty}, nil))
	})
	defer st.Close()

	a := newAnswer()
	stream := chat.NewSerial(func(e chat.Event) {
		text, reasoning, call := a.add(e)
		switch {
		case text != "":
			_ = st.Write(delta(chunkDelta{Content: &text}, nil))
		case reasoning != "":
			_ = st.Write(delta(chunkDelta{ReasoningContent: &reasoning}, nil))
		case call != nil:
			wc := toWireCalls([]chat.ToolCall{*call}, true)
			*wc[0].Index = len(a.calls) - 1
			_ = st.Write(delta(chunkDelta{ToolCalls: wc}, nil))
		case approvalEvent(e):
			_ = st.Write(frame(completionChunk{Choices: []chunkChoice{}, Event: &agentboxEvent{Type: e.Type, Props: e.Props}}))
		}
	})
	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	st.StopHeartbeat()
	stream.Close()
	if err != nil && r.Context().Err() != nil {
		return // the client went away
	}
	if err != nil {
		if !st.Committed() {
			writeError(w, s.log, err)
			return
		}
		// Headers went out: the error travels in the stream, in the shape
		// OpenAI's SDKs raise as an APIError.
		e := asAPIError(err)
		if e.Status >= 500 && !refusal[e.Err.Code] {
			s.log.Error("turn failed", "code", e.Err.Code, "err", err)
		}
		b, _ := json.Marshal(errorJSON(e))
		_ = st.Write(dataFrame(b))
		_ = st.Write(doneFrame)
		return
	}
	var usage chat.Usage
	if resp != nil {
		usage = resp.Usage
		if text := a.final(resp); text != a.text.Text() && a.text.Text() == "" {
			// The answer was not streamed (a Next hook's replacement).
			_ = st.Write(delta(chunkDelta{Content: &text}, nil))
		}
	}
	finish := finishReason(resp)
	_ = st.Write(delta(chunkDelta{}, &finish))
	if includeUsage {
		u, _ := json.Marshal(toOpenAIUsage(usage))
		_ = st.Write(frame(completionChunk{Choices: []chunkChoice{}, Usage: u}))
	}
	_ = st.Write(doneFrame)
}

// approvalEvent reports the start of an approval_requested or
// approval_resolved message: what the OpenAI-compatible streams carry of
// tool approval.
func approvalEvent(e chat.Event) bool {
	return e.Event == chat.Start && (e.Type == pipeline.TypeApprovalRequested || e.Type == pipeline.TypeApprovalResolved)
}

// dataFrame wraps JSON in a "data:" SSE frame.
func dataFrame(b []byte) []byte { return sse.Frame(sse.Event{Data: b}) }

// doneFrame ends an OpenAI stream: data: [DONE].
var doneFrame = dataFrame([]byte(sse.Done))
