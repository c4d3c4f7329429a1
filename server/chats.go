package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/pipeline"
)

// Chats lists and manages the users' chats, opens workspaces for uploads
// and terminals in chat sandboxes. *pipeline.Pipeline implements it.
// Every method acts for one user on that user's chats only; errors whose
// cause is sandbox.ErrNotFound are 404s, sandbox.ErrInUse 409s.
type Chats interface {
	ListChats(ctx context.Context, user string) ([]pipeline.ChatInfo, error)
	GetChat(ctx context.Context, user, chatID string) (*pipeline.ChatDetail, error)
	RenameChat(ctx context.Context, user, chatID, title string) (*pipeline.ChatInfo, error)
	DeleteChat(ctx context.Context, user, chatID string) error
	// CancelChat ends the chat's turns and its kept sandbox, and
	// returns once they and their sandboxes are gone.
	CancelChat(ctx context.Context, user, chatID string) (int, error)
	// Upload streams a file into the chat's workspace, creating the
	// workspace when missing (an upload may come before the first
	// message), within the user's limits.
	Upload(ctx context.Context, req pipeline.UploadRequest) (*pipeline.Uploaded, error)
	// OpenTerminal starts a shell in a new sandbox of the chat.
	OpenTerminal(ctx context.Context, req pipeline.TerminalRequest) (*pipeline.Terminal, error)
	// Checkpoints lists the chat's checkpoints; Rewind brings the chat
	// back to one, Fork starts a new chat from one.
	Checkpoints(ctx context.Context, user, chatID string) ([]pipeline.CheckpointInfo, error)
	Rewind(ctx context.Context, user, chatID string, to pipeline.Target) (*pipeline.Rewound, error)
	Fork(ctx context.Context, user, chatID string, to pipeline.Target) (string, error)
	// Branches lists the versions of each turn of the chat's current
	// branch; Switch makes another version of a turn the current one.
	Branches(ctx context.Context, user, chatID string) ([]checkpoint.TurnVersions, error)
	Switch(ctx context.Context, user, chatID string, turn, version int) (*pipeline.Rewound, error)
	// Approvals lists the chat's tool calls waiting for an answer (the
	// operator's: any user's); Approve answers one (errors
	// approval.ErrNotFound, ErrAnswered, ErrBadDecision).
	Approvals(user, chatID string, operator bool) []approval.Pending
	Approve(ctx context.Context, user, chatID, id string, operator bool, a approval.Answer) error
	// Say sends a message into the chat's running turn, Interrupt stops
	// its current step (errors pipeline.ErrNoTurn, executor.ErrCannotTalk,
	// executor.ErrTurnEnding when no running turn can take them).
	Say(ctx context.Context, user, chatID, text string) error
	Interrupt(ctx context.Context, user, chatID string) error
}

var _ Chats = (*pipeline.Pipeline)(nil)

// cancelWait bounds how long POST /api/chats/{chat}/cancel waits for the
// turns to end and their sandboxes to go.
const cancelWait = 30 * time.Second

// chats returns the Chats of the server, or the error a route needing
// them answers with when the server has none.
func (s *Server) chats() (Chats, error) {
	if s.cfg.Chats == nil {
		return nil, errorf(http.StatusNotImplemented, chat.ErrInvalidRequest, "this server keeps no chats")
	}
	return s.cfg.Chats, nil
}

// chatParam is the validated {chat} of the request's path.
func chatParam(r *http.Request) (string, error) {
	id := r.PathValue("chat")
	if err := validateID("chat", id); err != nil {
		return "", badRequest("%v", err)
	}
	return id, nil
}

// listChats is GET /api/chats: the user's chats, newest first.
func (s *Server) listChats(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list, err := cs.ListChats(r.Context(), user)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, listResponse[pipeline.ChatInfo]{Object: "list", Data: list})
}

// chatResponse is GET /api/chats/{chat}: the chat, its history, and its
// native turn (running, or ended a few minutes ago) whose events
// GET /api/chats/{chat}/events replays.
type chatResponse struct {
	*pipeline.ChatDetail
	Turn *TurnState `json:"turn,omitempty"`
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	d, err := cs.GetChat(r.Context(), user, id)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	out := chatResponse{ChatDetail: d}
	if rn := s.runs.find(user, id, ""); rn != nil {
		out.Turn = rn.state()
	}
	writeJSON(w, http.StatusOK, out)
}

