package scripted

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// This file answers the Gemini API as the Gemini CLI calls it (through the
// @google/genai SDK): POST /v1beta/models/MODEL:streamGenerateContent?alt=sse
// for the agent loop, :generateContent for its helper calls (model routing,
// next-speaker and loop checks, which ask for JSON) and :countTokens.

// geminiMethod splits the last path segment, "MODEL:METHOD".
func geminiMethod(spec string) (model, method string) {
	model, method, _ = strings.Cut(spec, ":")
	return model, method
}

// serveGemini answers POST /{v1,v1beta}/models/{spec}.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method := geminiMethod(r.PathValue("spec"))
	switch method {
	case "generateContent", "streamGenerateContent", "countTokens":
	default:
		if _, _, err := s.record(r, "other"); err != nil {
			return
		}
		geminiError(w, HTTPError{Status: 404, Message: "llmtest: no Gemini method " + method})
		return
	}
	req, turn, err := s.record(r, "gemini")
	if err != nil {
		return
	}
	if method == "countTokens" {
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": tokens(len(req.Body))})
		return
	}
	if !json.Valid(req.Body) {
		geminiError(w, HTTPError{Status: 400, Message: "llmtest: request body is not JSON"})
		return
	}
	stream := method == "streamGenerateContent"
	if req.Side {
		s.geminiRespond(w, r, &req, &Turn{Text: sideJSON(req.Body)}, model, stream)
		return
	}
	if turn == nil {
		geminiError(w, HTTPError{Status: 400, Message: s.unmatched()})
		return
	}
	if !s.wait(r.Context(), turn.Delay.d()) {
		return
	}
	if turn.Error != nil {
		geminiError(w, turn.Error.resolved())
		return
	}
	s.geminiRespond(w, r, &req, turn, model, stream)
}

// geminiStatus is the Google RPC status name of an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503, 529:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func geminiError(w http.ResponseWriter, e HTTPError) {
	e = e.resolved()
	retryAfter := e.RetryAfter
	e.RetryAfter = 0
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{
		"code": e.Status, "message": e.Message, "status": geminiStatus(e.Status)}})
}

// geminiFinish is the finishReason of a turn.
func geminiFinish(t *Turn) string {
	switch stopReason(t) {
	case "max_tokens":
		return "MAX_TOKENS"
	case "refusal":
		return "SAFETY"
	}
	return "STOP"
}

func (s *Server) geminiRespond(w http.ResponseWriter, r *http.Request, req *Request, t *Turn, model string, stream bool) {
	if model == "" {
		model = Model
	}
	id := s.id("")
	blocks := s.blocks(t)
	usage := usageFor(t, req, blocks)
	usageJSON := map[string]any{"promptTokenCount": usage.InputTokens, "candidatesTokenCount": usage.OutputTokens,
		"totalTokenCount": usage.InputTokens + usage.OutputTokens}
	chunk := func(parts []map[string]any, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": id}
		if final {
			cand["finishReason"] = geminiFinish(t)
			m["usageMetadata"] = usageJSON
		}
		return m
	}
	var calls []map[string]any
	for _, b := range blocks {
		if b.kind == "tool_use" {
			fc := map[string]any{"name": b.name, "args": json.RawMessage(b.input)}
			calls = append(calls, map[string]any{"functionCall": fc})
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
		var parts []map[string]any
		if t.Thinking != "" {
			parts = append(parts, map[string]any{"text": t.Thinking, "thought": true})
		}
		if t.Text != "" {
			parts = append(parts, map[string]any{"text": t.Text})
		}
		writeJSON(w, http.StatusOK, chunk(append(parts, calls...), true))
		return
	}
	e := newEventStream(w, t.CutAfter, false)
	if t.Stall {
		e.send("", chunk([]map[string]any{{"text": ""}}, false))
		s.hang(r.Context())
		return
	}
	var pending []map[string]any
	flush := func(final bool) {
		e.send("", chunk(pending, final))
		pending = nil
	}
	for _, c := range chunks(t.Thinking, 24) {
		pending = append(pending, map[string]any{"text": c, "thought": true})
		flush(false)
	}
	for _, c := range chunks(t.Text, 24) {
		pending = append(pending, map[string]any{"text": c})
		flush(false)
	}
	pending = append(pending, calls...)
	if len(pending) == 0 {
		pending = []map[string]any{{"text": ""}}
	}
	flush(true)
}

// sideJSON answers a helper call that asks for JSON (generationConfig's
// responseJsonSchema or responseSchema): an object with every required
// property, enums taking their first value, so the CLI's checks pass
// quietly (a next-speaker check hears "user", a router a low score). A
// call without a schema gets "ok".
func sideJSON(body []byte) string {
	var b struct {
		GenerationConfig struct {
			JSONSchema json.RawMessage `json:"responseJsonSchema"`
			Schema     json.RawMessage `json:"responseSchema"`
		} `json:"generationConfig"`
	}
	_ = json.Unmarshal(body, &b)
	schema := b.GenerationConfig.JSONSchema
	if len(schema) == 0 {
		schema = b.GenerationConfig.Schema
	}
	if len(schema) == 0 {
		return "ok"
	}
	var sc any
	if json.Unmarshal(schema, &sc) != nil {
		return "{}"
	}
	out, _ := json.Marshal(sample(sc, 0))
	return string(out)
}

// sample is a value of a JSON schema (Gemini's OpenAPI subset too: types
// may be upper case).
func sample(schema any, depth int) any {
	m, _ := schema.(map[string]any)
	if m == nil || depth > 8 {
		return nil
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := m["type"].(string)
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		for k, v := range props {
			out[k] = sample(v, depth+1)
		}
		return out
	case "array":
		return []any{}
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	}
	return nil
}
