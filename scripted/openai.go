package scripted

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/sse"
)

// serveOpenAI answers POST /v1/chat/completions.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	req, turn, err := s.record(r, "openai")
	if err != nil {
		return
	}
	var body struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		openaiError(w, HTTPError{Status: 400, Type: "invalid_request_error", Message: "llmtest: request body is not JSON: " + err.Error()})
		return
	}
	if turn == nil {
		openaiError(w, HTTPError{Status: 400, Type: "invalid_request_error", Message: s.unmatched()})
		return
	}
	if !s.wait(r.Context(), turn.Delay.d()) {
		return
	}
	if turn.Error != nil {
		openaiError(w, turn.Error.resolved())
		return
	}
	s.openaiRespond(w, r, &req, turn, body.Model, body.Stream, body.StreamOptions.IncludeUsage)
}

func openaiError(w http.ResponseWriter, e HTTPError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	typ := e.Type
	switch typ {
	case "rate_limit_error":
		typ = "rate_limit_exceeded"
	case "api_error", "overloaded_error":
		typ = "server_error"
	}
	writeJSON(w, e.Status, map[string]any{
		"error": map[string]any{"message": e.Message, "type": typ, "code": e.Type, "param": nil},
	})
}

// finishReason maps an Anthropic stop reason to an OpenAI finish_reason;
// OpenAI values pass through.
func finishReason(t *Turn) string {
	switch r := stopReason(t); r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "refusal":
		return "content_filter"
	default:
		return r
	}
}

func (s *Server) openaiRespond(w http.ResponseWriter, r *http.Request, req *Request, t *Turn, model string, stream, includeUsage bool) {
	if model == "" {
		model = Model
	}
	id := s.id("chatcmpl-")
	created := time.Now().Unix()
	blocks := s.blocks(t)
	usage := usageFor(t, req, blocks)
	usageJSON := map[string]any{
		"prompt_tokens": usage.InputTokens, "completion_tokens": usage.OutputTokens,
		"total_tokens": usage.InputTokens + usage.OutputTokens,
	}
	finish := finishReason(t)
	var calls []anthropicBlock
	for _, b := range blocks {
		if b.kind == "tool_use" {
			calls = append(calls, b)
		}
	}
	if !stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.hang(r.Context())
			return
		}
		msg := map[string]any{"role": "assistant", "content": t.Text}
		if t.Text == "" && len(calls) > 0 {
			msg["content"] = nil
		}
		if t.Thinking != "" {
			msg["reasoning_content"] = t.Thinking
		}
		if len(calls) > 0 {
			tc := make([]map[string]any, 0, len(calls))
			for _, c := range calls {
				tc = append(tc, map[string]any{"id": c.id, "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.input}})
			}
			msg["tool_calls"] = tc
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usageJSON,
		})
		return
	}
	e := newEventStream(w, t.CutAfter, false)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	e.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if t.Stall {
		s.hang(r.Context())
		return
	}
	for _, c := range chunks(t.Thinking, 24) {
		e.send("", chunk(map[string]any{"reasoning_content": c}, nil))
	}
	for _, c := range chunks(t.Text, 24) {
		e.send("", chunk(map[string]any{"content": c}, nil))
	}
	for i, c := range calls {
		e.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil))
		for _, part := range chunks(c.input, 16) {
			e.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": part}}}}, nil))
		}
	}
	e.send("", chunk(map[string]any{}, finish))
	if includeUsage {
		e.send("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usageJSON,
		})
	}
	e.send("", sse.Done)
}
