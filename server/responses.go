package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/store"
)

// The Responses API (POST /v1/responses), as OpenAI documents it, onto
// agentbox's turns:
//
//   - input (a string or a list of items: messages, function_call and
//     function_call_output, item_reference, and the reasoning and mcp_call
//     items of earlier responses, which are skipped) and instructions
//     become the turn's messages; model options are translated to the
//     Chat Completions names the connectors speak (max_output_tokens,
//     text.format, reasoning.effort, flat function tools);
//   - a response belongs to a chat. conversation names it (the
//     conversation id is the chat id, as X-Chat-ID); previous_response_id
//     continues the chat of that stored response; from a response that
//     is not its chat's newest, the request branches: it continues a
//     fork of the chat at the checkpoint of that response (its history,
//     memory and workspace as they were), a new conversation;
//     otherwise a request that references items of a stored response
//     continues its chat, and any other request starts a new chat;
//   - store: false answers without storing: the chat history is left as it
//     was and the response can be neither retrieved nor continued;
//   - the output is text messages, reasoning items (summary text) for
//     thinking, function_call items for a direct assistant's calls of the
//     client's functions, and mcp_call items (server_label: the assistant)
//     for the tools a sandboxed agent ran itself: name, arguments, output,
//     status, never for the client to execute.

// responsesRequest is a Responses API request. Fields of OpenAI's that
// agentbox cannot honour are refused by name (responsesRefused); unknown
// fields too.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Store              *bool           `json:"store"`
	Stream             bool            `json:"stream"`
	Metadata           map[string]any  `json:"metadata"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Text               *struct {
		Format    json.RawMessage `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	} `json:"text"`
	Reasoning *struct {
		Effort  string          `json:"effort"`
		Summary json.RawMessage `json:"summary"`
	} `json:"reasoning"`
	User string `json:"user"`
	// Accepted and not passed on: they do not change the answer.
	SafetyIdentifier string          `json:"safety_identifier"`
	PromptCacheKey   string          `json:"prompt_cache_key"`
	ServiceTier      string          `json:"service_tier"`
	Truncation       string          `json:"truncation"`
	Include          []string        `json:"include"`
	StreamOptions    json.RawMessage `json:"stream_options"`
	// ChatID and Locale are agentbox extensions.
	ChatID string `json:"chat_id"`
	Locale string `json:"locale"`
}

// responsesRefused are OpenAI request fields agentbox cannot honour.
var responsesRefused = map[string]string{
	"background":             "background responses are not available; stream instead",
	"prompt":                 "prompt templates are not available; send instructions",
	"max_tool_calls":         "not available",
	"top_logprobs":           "log probabilities are not available",
	"context_management":     "not available",
	"prompt_cache_retention": "not available",
}

// responsesFields are the JSON names responsesRequest knows.
var responsesFields = func() []string {
	var out []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[responsesRequest]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}()

// decodeResponsesRequest decodes body, refusing unknown fields and
// refused ones (unless null or false) with a 400 naming them.
func decodeResponsesRequest(body []byte) (*responsesRequest, error) {
	var in responsesRequest
	if err := decodeJSON(body, &in, false); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return nil, badRequest("invalid JSON: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if why, ok := responsesRefused[k]; ok {
			if v := string(all[k]); v != "null" && v != "false" && v != "0" {
				return nil, fieldErr(k, "not supported: %s", why)
			}
			continue
		}
		if !slices.Contains(responsesFields, k) {
			return nil, fieldErr(k, "unknown field (known: %s)", strings.Join(responsesFields, ", "))
		}
	}
	if in.Model == "" {
		return nil, fieldErr("model", "missing: set it to an assistant id (GET /v1/models lists them)")
	}
	if in.PreviousResponseID != "" && len(in.Conversation) > 0 && string(in.Conversation) != "null" {
		return nil, fieldErr("previous_response_id", "give previous_response_id or conversation, not both")
	}
	if in.Text != nil && len(in.Text.Verbosity) > 0 && string(in.Text.Verbosity) != "null" {
		return nil, fieldErr("text.verbosity", "not supported")
	}
	return &in, nil
}

// stored reports whether the response is to be stored (OpenAI's default).
func (in *responsesRequest) stored() bool { return in.Store == nil || *in.Store }