// renameRequest is the body of PATCH /api/chats/{chat}.
type renameRequest struct {
	Title *string `json:"title"`
}

func (s *Server) patchChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var in renameRequest
	if err := decodeJSON(body, &in, true); err != nil {
		writeError(w, s.log, err)
		return
	}
	if in.Title == nil {
		writeError(w, s.log, badRequest("title is missing: send {\"title\": \"...\"} (an empty title derives it from the first message)"))
		return
	}
	info, err := cs.RenameChat(r.Context(), user, id, *in.Title)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// deleteChat is DELETE /api/chats/{chat}: the chat's running turns, kept
// sandbox and terminals end, then its workspace, hook memory and history
// go.
func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	if err := cs.DeleteChat(r.Context(), user, id); err != nil {
		writeError(w, s.log, err)
		return
	}
	s.runs.forget(user, id)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
}

// cancelChat is POST /api/chats/{chat}/cancel: it ends the chat's
// running turns and its kept sandbox, and answers once their sandboxes
// are removed.
func (s *Server) cancelChat(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), cancelWait)
	defer cancel()
	n, err := cs.CancelChat(ctx, user, id)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = &chat.Error{Code: chat.ErrTimeout, Message: "the turn was canceled but has not ended yet", Err: err}
		}
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "canceled": n})
}

// chatEvents is GET /api/chats/{chat}/events: the event stream of the
// chat's native turn, from after Last-Event-ID (the header, or the
// last_event_id query parameter), else from the start of its newest turn.
func (s *Server) chatEvents(w http.ResponseWriter, r *http.Request, user string) {
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("last_event_id"); q != "" {
		if last != "" && last != q {
			writeError(w, s.log, badRequest("Last-Event-ID %q and last_event_id %q differ: send one of them", last, q))
			return
		}
		last = q
	}
	runID, seq := "", 0
	if last != "" {
		if runID, seq, err = parseEventID(last); err != nil {
			writeError(w, s.log, err)
			return
		}
	}
	rn := s.runs.find(user, id, runID)
	if rn == nil {
		writeError(w, s.log, errNoTurn(id, runID))
		return
	}
	w.Header().Set("X-Turn-ID", rn.id)
	s.follow(w, r, rn, seq, false)
}

// chatRoutes registers the chat routes and the files API.
func (s *Server) chatRoutes(mux *http.ServeMux, handle func(method, path string, h func(http.ResponseWriter, *http.Request, string), public bool)) {
	handle("GET", "/api/chats", s.listChats, false)
	s.handleMethods(mux, "/api/chats/{chat}",
		methodHandler{"GET", s.getChat}, methodHandler{"PATCH", s.patchChat}, methodHandler{"DELETE", s.deleteChat})
	s.handleMethods(mux, "/api/chats/{chat}/files", methodHandler{"GET", s.files}, methodHandler{"PUT", s.upload})
	handle("POST", "/api/chats/{chat}/cancel", s.cancelChat, false)
	handle("POST", "/api/chats/{chat}/messages", s.sayToChat, false)
	handle("POST", "/api/chats/{chat}/interrupt", s.interruptChat, false)
	handle("GET", "/api/chats/{chat}/checkpoints", s.listCheckpoints, false)
	handle("POST", "/api/chats/{chat}/rewind", s.rewindChat, false)
	handle("POST", "/api/chats/{chat}/fork", s.forkChat, false)
	handle("GET", "/api/chats/{chat}/branches", s.listBranches, false)
	handle("POST", "/api/chats/{chat}/switch", s.switchBranch, false)
	handle("GET", "/api/chats/{chat}/events", s.chatEvents, false)
	handle("GET", "/api/chats/{chat}/terminal", s.terminal, false)
	s.approvalRoutes(mux)
	handle("GET", "/api/chats/{chat}/ports", s.chatPorts, false)
}

