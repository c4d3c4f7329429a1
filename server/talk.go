package server

import (
	"errors"
	"net/http"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/pipeline"
)

// Talking to a running turn: POST /api/chats/{chat}/messages sends a
// message into it (the agent reads it before its next step), POST
// /api/chats/{chat}/interrupt stops its current step; the chat and its
// kept CLI go on (POST /api/chats/{chat}/cancel ends the turn and stops
// the CLI). Only the chat's user reaches them: another user's chat is not
// found.

// sayRequest is the body of POST /api/chats/{chat}/messages.
type sayRequest struct {
	Content string `json:"content"`
}

// sayToChat is POST /api/chats/{chat}/messages with {"content": "..."}:
// 202 once the running turn's CLI has it queued.
func (s *Server) sayToChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var in sayRequest
	if err := decodeJSON(body, &in, true); err != nil {
		writeError(w, s.log, err)
		return
	}
	if err := cs.Say(r.Context(), user, id, in.Content); err != nil {
		writeError(w, s.log, talkError(id, err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "sent": true})
}

// interruptChat is POST /api/chats/{chat}/interrupt: the running turn's
// current step stops, and the turn ends with what was answered.
func (s *Server) interruptChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	if err := cs.Interrupt(r.Context(), user, id); err != nil {
		writeError(w, s.log, talkError(id, err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "interrupted": true})
}

// talkError is the HTTP error of a message or interrupt no running turn
// took: 409 with the reason.
func talkError(chatID string, err error) error {
	if errors.Is(err, pipeline.ErrNoTurn) || errors.Is(err, executor.ErrCannotTalk) || errors.Is(err, executor.ErrTurnEnding) {
		return chat.Errorf(CodeConflict, "chat %s: %v", chatID, err)
	}
	return err
}