// options translates the request's model options to chat.ModelOptions
// (Chat Completions names and shapes).
func (in *responsesRequest) options() (chat.ModelOptions, error) {
	o := chat.ModelOptions{Temperature: in.Temperature, TopP: in.TopP, MaxCompletionTokens: in.MaxOutputTokens,
		ParallelToolCalls: in.ParallelToolCalls, User: in.User}
	if in.Reasoning != nil {
		o.ReasoningEffort = in.Reasoning.Effort
	}
	if len(in.Tools) > 0 && string(in.Tools) != "null" {
		t, err := chatTools(in.Tools)
		if err != nil {
			return o, err
		}
		o.Tools = t
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		c, err := chatToolChoice(in.ToolChoice)
		if err != nil {
			return o, err
		}
		o.ToolChoice = c
	}
	if in.Text != nil && len(in.Text.Format) > 0 && string(in.Text.Format) != "null" {
		f, err := chatResponseFormat(in.Text.Format)
		if err != nil {
			return o, err
		}
		o.ResponseFormat = f
	}
	return o, nil
}

// chatTools turns the Responses API's flat function tools into Chat
// Completions tools.
func chatTools(raw json.RawMessage) (json.RawMessage, error) {
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, fieldErr("tools", "want a list of {type: function, name, description, parameters}")
	}
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	out := make([]tool, 0, len(tools))
	for i, t := range tools {
		p := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, fieldErr(p+".type", "%q is not supported: agentbox offers function tools only (a sandboxed assistant's agent has its own tools)", t.Type)
		case t.Name == "":
			return nil, fieldErr(p+".name", "missing")
		}
		out = append(out, tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	b, err := json.Marshal(out)
	return b, err
}

// chatToolChoice turns tool_choice ("auto", "none", "required" or
// {type: function, name}) into Chat Completions' shape.
func chatToolChoice(raw json.RawMessage) (json.RawMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return raw, nil
		}
		return nil, fieldErr("tool_choice", "%q is not one of auto, none, required", s)
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Type != "function" || c.Name == "" {
		return nil, fieldErr("tool_choice", `want "auto", "none", "required" or {"type": "function", "name": ...}`)
	}
	return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
}

// chatResponseFormat turns text.format into Chat Completions'
// response_format.
func chatResponseFormat(raw json.RawMessage) (json.RawMessage, error) {
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fieldErr("text.format", "want {type: text | json_object | json_schema, ...}")
	}
	switch f.Type {
	case "text", "json_object":
		return json.Marshal(map[string]string{"type": f.Type})
	case "json_schema":
		if len(f.Schema) == 0 {
			return nil, fieldErr("text.format.schema", "missing: give the JSON Schema the answer must follow")
		}
		js := map[string]any{"name": f.Name, "schema": f.Schema}
		if f.Description != "" {
			js["description"] = f.Description
		}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		return json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
	}
	return nil, fieldErr("text.format.type", "%q is not one of text, json_object, json_schema", f.Type)
}

// optionParam names, for a refused model option, the Responses API field
// it came from.
var optionParam = map[string]string{
	"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens",
	"response_format": "text.format", "reasoning_effort": "reasoning.effort",
}

// conversationID reads conversation: a string or {"id": ...}.
func conversationID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if raw[0] == '"' {
		_ = json.Unmarshal(raw, &id)
	} else {
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return "", fieldErr("conversation", `want a conversation id or {"id": ...}`)
		}
		id = c.ID
	}
	if err := validateID("chat", id); err != nil {
		return "", fieldErr("conversation", "%v", err)
	}
	return id, nil
}

