package scripted

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// This file answers the OpenAI Responses API (POST /v1/responses), which
// the Codex CLI speaks over HTTP with server-sent events (its providers
// with supports_websockets = false) and opencode's openai provider uses.

// serveResponses answers POST /v1/responses.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	req, turn, err := s.record(r, "responses")
	if err != nil {
		return
	}
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		openaiError(w, HTTPError{Status: 400, Type: "invalid_request_error", Message: "llmtest: request body is not JSON: " + err.Error()})
		return
	}
	if req.Side {
		s.responsesRespond(w, r, &req, &Turn{Text: "llmtest session"}, body.Model, body.Stream)
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
	s.responsesRespond(w, r, &req, turn, body.Model, body.Stream)
}

// responsesItem is one output item of a scripted response, as the
// response.output_item.done event and the final response carry it.
type responsesItem map[string]any

// responsesItems turns a turn's blocks into Responses output items:
// reasoning (with a summary), an assistant message, function calls.
//
// A call of a tool the request offers in a namespace (Codex lists an MCP
// server's tools as namespace mcp__SERVER) is scripted by its full name,
// NAMESPACE__TOOL, and answered as the namespace's call.
func (s *Server) responsesItems(req *Request, blocks []anthropicBlock) []responsesItem {
	namespaces := responsesNamespaces(req.Body)
	out := make([]responsesItem, 0, len(blocks))
	for _, b := range blocks {
		switch b.kind {
		case "thinking":
			out = append(out, responsesItem{"id": s.id("rs_"), "type": "reasoning",
				"summary": []any{map[string]any{"type": "summary_text", "text": b.text}}})
		case "text":
			out = append(out, responsesItem{"id": s.id("msg_"), "type": "message", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": b.text, "annotations": []any{}}}})
		case "tool_use":
			item := responsesItem{"id": s.id("fc_"), "type": "function_call", "status": "completed",
				"call_id": b.id, "name": b.name, "arguments": b.input}
			for _, ns := range namespaces {
				if tool, ok := strings.CutPrefix(b.name, ns+"__"); ok {
					item["namespace"], item["name"] = ns, tool
				}
			}
			out = append(out, item)
		}
	}
	return out
}

func (s *Server) responsesRespond(w http.ResponseWriter, r *http.Request, req *Request, t *Turn, model string, stream bool) {
	if model == "" {
		model = Model
	}
	id := s.id("resp_")
	created := time.Now().Unix()
	blocks := s.blocks(t)
	usage := usageFor(t, req, blocks)
	items := s.responsesItems(req, blocks)
	status := "completed"
	var incomplete any
	if stopReason(t) == "max_tokens" {
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	response := func(status string, output []responsesItem, final bool) map[string]any {
		m := map[string]any{"id": id, "object": "response", "created_at": created, "status": status,
			"model": model, "output": output, "error": nil, "incomplete_details": nil}
		if final {
			m["incomplete_details"] = incomplete
			m["usage"] = map[string]any{
				"input_tokens": usage.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": usage.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
				"total_tokens": usage.InputTokens + usage.OutputTokens,
			}
		}
		return m
	}
	if !stream {
		if t.Stall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.hang(r.Context())
			return
		}
		writeJSON(w, http.StatusOK, response(status, items, true))
		return
	}
	e := newEventStream(w, t.CutAfter, true)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		e.send(typ, fields)
	}
	send("response.created", map[string]any{"response": response("in_progress", []responsesItem{}, false)})
	send("response.in_progress", map[string]any{"response": response("in_progress", []responsesItem{}, false)})
	if t.Stall {
		s.hang(r.Context())
		return
	}
	for i, it := range items {
		itemID := it["id"]
		switch it["type"] {
		case "reasoning":
			text := blocks[i].text
			send("response.output_item.added", map[string]any{"output_index": i, "item": responsesItem{"id": itemID, "type": "reasoning", "summary": []any{}}})
			part := map[string]any{"type": "summary_text", "text": ""}
			send("response.reasoning_summary_part.added", map[string]any{"item_id": itemID, "output_index": i, "summary_index": 0, "part": part})
			for _, c := range chunks(text, 24) {
				send("response.reasoning_summary_text.delta", map[string]any{"item_id": itemID, "output_index": i, "summary_index": 0, "delta": c})
			}
			send("response.reasoning_summary_text.done", map[string]any{"item_id": itemID, "output_index": i, "summary_index": 0, "text": text})
			send("response.reasoning_summary_part.done", map[string]any{"item_id": itemID, "output_index": i, "summary_index": 0,
				"part": map[string]any{"type": "summary_text", "text": text}})
		case "message":
			text := blocks[i].text
			send("response.output_item.added", map[string]any{"output_index": i, "item": responsesItem{"id": itemID, "type": "message",
				"role": "assistant", "status": "in_progress", "content": []any{}}})
			send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, c := range chunks(text, 24) {
				send("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": c})
			}
			send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": text})
			send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			args := blocks[i].input
			send("response.output_item.added", map[string]any{"output_index": i, "item": responsesItem{"id": itemID, "type": "function_call",
				"status": "in_progress", "call_id": it["call_id"], "name": it["name"], "arguments": ""}})
			for _, c := range chunks(args, 16) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": c})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": args})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	final := "response.completed"
	if status == "incomplete" {
		final = "response.incomplete"
	}
	send(final, map[string]any{"response": response(status, items, true)})
}

// responsesNamespaces are the names of the tool namespaces a request
// offers.
func responsesNamespaces(body []byte) []string {
	var b struct {
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &b)
	var out []string
	for _, t := range b.Tools {
		if t.Type == "namespace" && t.Name != "" {
			out = append(out, t.Name)
		}
	}
	return out
}
