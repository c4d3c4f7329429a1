package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// nativeRequest is the body of POST /api/assistants/{id}/chat.
type nativeRequest struct {
	// ChatID names the conversation (or the X-Chat-ID header does).
	ChatID string `json:"chat_id"`
	// Messages is the conversation, or Message the one new message (a
	// string is a user message).
	Messages []wireMessage   `json:"messages"`
	Message  json.RawMessage `json:"message"`
	Locale   string          `json:"locale"`
	Metadata map[string]any  `json:"metadata"`
	// Options are model options (chat.ModelOptions), decoded strictly.
	Options json.RawMessage `json:"options"`
}

func (r *nativeRequest) messages() ([]chat.Message, error) {
	raw := bytes.TrimSpace(r.Message)
	hasOne := len(raw) > 0 && string(raw) != "null"
	switch {
	case hasOne && len(r.Messages) > 0:
		return nil, badRequest("send either messages or message, not both")
	case !hasOne:
		if r.Messages == nil {
			return nil, badRequest("messages is missing: send messages (an array) or message (a string or one message)")
		}
		return toMessages("messages", r.Messages)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("message: %v", err)
		}
		if s == "" {
			return nil, badRequest("message is empty")
		}
		return []chat.Message{{Role: chat.RoleUser, Content: s}}, nil
	case raw[0] == '{':
		var m wireMessage
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, badRequest("message: %v", err)
		}
		msg, err := toMessage("message", m)
		if err != nil {
			return nil, err
		}
		return []chat.Message{msg}, nil
	}
	return nil, badRequest("message must be a string or a message object {\"role\", \"content\"}")
}

// nativeParam names a refused model option as the native request does:
// under "options".
func nativeParam(path string) string {
	if _, ok := modelOptionNames[path]; ok {
		return "options." + path
	}
	return ""
}

// modelOptionNames are the JSON names of chat.ModelOptions.
var modelOptionNames = func() map[string]bool {
	out := map[string]bool{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[chat.ModelOptions]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}()

// nativeChat streams every chat event of a turn as server-sent events:
// "event: <phase>" and "data: <event JSON>", ending with the done event.
func (s *Server) nativeChat(w http.ResponseWriter, r *http.Request, user string) {
	id := r.PathValue("id")
	if _, err := s.lookup(id); err != nil {
		writeError(w, s.log, err)
		return
	}
	body, err := readBody(w, r, s.cfg.BodyLimit)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var in nativeRequest
	if err := decodeJSON(body, &in, true); err != nil {
		writeError(w, s.log, err)
		return
	}
	msgs, err := in.messages()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	opts, err := chat.DecodeModelOptions("options", in.Options)
	if err != nil {
		writeError(w, s.log, optionsError(err))
		return
	}
	cid, _, err := chatID(r, in.ChatID)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	w.Header().Set("X-Chat-ID", cid)
	req := &pipeline.Request{
		UserID: user, ChatID: cid, AssistantID: id, Messages: msgs,
		Locale: locale(r, in.Locale), Metadata: in.Metadata, Options: opts,
	}
	s.streamNative(w, r, req)
}

// streamNative runs the turn and writes its events. Error and done events
// that arrive before anything was sent are held back: if the turn then
// fails, the client gets a plain HTTP error with the right status instead
// of a 200 stream.
func (s *Server) streamNative(w http.ResponseWriter, r *http.Request, req *pipeline.Request) {
	st := newSSEStream(w, s.cfg.Heartbeat, nil)
	defer st.Close()

	var (
		pending  [][]byte
		sawError bool
		doneSent bool
	)
	send := func(frame []byte) {
		for _, p := range pending {
			_ = st.Write(p)
		}
		pending = nil
		_ = st.Write(frame)
	}
	stream := chat.NewSerial(func(e chat.Event) {
		if e.Type == chat.TypeError && e.Event == chat.Start {
			sawError = true
		}
		if e.Event == chat.Done {
			doneSent = true
		}
		frame, err := chat.SSEFrame(e)
		if err != nil {
			s.log.Error("event not sent", "err", err)
			return
		}
		if !st.Committed() && (e.Type == chat.TypeError || e.Event == chat.Done) {
			pending = append(pending, frame)
			return
		}
		send(frame)
	})

	resp, err := s.cfg.Backend.Chat(r.Context(), req, stream.Emit)
	st.StopHeartbeat()
	// After Close no event is written by emit: what follows has the stream
	// to itself.
	stream.Close()
	if err != nil && r.Context().Err() != nil {
		return // the client went away; nobody to tell
	}
	if err != nil && !st.Committed() {
		writeError(w, s.log, renameParam(err, nativeParam))
		return
	}
	for _, p := range pending {
		_ = st.Write(p)
	}
	pending = nil
	if err != nil && !sawError {
		e := asAPIError(err)
		if e.Status >= 500 {
			s.log.Error("turn failed", "code", e.Err.Code, "err", err)
		}
		chat.ErrorEvent(func(ev chat.Event) {
			if f, ferr := chat.SSEFrame(ev); ferr == nil {
				_ = st.Write(f)
			}
		}, "error-server", e.Err.Code, e.Err.Message)
	}
	if !doneSent {
		final := &chat.Final{}
		if resp != nil {
			final = &chat.Final{Usage: resp.Usage, SessionID: resp.SessionID, Content: resp.Content, Data: resp.Data}
		}
		if err != nil {
			final.Error = asAPIError(err).Err.Code
		}
		if f, ferr := chat.SSEFrame(chat.Event{Event: chat.Done, Final: final}); ferr == nil {
			_ = st.Write(f)
		}
	}
	if !st.Committed() {
		_ = st.Commit()
	}
}