// methodHandler is one method of a path with several.
type methodHandler struct {
	method string
	h      func(http.ResponseWriter, *http.Request, string)
}

// handleMethods registers several methods on one path, each with a token,
// and one 405 for the others that names them all; /openapi.json lists
// them.
func (s *Server) handleMethods(mux *http.ServeMux, path string, hs ...methodHandler) {
	allow := make([]string, 0, len(hs))
	for _, m := range hs {
		mux.Handle(m.method+" "+path, s.authed(m.h, false))
		s.routeList = append(s.routeList, Route{Method: m.method, Path: path})
		allow = append(allow, m.method)
	}
	mux.Handle(path, methodNotAllowed(strings.Join(allow, ", ")))
}

// listCheckpoints is GET /api/chats/{chat}/checkpoints: the chat's
// checkpoints, oldest first.
func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request, user string) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	list, err := cs.Checkpoints(r.Context(), user, id)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, listResponse[pipeline.CheckpointInfo]{Object: "list", Data: list})
}

// rewindChat is POST /api/chats/{chat}/rewind with {"turn": N} or
// {"checkpoint": ID}: the chat's files, memory and history as they were
// after that turn.
func (s *Server) rewindChat(w http.ResponseWriter, r *http.Request, user string) {
	s.branchChat(w, r, func(ctx context.Context, cs Chats, id string, to pipeline.Target) (any, error) {
		out, err := cs.Rewind(ctx, user, id, to)
		if err == nil {
			s.runs.forget(user, id)
		}
		return out, err
	})
}

// forkChat is POST /api/chats/{chat}/fork with {"turn": N} or
// {"checkpoint": ID}: a new chat from that state, {"chat_id": NEW}.
func (s *Server) forkChat(w http.ResponseWriter, r *http.Request, user string) {
	s.branchChat(w, r, func(ctx context.Context, cs Chats, id string, to pipeline.Target) (any, error) {
		newID, err := cs.Fork(ctx, user, id, to)
		return map[string]any{"chat_id": newID, "parent": id}, err
	})
}

// listBranches is GET /api/chats/{chat}/branches: the versions of each
// turn of the chat's current branch.
func (s *Server) listBranches(w http.ResponseWriter, r *http.Request, user string) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	list, err := cs.Branches(r.Context(), user, id)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, listResponse[checkpoint.TurnVersions]{Object: "list", Data: list})
}

// switchBranch is POST /api/chats/{chat}/switch with {"turn": N,
// "version": K}: the chat goes to the newest state of version K of turn
// N, as a rewind does.
func (s *Server) switchBranch(w http.ResponseWriter, r *http.Request, user string) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	var in struct {
		Turn    int `json:"turn"`
		Version int `json:"version"`
	}
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeJSON(body, &in, true)
	}
	var out *pipeline.Rewound
	if err == nil {
		out, err = cs.Switch(r.Context(), user, id, in.Turn, in.Version)
	}
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	s.runs.forget(user, id)
	writeJSON(w, http.StatusOK, out)
}

// branchChat reads a rewind's or fork's chat and target, runs do and
// writes its answer or error.
func (s *Server) branchChat(w http.ResponseWriter, r *http.Request, do func(context.Context, Chats, string, pipeline.Target) (any, error)) {
	cs, id, ok := s.chatOf(w, r)
	if !ok {
		return
	}
	to, ok := s.target(w, r)
	if !ok {
		return
	}
	out, err := do(r.Context(), cs, id, to)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// chatOf returns the server's chats and the request's {chat}, or writes
// the error.
func (s *Server) chatOf(w http.ResponseWriter, r *http.Request) (Chats, string, bool) {
	cs, err := s.chats()
	if err == nil {
		var id string
		if id, err = chatParam(r); err == nil {
			return cs, id, true
		}
	}
	writeError(w, s.log, err)
	return nil, "", false
}

// target reads the body of a rewind or fork.
func (s *Server) target(w http.ResponseWriter, r *http.Request) (pipeline.Target, bool) {
	var to pipeline.Target
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeJSON(body, &to, true)
	}
	if err != nil {
		writeError(w, s.log, err)
		return to, false
	}
	return to, true
}
