package scripted

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// serveAnthropic answers POST /v1/messages (Claude Code adds ?beta=true).
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	req, turn, err := s.record(r, "anthropic")
	if err != nil {
		return
	}
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		anthropicError(w, HTTPError{Status: 400, Type: "invalid_request_error", Message: "llmtest: request body is not JSON: " + err.Error()})
		return
	}
	if req.Side {
		s.anthropicRespond(w, r, &req, sideTurn(&req), body.Model, body.Stream)
		return
	}
	if turn == nil {
		anthropicError(w, HTTPError{Status: 400, Type: "invalid_request_error", Message: s.unmatched()})
		return
	}
	if !s.wait(r.Context(), turn.Delay.d()) {
		return
	}
	if turn.Error != nil {
		anthropicError(w, turn.Error.resolved())
		return
	}
	s.anthropicRespond(w, r, &req, turn, body.Model, body.Stream)
}

// sideTurn is the harmless answer to a side request: a JSON title for
// structured-output requests, "ok" otherwise.
func sideTurn(r *Request) *Turn {
	var b struct {
		OutputConfig struct {
			Format json.RawMessage `json:"format"`
		} `json:"output_config"`
	}
	_ = json.Unmarshal(r.Body, &b)
	if len(b.OutputConfig.Format) > 0 && string(b.OutputConfig.Format) != "null" {
		return &Turn{Text: `{"title":"llmtest session"}`}
	}
	return &Turn{Text: "ok"}
}

func (d Duration) d() time.Duration { return time.Duration(d) }

func anthropicError(w http.ResponseWriter, e HTTPError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": e.Type, "message": e.Message},
	})
}

// anthropicBlock is a content block of a scripted response.
type anthropicBlock struct {
	kind  string // thinking, text, tool_use
	text  string
	id    string
	name  string
	input string
}

func (s *Server) blocks(t *Turn) []anthropicBlock {
	var out []anthropicBlock
	if t.Thinking != "" {
		out = append(out, anthropicBlock{kind: "thinking", text: t.Thinking})
	}
	if t.Text != "" || (t.Thinking == "" && len(t.ToolCalls) == 0) {
		out = append(out, anthropicBlock{kind: "text", text: t.Text})
	}
	for _, c := range t.ToolCalls {
		id := c.ID
		if id == "" {
			id = s.id("toolu_")
		}
		out = append(out, anthropicBlock{kind: "tool_use", id: id, name: c.Name, input: inputJSON(c.Input)})
	}
	return out
}

func stopReason(t *Turn) string {
	if t.StopReason != "" {
		return t.StopReason
	}
	if len(t.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func usageFor(t *Turn, req *Request, blocks []anthropicBlock) Usage {
	if t.Usage != nil {
		return *t.Usage
	}
	n := 0
	for _, b := range blocks {
		n += len(b.text) + len(b.input) + len(b.name)
	}
	return Usage{InputTokens: tokens(len(req.Body)), OutputTokens: tokens(n)}
}

// signature is the opaque signature sent for scripted thinking blocks.
const signature = "bGxtdGVzdCBzY3JpcHRlZCB0aGlua2luZw=="

func (s *Server) anthropicRespond(w http.ResponseWriter, r *http.Request, req *Request, t *Turn, model string, stream bool) {
	if model == "" {
		model = Model
	}
	msgID := s.id("msg_")
	blocks := s.blocks(t)
	usage := usageFor(t, req, blocks)
	stop := stopReason(t)
	usageJSON := map[string]any{
		"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
	}
	if !stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.hang(r.Context())
			return
		}
		content := make([]map[string]any, 0, len(blocks))
		for _, b := range blocks {
			switch b.kind {
			case "thinking":
				content = append(content, map[string]any{"type": "thinking", "thinking": b.text, "signature": signature})
			case "text":
				content = append(content, map[string]any{"type": "text", "text": b.text})
			case "tool_use":
				content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": json.RawMessage(b.input)})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usageJSON,
		})
		return
	}
	e := newEventStream(w, t.CutAfter, true)
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": usage.InputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	e.send("ping", map[string]any{"type": "ping"})
	if t.Stall {
		s.hang(r.Context())
		return
	}
	for i, b := range blocks {
		switch b.kind {
		case "thinking":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, c := range chunks(b.text, 24) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "thinking_delta", "thinking": c}})
			}
			e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "signature_delta", "signature": signature}})
		case "text":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range chunks(b.text, 24) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": c}})
			}
		case "tool_use":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.id, "name": b.name, "input": map[string]any{}}})
			for _, c := range chunks(b.input, 16) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": c}})
			}
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage.OutputTokens}})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
