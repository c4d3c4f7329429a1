package server

import (
	"bytes"
	"context"
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
	// Detach keeps the turn running when the client goes away; its
	// events can then be followed again (GET /api/chats/{chat}/events).
	Detach bool `json:"detach"`
	// Connector chooses another connector, when the assistant's
	// connector_options allow it.
	Connector string `json:"connector"`
	// Edit names the turn (from 1) whose user message Message replaces:
	// the chat goes back to the state before that turn, the turns from it
	// on stay on another branch (GET /api/chats/{chat}/branches).
	Edit int `json:"edit"`
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
	body, err := s.readBody(w, r)
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
		UserID: user, TeamID: teamOf(r), ChatID: cid, AssistantID: id, Messages: msgs,
		Locale: locale(r, in.Locale), Metadata: in.Metadata, Client: clientOf(r, in.Metadata), Options: opts, Connector: in.Connector, Edit: in.Edit,
	}
	s.streamNative(w, r, req, in.Detach)
}

// streamNative runs the turn as a run of the server's registry and
// streams its events, each with an id. The response ends with the turn's
// done event; the turn's teardown (its sandbox removed, its chat
// released) runs on after it, the server's shutdown waiting for it. A
// detached turn runs on when the client goes away (its events stay in the
// run's log for a resume); any other ends with its connection until it
// has answered, and the handler then waits for its cleanup.
func (s *Server) streamNative(w http.ResponseWriter, r *http.Request, req *pipeline.Request, detach bool) {
	rn := s.runs.start(req, detach)
	// The turn's own context: a cancel, the server's shutdown or the
	// turn's end stop it, and, unless it is detached, its client going
	// away before the done event.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	if !detach {
		stop := context.AfterFunc(r.Context(), func() {
			if !rn.hasAnswered() {
				cancel()
			}
		})
		defer stop()
	}
	rn.cancel = cancel
	w.Header().Set("X-Turn-ID", rn.id)
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		defer cancel()
		stream := chat.NewSerial(rn.emit)
		resp, err := s.cfg.Backend.Chat(ctx, req, stream.Emit)
		// After Close no event of the turn reaches the log: what finish
		// adds comes last.
		stream.Close()
		if err != nil && ctx.Err() == nil {
			if e := asAPIError(err); e.Status >= 500 && !refusal[e.Err.Code] {
				s.log.Error("turn failed", "code", e.Err.Code, "err", err)
			}
		}
		rn.finish(resp, err)
	}()
	if answered := s.follow(w, r, rn, 0, true); !answered && !detach {
		<-rn.over
	}
}
