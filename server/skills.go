package server

import (
	"bytes"
	"context"
	"net/http"
	"strconv"

	"github.com/agentbox/agentbox/pipeline"
)

// SkillGate is the approval gate of the skills agents propose:
// *pipeline.Pipeline implements it. Every method acts for the
// authenticated user only; its errors are *chat.Error (a cause wrapping
// store.ErrNotFound is a 404, chat.ErrSkillConflict a 409).
type SkillGate interface {
	SkillProposals(ctx context.Context, user string, f pipeline.ProposalFilter) ([]*pipeline.SkillProposal, error)
	SkillProposal(ctx context.Context, user, id string) (*pipeline.SkillProposal, error)
	ApproveSkill(ctx context.Context, user, id string) (*pipeline.SkillProposal, error)
	RejectSkill(ctx context.Context, user, id, reason string) (*pipeline.SkillProposal, error)
	TestSkill(ctx context.Context, user, id, prompt string) (*pipeline.SkillProposal, error)
	UserSkills(ctx context.Context, user, assistantID string) ([]pipeline.UserSkill, error)
	RemoveSkill(ctx context.Context, user, assistantID, name string) error
}

var _ SkillGate = (*pipeline.Pipeline)(nil)

// skillRoutes registers the approval gate's routes.
func (s *Server) skillRoutes(handle func(method, path string, h func(http.ResponseWriter, *http.Request, string), public bool)) {
	handle("DELETE", "/api/assistants/{id}/skills/{name}", s.removeSkill, false)
	handle("GET", "/api/skills", s.userSkills, false)
	handle("GET", "/api/skills/proposals", s.skillProposals, false)
	handle("GET", "/api/skills/proposals/{id}", s.skillProposal, false)
	handle("POST", "/api/skills/proposals/{id}/approve", s.approveSkill, false)
	handle("POST", "/api/skills/proposals/{id}/reject", s.rejectSkill, false)
	handle("POST", "/api/skills/proposals/{id}/test", s.testSkill, false)
}

// proposalView is a skill proposal as the API shows it; the details carry
// the SKILL.md its approval installs.
type proposalView struct {
	Object string `json:"object"`
	*pipeline.SkillProposal
	SkillFile string `json:"skill_md,omitempty"`
}

func viewProposal(sp *pipeline.SkillProposal, full bool) proposalView {
	v := proposalView{Object: "skill_proposal", SkillProposal: sp}
	if full {
		v.SkillFile = string(sp.SkillFile())
	}
	return v
}

// gate returns the configured SkillGate, or the 404 of a server without
// one.
func (s *Server) gate() (SkillGate, error) {
	if s.cfg.Skills == nil {
		return nil, notFound("this server keeps no skill proposals")
	}
	return s.cfg.Skills, nil
}

// skillProposals is GET /api/skills/proposals?assistant=A&status=S&limit=N:
// the user's proposals, newest first, without instructions and files.
func (s *Server) skillProposals(w http.ResponseWriter, r *http.Request, user string) {
	g, err := s.gate()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	q := r.URL.Query()
	f := pipeline.ProposalFilter{AssistantID: q.Get("assistant"), Status: q.Get("status")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, s.log, fieldErr("limit", "want a number from 1 to 1000, got %q", l))
			return
		}
		f.Limit = n
	}
	list, err := g.SkillProposals(r.Context(), user, f)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	data := make([]proposalView, 0, len(list))
	for _, sp := range list {
		data = append(data, viewProposal(sp, false))
	}
	writeJSON(w, http.StatusOK, listResponse[proposalView]{Object: "list", Data: data})
}

// proposalID reads and checks the {id} path value.
func proposalID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := validateID("proposal", id); err != nil {
		return "", notFound("no skill proposal %q", id)
	}
	return id, nil
}

// skillProposal is GET /api/skills/proposals/{id}: the proposal in full,
// with its test outcome.
func (s *Server) skillProposal(w http.ResponseWriter, r *http.Request, user string) {
	s.proposalAction(w, r, user, http.StatusOK, func(ctx context.Context, g SkillGate, id string, _ []byte) (*pipeline.SkillProposal, error) {
		return g.SkillProposal(ctx, user, id)
	})
}

// approveSkill is POST /api/skills/proposals/{id}/approve.
func (s *Server) approveSkill(w http.ResponseWriter, r *http.Request, user string) {
	s.proposalAction(w, r, user, http.StatusOK, func(ctx context.Context, g SkillGate, id string, body []byte) (*pipeline.SkillProposal, error) {
		if err := decodeOptional(body, &struct{}{}); err != nil {
			return nil, err
		}
		return g.ApproveSkill(ctx, user, id)
	})
}

// rejectSkill is POST /api/skills/proposals/{id}/reject {"reason": ...}.
func (s *Server) rejectSkill(w http.ResponseWriter, r *http.Request, user string) {
	s.proposalAction(w, r, user, http.StatusOK, func(ctx context.Context, g SkillGate, id string, body []byte) (*pipeline.SkillProposal, error) {
		var req struct {
			Reason string `json:"reason"`
		}
		if err := decodeOptional(body, &req); err != nil {
			return nil, err
		}
		return g.RejectSkill(ctx, user, id, req.Reason)
	})
}

// testSkill is POST /api/skills/proposals/{id}/test {"prompt": ...}: a
// test turn starts in the background (202); GET the proposal for its
// outcome.
func (s *Server) testSkill(w http.ResponseWriter, r *http.Request, user string) {
	s.proposalAction(w, r, user, http.StatusAccepted, func(ctx context.Context, g SkillGate, id string, body []byte) (*pipeline.SkillProposal, error) {
		var req struct {
			Prompt string `json:"prompt"`
		}
		if err := decodeOptional(body, &req); err != nil {
			return nil, err
		}
		return g.TestSkill(ctx, user, id, req.Prompt)
	})
}

// proposalAction runs one request about the proposal {id} and answers
// with the proposal in full.
func (s *Server) proposalAction(w http.ResponseWriter, r *http.Request, user string, status int,
	do func(ctx context.Context, g SkillGate, id string, body []byte) (*pipeline.SkillProposal, error)) {
	g, err := s.gate()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	id, err := proposalID(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		if body, err = s.readBody(w, r); err != nil {
			writeError(w, s.log, err)
			return
		}
	}
	sp, err := do(r.Context(), g, id, body)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, status, viewProposal(sp, true))
}

// decodeOptional decodes a strict JSON object body into v; an empty body
// leaves v as it is.
func decodeOptional(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeJSON(body, v, true)
}

// userSkills is GET /api/skills?assistant=A: the user's approved skills.
func (s *Server) userSkills(w http.ResponseWriter, r *http.Request, user string) {
	g, err := s.gate()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list, err := g.UserSkills(r.Context(), user, r.URL.Query().Get("assistant"))
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, listResponse[pipeline.UserSkill]{Object: "list", Data: list})
}

// removeSkill is DELETE /api/assistants/{id}/skills/{name}: the user's
// approved skill is not installed any more (its proposal is kept,
// retired). The assistant's own skills are not the user's to remove.
func (s *Server) removeSkill(w http.ResponseWriter, r *http.Request, user string) {
	g, err := s.gate()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	a, name := r.PathValue("id"), r.PathValue("name")
	if validateID("assistant", a) != nil || validateID("skill", name) != nil {
		writeError(w, s.log, notFound("no skill %q of assistant %q", name, a))
		return
	}
	if err := g.RemoveSkill(r.Context(), user, a, name); err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "skill", "assistant_id": a, "name": name, "deleted": true})
}
