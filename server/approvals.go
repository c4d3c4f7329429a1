package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
)

// Tool approvals: a tool call the assistant's policy asks about waits for
// the chat's user (an approval_requested event in the turn's stream);
// these routes list the chat's waiting calls and answer one. The
// operator's token (auth.metrics_token) lists and answers any user's, or
// one user's named with ?user=.

// approvalRoutes registers the approval routes. They take a user's token
// or the operator's, so each authenticates itself (approver).
func (s *Server) approvalRoutes(mux *http.ServeMux) {
	for _, r := range []struct {
		method, path string
		h            func(http.ResponseWriter, *http.Request, string)
	}{
		{"GET", "/api/chats/{chat}/approvals", s.listApprovals},
		{"POST", "/api/chats/{chat}/approvals/{approval}", s.answerApproval},
	} {
		mux.Handle(r.method+" "+r.path, s.authed(r.h, true))
		mux.Handle(r.path, methodNotAllowed(r.method))
		s.routeList = append(s.routeList, Route{Method: r.method, Path: r.path})
	}
}

// approver is who asks: the user of the request's token; for the
// operator's token, the user it names with ?user= (the operator acts as
// that user: only their calls), else the operator (every user's calls).
func (s *Server) approver(r *http.Request) (user string, operator bool, err error) {
	if s.operator(r) {
		user = r.URL.Query().Get("user")
		if user == "" {
			return "", true, nil
		}
		if err := validateID("user", user); err != nil {
			return "", false, badRequest("%v", err)
		}
		return user, false, nil
	}
	id, err := s.auth.user(r)
	return id.user, false, err
}

// approvalChat returns the server's chats, the request's {chat} and who
// asks, or writes the error.
func (s *Server) approvalChat(w http.ResponseWriter, r *http.Request) (cs Chats, id, user string, operator, ok bool) {
	cs, id, ok = s.chatOf(w, r)
	if !ok {
		return
	}
	user, operator, err := s.approver(r)
	if err != nil {
		writeError(w, s.log, err)
		return nil, "", "", false, false
	}
	return cs, id, user, operator, true
}

// operator reports whether r carries the operator's token.
func (s *Server) operator(r *http.Request) bool {
	if s.metricsToken == nil {
		return false
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(sum[:], s.metricsToken) == 1
}

// listApprovals is GET /api/chats/{chat}/approvals: the chat's tool calls
// waiting for an answer, oldest first.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, _ string) {
	cs, id, user, op, ok := s.approvalChat(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, listResponse[approval.Pending]{Object: "list", Data: cs.Approvals(user, id, op)})
}

// answerApproval is POST /api/chats/{chat}/approvals/{approval} with
// {"decision": "allow"|"deny", "reason", "remember"}.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request, _ string) {
	cs, id, user, op, ok := s.approvalChat(w, r)
	if !ok {
		return
	}
	aid := r.PathValue("approval")
	var a approval.Answer
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeJSON(body, &a, true)
	}
	if err == nil {
		err = cs.Approve(r.Context(), user, id, aid, op, a)
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"approval_id": aid, "decision": a.Decision})
	case errors.Is(err, approval.ErrNotFound):
		writeError(w, s.log, notFound("approval %s: %v", aid, err))
	case errors.Is(err, approval.ErrAnswered):
		writeError(w, s.log, chat.Errorf(CodeConflict, "approval %s: %v", aid, err))
	case errors.Is(err, approval.ErrBadDecision):
		writeError(w, s.log, badRequest("%v", err))
	default:
		writeError(w, s.log, err)
	}
}
