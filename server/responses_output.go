package server

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/store"
)

// responseObject is a Responses API response object.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseErr      `json:"error"`
	IncompleteDetails  *incompleteDetail `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          reasoningConfig   `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              json.RawMessage   `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]any    `json:"metadata"`
	Conversation       *conversationRef  `json:"conversation"`
}

type responseErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetail struct {
	Reason string `json:"reason"`
}

type reasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type responseUsage struct {
	InputTokens         int64         `json:"input_tokens"`
	InputTokensDetails  cachedDetail  `json:"input_tokens_details"`
	OutputTokens        int64         `json:"output_tokens"`
	OutputTokensDetails reasonDetails `json:"output_tokens_details"`
	TotalTokens         int64         `json:"total_tokens"`
}

type cachedDetail struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type reasonDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func toResponseUsage(u chat.Usage) *responseUsage {
	in := u.InputTokens + u.CacheReadTokens + u.CacheCreationTokens
	return &responseUsage{InputTokens: in, InputTokensDetails: cachedDetail{u.CacheReadTokens},
		OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens}
}

// Output items.

type messageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type reasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Summary []summaryText `json:"summary"`
}

type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// mcpCallItem is a tool the sandboxed agent ran itself.
type mcpCallItem struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	Status      string    `json:"status"`
	ServerLabel string    `json:"server_label"`
	Name        string    `json:"name"`
	Arguments   string    `json:"arguments"`
	Output      *string   `json:"output"`
	Error       *mcpError `json:"error"`
}

// mcpError is a failed tool's output, as OpenAI's mcp_tool_execution_error.
type mcpError struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// itemIDPattern matches the ids of output items: a kind, the random part
// of the response id, the item's number.
var itemIDPattern = regexp.MustCompile(`^(?:msg|rs|fc|mcp)_([0-9a-f]{24})_[0-9]+$`)

// responseOfItem returns the id of the response an output item id belongs
// to ("" for an id agentbox did not make).
func responseOfItem(id string) string {
	m := itemIDPattern.FindStringSubmatch(id)
	if m == nil {
		return ""
	}
	return "resp_" + m[1]
}

// responseOutput builds a response from a turn's events: its output items
// and, when streaming, the events that announce them (send). Every text
// piece is what a chat.Collector reads from the events, so the message
// items' texts, joined, are the Chat Completions answer, streamed or not.
type responseOutput struct {
	resp  *responseObject
	chat  string
	label string
	key   string // random part of the ids
	n     int

	send func(typ string, fields map[string]any) // nil: not streaming

	text    chat.Collector
	think   chat.Collector
	open    any // the *messageItem or *reasoningItem being written
	openIdx int
	// openMsg is the chat event message the open item is written from.
	openMsg string
	tools   map[string]int // agent tool_use id (and "event:" + event id) -> output index
}

func newResponseOutput(assistantID, chatID string, in *responsesRequest) *responseOutput {
	id := newID("resp_")
	r := &responseObject{
		ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress", Model: assistantID,
		Output: []any{}, ParallelToolCalls: in.ParallelToolCalls == nil || *in.ParallelToolCalls, Store: in.stored(),
		Temperature: in.Temperature, TopP: in.TopP, MaxOutputTokens: in.MaxOutputTokens, Truncation: "disabled",
		Text: json.RawMessage(`{"format":{"type":"text"}}`), ToolChoice: json.RawMessage(`"auto"`), Tools: json.RawMessage(`[]`),
		Metadata: in.Metadata, Conversation: &conversationRef{ID: chatID},
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if in.Instructions != nil {
		r.Instructions = in.Instructions
	}
	if in.PreviousResponseID != "" {
		r.PreviousResponseID = &in.PreviousResponseID
	}
	if in.User != "" {
		r.User = &in.User
	}
	if in.Reasoning != nil && in.Reasoning.Effort != "" {
		r.Reasoning.Effort = &in.Reasoning.Effort
	}
	if in.Text != nil && len(in.Text.Format) > 0 && string(in.Text.Format) != "null" {
		r.Text, _ = json.Marshal(map[string]json.RawMessage{"format": in.Text.Format})
	}
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		r.ToolChoice = in.ToolChoice
	}
	if len(in.Tools) > 0 && string(in.Tools) != "null" {
		r.Tools = in.Tools
	}
	return &responseOutput{resp: r, chat: chatID, label: assistantID, key: strings.TrimPrefix(id, "resp_"),
		think: chat.Collector{Type: chat.TypeThinking}, tools: map[string]int{}}
}

func (o *responseOutput) itemID(kind string) string {
	o.n++
	return kind + "_" + o.key + "_" + strconv.Itoa(o.n)
}

func (o *responseOutput) emit(typ string, fields map[string]any) {
	if o.send != nil {
		o.send(typ, fields)
	}
}

// add appends an item to the output and announces it.
func (o *responseOutput) add(item any) int {
	o.resp.Output = append(o.resp.Output, item)
	idx := len(o.resp.Output) - 1
	o.emit("response.output_item.added", map[string]any{"output_index": idx, "item": item})
	return idx
}

// event turns one chat event into output.
func (o *responseOutput) event(e chat.Event) {
	if piece := o.text.Append(e); piece != "" {
		o.textPiece(e.ID, piece)
		return
	}
	if piece := o.think.Append(e); piece != "" {
		o.thinkingPiece(e.ID, piece)
		return
	}
	switch {
	case e.Type == chat.TypeToolCall && e.Props["client"] == true:
		if tc, ok := clientCall(e); ok {
			o.functionCall(tc)
		}
	case e.Type == chat.TypeToolCall:
		o.agentCall(e)
	case e.Type == chat.TypeToolResult && (e.Event == chat.Start || e.Event == chat.Replace):
		o.agentResult(e)
	case approvalEvent(e):
		// Not an output item: nothing to send back as input. The answer
		// goes to POST /api/chats/{chat}/approvals/{id}.
		o.emit("response.agentbox."+e.Type, maps.Clone(e.Props))
	}
}

func (o *responseOutput) textPiece(msgID, piece string) {
	m, ok := o.open.(*messageItem)
	if !ok || o.openMsg != msgID {
		o.closeOpen()
		m = &messageItem{ID: o.itemID("msg"), Type: "message", Status: "in_progress", Role: chat.RoleAssistant, Content: []outputText{}}
		o.open, o.openIdx = m, o.add(m)
		part := outputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}
		m.Content = append(m.Content, part)
		o.emit("response.content_part.added", map[string]any{"item_id": m.ID, "output_index": o.openIdx, "content_index": 0, "part": part})
	}
	o.openMsg = msgID
	m.Content[0].Text += piece
	o.emit("response.output_text.delta", map[string]any{"item_id": m.ID, "output_index": o.openIdx, "content_index": 0, "delta": piece, "logprobs": []any{}})
}

func (o *responseOutput) thinkingPiece(msgID, piece string) {
	r, ok := o.open.(*reasoningItem)
	if !ok || o.openMsg != msgID {
		o.closeOpen()
		r = &reasoningItem{ID: o.itemID("rs"), Type: "reasoning", Status: "in_progress", Summary: []summaryText{}}
		o.open, o.openIdx = r, o.add(r)
		r.Summary = append(r.Summary, summaryText{Type: "summary_text"})
		o.emit("response.reasoning_summary_part.added", map[string]any{"item_id": r.ID, "output_index": o.openIdx, "summary_index": 0,
			"part": summaryText{Type: "summary_text"}})
		piece = strings.TrimPrefix(piece, chat.TextSeparator) // each reasoning item stands alone
	}
	o.openMsg = msgID
	r.Summary[0].Text += piece
	o.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": r.ID, "output_index": o.openIdx, "summary_index": 0, "delta": piece})
}

// closeOpen finishes the text or reasoning item being written.
func (o *responseOutput) closeOpen() {
	switch it := o.open.(type) {
	case *messageItem:
		it.Status = "completed"
		part := it.Content[0]
		o.emit("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": o.openIdx, "content_index": 0, "text": part.Text, "logprobs": []any{}})
		o.emit("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": o.openIdx, "content_index": 0, "part": part})
		o.emit("response.output_item.done", map[string]any{"output_index": o.openIdx, "item": it})
	case *reasoningItem:
		it.Status = "completed"
		s := it.Summary[0]
		o.emit("response.reasoning_summary_text.done", map[string]any{"item_id": it.ID, "output_index": o.openIdx, "summary_index": 0, "text": s.Text})
		o.emit("response.reasoning_summary_part.done", map[string]any{"item_id": it.ID, "output_index": o.openIdx, "summary_index": 0, "part": s})
		o.emit("response.output_item.done", map[string]any{"output_index": o.openIdx, "item": it})
	}
	o.open = nil
}

// functionCall adds a call of the client's function: the client runs it
// and answers with a function_call_output item.
func (o *responseOutput) functionCall(tc chat.ToolCall) {
	o.closeOpen()
	args := tc.Arguments()
	fc := &functionCallItem{ID: o.itemID("fc"), Type: "function_call", Status: "in_progress", CallID: tc.ID, Name: tc.Name}
	idx := o.add(fc)
	o.emit("response.function_call_arguments.delta", map[string]any{"item_id": fc.ID, "output_index": idx, "delta": args})
	fc.Arguments, fc.Status = args, "completed"
	o.emit("response.function_call_arguments.done", map[string]any{"item_id": fc.ID, "output_index": idx, "name": tc.Name, "arguments": args})
	o.emit("response.output_item.done", map[string]any{"output_index": idx, "item": fc})
}

// agentCall records a tool the sandboxed agent runs: an mcp_call item,
// in progress until its result arrives.
func (o *responseOutput) agentCall(e chat.Event) {
	id, _ := e.Props["id"].(string)
	switch e.Event {
	case chat.Start:
		o.closeOpen()
		name, _ := e.Props["name"].(string)
		it := &mcpCallItem{ID: o.itemID("mcp"), Type: "mcp_call", Status: "in_progress", ServerLabel: o.label, Name: name}
		idx := o.add(it)
		o.emit("response.mcp_call.in_progress", map[string]any{"item_id": it.ID, "output_index": idx})
		if id == "" {
			id = e.ID
		}
		o.tools[id] = idx
		o.tools["event:"+e.ID] = idx
		if in, ok := e.Props["input"]; ok {
			o.arguments(idx, in)
		}
	case chat.End, chat.Replace:
		idx, ok := o.tools["event:"+e.ID]
		if in, has := e.Props["input"]; ok && has {
			o.arguments(idx, in)
		}
	}
}

func (o *responseOutput) arguments(idx int, in any) {
	it := o.resp.Output[idx].(*mcpCallItem)
	var args string
	switch v := in.(type) {
	case chat.RawJSON:
		args = string(v)
	case string:
		args = v
	default:
		b, _ := json.Marshal(v)
		args = string(b)
	}
	if args == "" || args == it.Arguments {
		return
	}
	it.Arguments = args
	o.emit("response.mcp_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": idx, "delta": args})
	o.emit("response.mcp_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": idx, "arguments": args})
}

// agentResult completes the mcp_call item of a tool result.
func (o *responseOutput) agentResult(e chat.Event) {
	callID, _ := e.Props["tool_call_id"].(string)
	idx, ok := o.tools[callID]
	if !ok {
		return
	}
	delete(o.tools, callID)
	it := o.resp.Output[idx].(*mcpCallItem)
	content, _ := e.Props["content"].(string)
	if content == "" {
		content = e.Text
	}
	if isErr, _ := e.Props["is_error"].(bool); isErr {
		it.Status, it.Error = "failed", &mcpError{Type: "mcp_tool_execution_error", Content: content}
		o.emit("response.mcp_call.failed", map[string]any{"item_id": it.ID, "output_index": idx})
	} else {
		it.Status, it.Output = "completed", &content
		o.emit("response.mcp_call.completed", map[string]any{"item_id": it.ID, "output_index": idx})
	}
	o.emit("response.output_item.done", map[string]any{"output_index": idx, "item": it})
}

// finish completes the response: status, usage, error; tool calls that
// got no result stay incomplete.
func (o *responseOutput) finish(resp *pipeline.Response, err error) {
	o.closeOpen()
	for id, idx := range o.tools {
		if strings.HasPrefix(id, "event:") {
			continue
		}
		it := o.resp.Output[idx].(*mcpCallItem)
		it.Status = "incomplete"
		o.emit("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	}
	o.tools = map[string]int{}
	if resp != nil {
		o.resp.Usage = toResponseUsage(resp.Usage)
		if s, ok := resp.Data.(string); ok && s != o.text.Text() && o.text.Text() == "" {
			// A Next hook's answer, not streamed: a message of its own.
			o.textPiece("next", s)
			o.closeOpen()
		}
	}
	switch {
	case err != nil:
		e := asAPIError(err)
		o.resp.Status, o.resp.Error = "failed", &responseErr{Code: e.Err.Code, Message: e.Err.Message}
	case resp != nil && resp.FinishReason == chat.FinishLength:
		o.resp.Status, o.resp.IncompleteDetails = "incomplete", &incompleteDetail{Reason: "max_output_tokens"}
	case resp != nil && resp.FinishReason == chat.FinishContentFilter:
		o.resp.Status, o.resp.IncompleteDetails = "incomplete", &incompleteDetail{Reason: "content_filter"}
	default:
		o.resp.Status = "completed"
	}
}

// save stores the response when the request asked for it.
func (s *Server) saveResponse(ctx context.Context, user string, o *responseOutput) {
	if !o.resp.Store || o.resp.Status == "failed" {
		return
	}
	b, err := json.Marshal(o.resp)
	if err == nil {
		err = s.responses.SaveResponse(context.WithoutCancel(ctx), user, store.Response{
			ID: o.resp.ID, ChatID: o.chat, AssistantID: o.resp.Model, Body: b, Created: time.Unix(o.resp.CreatedAt, 0)})
	}
	if err != nil {
		s.log.Error("response not stored", "user", user, "response", o.resp.ID, "err", err)
	}
}

func (s *Server) wholeResponse(w http.ResponseWriter, r *http.Request, req *pipeline.Request, o *responseOutput) {
	stream := chat.NewSerial(o.event)
	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	stream.Close()
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, s.log, responseError(err))
		}
		return
	}
	o.finish(resp, nil)
	s.saveResponse(r.Context(), req.UserID, o)
	writeJSON(w, http.StatusOK, o.resp)
}

func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, req *pipeline.Request, o *responseOutput) {
	seq := 0
	frame := func(typ string, fields map[string]any) []byte {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		b, err := json.Marshal(fields)
		if err != nil {
			b, _ = json.Marshal(map[string]any{"type": "error", "code": chat.ErrInternal, "message": "internal error", "param": nil, "sequence_number": seq - 1})
		}
		return sse.Frame(sse.Event{Type: typ, Data: b})
	}
	snapshot := func() responseObject { return *o.resp } // Output is copied by value of its slice header
	st := newSSEStream(w, s.cfg.Heartbeat, func(raw func([]byte) error) error {
		if err := raw(frame("response.created", map[string]any{"response": snapshot()})); err != nil {
			return err
		}
		return raw(frame("response.in_progress", map[string]any{"response": snapshot()}))
	})
	defer st.Close()
	o.send = func(typ string, fields map[string]any) {
		// The created and in_progress events (sent with the headers) come
		// first and take the first sequence numbers.
		_ = st.Commit()
		_ = st.Write(frame(typ, fields))
	}
	stream := chat.NewSerial(o.event)
	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	st.StopHeartbeat()
	stream.Close()
	if err != nil && r.Context().Err() != nil {
		return // the client went away
	}
	if err != nil && !st.Committed() {
		writeError(w, s.log, responseError(err))
		return
	}
	if err != nil {
		e := asAPIError(responseError(err))
		if e.Status >= 500 && !refusal[e.Err.Code] {
			s.log.Error("turn failed", "code", e.Err.Code, "err", err)
		}
		var param any
		if p := errorJSON(e).Error.Param; p != nil {
			param = *p
		}
		o.send("error", map[string]any{"code": e.Err.Code, "message": e.Err.Message, "param": param})
	}
	o.finish(resp, err)
	s.saveResponse(r.Context(), req.UserID, o)
	typ := "response.completed"
	switch o.resp.Status {
	case "failed":
		typ = "response.failed"
	case "incomplete":
		typ = "response.incomplete"
	}
	o.send(typ, map[string]any{"response": o.resp})
}