// responseChat decides the chat of a request (see the package comment):
// the chat id, whether the input continues its stored history, and the
// previous response.
func (s *Server) responseChat(ctx context.Context, r *http.Request, user string, in *responsesRequest, refs []string) (cid string, cont bool, err error) {
	conv, err := conversationID(in.Conversation)
	if err != nil {
		return "", false, err
	}
	hdr := strings.TrimSpace(r.Header.Get("X-Chat-ID"))
	named := cmpOr(conv, in.ChatID)
	if hdr != "" && named != "" && hdr != named {
		return "", false, badRequest("X-Chat-ID header %q and the conversation (or chat_id) %q differ: send one of them", hdr, named)
	}
	if in.PreviousResponseID != "" {
		prev, found, err := s.responses.Response(ctx, user, in.PreviousResponseID)
		switch {
		case err != nil:
			return "", false, err
		case !found:
			return "", false, &chat.Error{Code: CodeNotFound, Message: fmt.Sprintf(
				"previous_response_id: no stored response %q (it was created with store: false, or is not yours)", in.PreviousResponseID),
				Err: &chat.FieldError{Path: "previous_response_id", Problem: "not found"}}
		case hdr != "" && hdr != prev.ChatID:
			return "", false, badRequest("X-Chat-ID header %q is not the chat of response %s (%q)", hdr, prev.ID, prev.ChatID)
		}
		latest, err := s.responses.LatestResponse(ctx, user, prev.ChatID)
		if err != nil {
			return "", false, err
		}
		if latest != prev.ID {
			return s.branchFrom(ctx, user, prev, latest)
		}
		return prev.ChatID, true, nil
	}
	switch {
	case conv != "":
		return conv, true, nil
	case named != "" || hdr != "":
		id, _, err := chatID(r, in.ChatID)
		return id, false, err
	}
	for _, ref := range refs {
		if prev, found, err := s.responses.Response(ctx, user, ref); err == nil && found {
			return prev.ChatID, false, nil
		}
	}
	return newID("chat-"), false, nil
}

// branchFrom forks the chat of prev, a response that is not its chat's
// newest, at the checkpoint of the turn that answered prev: the request
// continues that new chat. Without that checkpoint it is a conflict.
func (s *Server) branchFrom(ctx context.Context, user string, prev store.Response, latest string) (string, bool, error) {
	if s.cfg.Chats == nil {
		return "", false, &chat.Error{Code: CodeConflict, Message: fmt.Sprintf(
			"previous_response_id: response %s is not the newest of its conversation %q (the newest is %s), and this server keeps no chats to branch from",
			prev.ID, prev.ChatID, latest), Err: &chat.FieldError{Path: "previous_response_id", Problem: "not the newest"}}
	}
	id, err := s.cfg.Chats.Fork(ctx, user, prev.ChatID, pipeline.Target{Response: prev.ID})
	if err != nil {
		if ce := chat.AsError(err); ce.Code == chat.ErrInvalidRequest {
			return "", false, &chat.Error{Code: CodeConflict, Message: fmt.Sprintf(
				"previous_response_id: response %s is not the newest of its conversation %q (the newest is %s), and it cannot be branched from: %s",
				prev.ID, prev.ChatID, latest, ce.Message), Err: &chat.FieldError{Path: "previous_response_id", Problem: "not the newest"}}
		}
		return "", false, err
	}
	s.log.Info("responses: branched from an older response", "user", user, "chat", prev.ChatID, "response", prev.ID, "fork", id)
	return id, true, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// responses is POST /v1/responses.
func (s *Server) responsesCreate(w http.ResponseWriter, r *http.Request, user string) {
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	in, err := decodeResponsesRequest(body)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	a, err := s.lookup(in.Model)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	opts, err := in.options()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	msgs, refs, err := s.inputMessages(r.Context(), user, in)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	cid, cont, err := s.responseChat(r.Context(), r, user, in, refs)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	w.Header().Set("X-Chat-ID", cid)
	out := newResponseOutput(a.ID, cid, in)
	req := &pipeline.Request{
		UserID: user, TeamID: teamOf(r), ChatID: cid, AssistantID: a.ID, Messages: msgs, Continue: cont, Ephemeral: !in.stored(),
		Locale: locale(r, in.Locale), Metadata: in.Metadata, Client: clientOf(r, in.Metadata), Options: opts, ResponseID: out.resp.ID,
	}
	if in.Stream {
		s.streamResponse(w, r, req, out)
		return
	}
	s.wholeResponse(w, r, req, out)
}

// responseError renames a refused model option to the Responses API field
// it came from.
func responseError(err error) error {
	return renameParam(err, func(p string) string { return optionParam[p] })
}

// retrieve is GET /v1/responses/{id}: a stored response as it was
// returned.
func (s *Server) responsesGet(w http.ResponseWriter, r *http.Request, user string) {
	id := r.PathValue("id")
	resp, found, err := s.responses.Response(r.Context(), user, id)
	switch {
	case err != nil:
		writeError(w, s.log, err)
	case !found:
		writeError(w, s.log, notFound("no stored response %q (it was created with store: false, or is not yours)", id))
	default:
		w.Header().Set("X-Chat-ID", resp.ChatID)
		writeRawJSON(w, http.StatusOK, resp.Body)
	}
}
