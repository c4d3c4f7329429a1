package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// completionRequest is the part of an OpenAI Chat Completions request the
// server reads. Other fields OpenAI clients send are accepted and ignored,
// except the sampling options in passOptions, which go to the assistant.
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

// passOptions are the OpenAI request fields passed to the turn as options.
var passOptions = []string{
	"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop",
	"presence_penalty", "frequency_penalty", "seed", "reasoning_effort",
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
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent string  `json:"reasoning_content,omitempty"`
	Refusal          *string `json:"refusal"`
}

// completionChunk is one chat.completion.chunk of a stream.
type completionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *openAIUsage  `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
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
// Text events become delta.content, thinking events
// delta.reasoning_content; other events (tool calls the agent ran on the
// server, notices) are not part of this API and only reach native clients.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, user string) {
	body, err := readBody(w, r, s.cfg.BodyLimit)
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
		writeError(w, s.log, badRequest("model is missing: set it to an assistant id (GET /v1/models lists them)"))
		return
	}
	if in.N != nil && *in.N != 1 {
		writeError(w, s.log, badRequest("n=%d is not supported: only one choice (n=1) is", *in.N))
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
	opts, err := passedOptions(body)
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
		UserID: user, ChatID: cid, AssistantID: in.Model, Messages: msgs,
		Locale: locale(r, in.Locale), Metadata: in.Metadata, Options: opts,
	}
	if in.Stream {
		s.streamCompletion(w, r, req, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
		return
	}
	s.completion(w, r, req)
}

// passedOptions picks the sampling options out of the request body and
// decodes them strictly, as the turn's model options.
func passedOptions(body []byte) (chat.ModelOptions, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return chat.ModelOptions{}, badRequest("invalid JSON: %v", err)
	}
	picked := map[string]json.RawMessage{}
	for _, k := range passOptions {
		if raw, ok := all[k]; ok {
			picked[k] = raw
		}
	}
	b, err := json.Marshal(picked)
	if err != nil {
		return chat.ModelOptions{}, badRequest("invalid JSON: %v", err)
	}
	opts, err := chat.DecodeModelOptions("", b)
	if err != nil {
		return chat.ModelOptions{}, badRequest("%v", err)
	}
	return opts, nil
}

// openAIEvents maps chat events to the text and reasoning deltas of the
// OpenAI API, remembering which messages had text out.
type openAIEvents struct {
	streamed map[string]bool
	text     strings.Builder
	thinking strings.Builder
}

// content returns the text and reasoning e adds ("" when none).
func (o *openAIEvents) content(e chat.Event) (text, reasoning string) {
	if o.streamed == nil {
		o.streamed = map[string]bool{}
	}
	switch e.Event {
	case chat.Start, chat.Delta:
	case chat.Replace:
		// Text already streamed cannot be taken back; a replacement only
		// shows when the message had no text out yet (a loading message
		// that became the answer).
		if o.streamed[e.ID] {
			return "", ""
		}
	default:
		return "", ""
	}
	if e.Text == "" {
		return "", ""
	}
	switch e.Type {
	case chat.TypeText:
		o.streamed[e.ID] = true
		o.text.WriteString(e.Text)
		return e.Text, ""
	case chat.TypeThinking:
		o.thinking.WriteString(e.Text)
		return "", e.Text
	}
	return "", ""
}

func (s *Server) completion(w http.ResponseWriter, r *http.Request, req *pipeline.Request) {
	var oe openAIEvents
	stream := chat.NewSerial(func(e chat.Event) { oe.content(e) })
	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	stream.Close()
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, s.log, err)
		}
		return
	}
	text := oe.text.String()
	var usage chat.Usage
	if resp != nil {
		usage = resp.Usage
		if resp.Content != "" {
			text = resp.Content
		}
	}
	writeJSON(w, http.StatusOK, completion{
		ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(), Model: req.AssistantID,
		Choices: []completionChoice{{
			Message:      completionMessage{Role: chat.RoleAssistant, Content: text, ReasoningContent: oe.thinking.String()},
			FinishReason: "stop",
		}},
		Usage: toOpenAIUsage(usage),
	})
}

func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, req *pipeline.Request, includeUsage bool) {
	id, created := newID("chatcmpl-"), time.Now().Unix()
	frame := func(c completionChunk) []byte {
		c.ID, c.Object, c.Created, c.Model = id, "chat.completion.chunk", created, req.AssistantID
		b, _ := json.Marshal(c) // only strings and numbers: cannot fail
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

	var oe openAIEvents
	stream := chat.NewSerial(func(e chat.Event) {
		text, reasoning := oe.content(e)
		switch {
		case text != "":
			_ = st.Write(delta(chunkDelta{Content: &text}, nil))
		case reasoning != "":
			_ = st.Write(delta(chunkDelta{ReasoningContent: &reasoning}, nil))
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
		if e.Status >= 500 {
			s.log.Error("turn failed", "code", e.Err.Code, "err", err)
		}
		b, _ := json.Marshal(errorJSON(e))
		_ = st.Write(dataFrame(b))
		_ = st.Write([]byte("data: [DONE]\n\n"))
		return
	}
	var usage chat.Usage
	if resp != nil {
		usage = resp.Usage
		if resp.Content != "" && oe.text.Len() == 0 {
			// The answer was not streamed (a Next hook's replacement).
			_ = st.Write(delta(chunkDelta{Content: &resp.Content}, nil))
		}
	}
	stop := "stop"
	_ = st.Write(delta(chunkDelta{}, &stop))
	if includeUsage {
		_ = st.Write(frame(completionChunk{Choices: []chunkChoice{}, Usage: toOpenAIUsage(usage)}))
	}
	_ = st.Write([]byte("data: [DONE]\n\n"))
}

// dataFrame wraps JSON in a "data:" SSE frame.
func dataFrame(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}
