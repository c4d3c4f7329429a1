package server

import (
	"net/http"
	"sort"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// AssistantInfo is the public description of an assistant: what a client
// may show. It never carries connector settings or keys. Name,
// description and placeholder are translated for the request's locale
// (?locale= or Accept-Language) from the assistant's locales/.
type AssistantInfo struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Sandboxed assistants run a coding-agent CLI in a sandbox.
	Sandboxed bool `json:"sandboxed"`
	// Command is the CLI of a sandboxed assistant (claude, cursor).
	Command string `json:"command,omitempty"`
	// Skills are the assistant's own Agent Skills (its folder's skills/),
	// by name.
	Skills []SkillInfo `json:"skills"`
	// Connectors are the ids a request may choose from (package.yao
	// connector_options), when it may choose.
	Connectors []string `json:"connectors,omitempty"`
	// Metadata is package.yao's metadata for the UI and permissions
	// (type, avatar, tags, sort, public, placeholder, modes, ...).
	assistant.Metadata
}

// SkillInfo is one of an assistant's own skills: what its SKILL.md's
// front matter says it is for.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func publicInfo(a *assistant.Assistant, locale string) AssistantInfo {
	info := AssistantInfo{ID: a.ID, Skills: []SkillInfo{}, Metadata: a.Meta}
	info.Name, info.Description, info.Placeholder = a.Localized(locale)
	if info.Name == "" {
		info.Name = a.ID
	}
	if c := a.ConnectorOptions; c != nil && (c.Optional == nil || *c.Optional) {
		info.Connectors = c.Connectors
	}
	if a.Sandbox != nil {
		info.Sandboxed = true
		info.Command = a.Sandbox.Command
	}
	for _, sk := range a.Skills {
		if sk != nil {
			info.Skills = append(info.Skills, SkillInfo{Name: sk.Name, Description: sk.Description})
		}
	}
	sort.Slice(info.Skills, func(i, j int) bool { return info.Skills[i].Name < info.Skills[j].Name })
	return info
}

// app returns the backend's current app, or an error when none is loaded.
func (s *Server) app() (*assistant.App, error) {
	app := s.cfg.Backend.App()
	if app == nil {
		return nil, errorf(http.StatusServiceUnavailable, chat.ErrInternal, "no app is loaded")
	}
	return app, nil
}

// lookup resolves an assistant id, or a 404 naming it.
func (s *Server) lookup(id string) (*assistant.Assistant, error) {
	app, err := s.app()
	if err != nil {
		return nil, err
	}
	a, ok := app.Assistants[id]
	if !ok || a == nil {
		return nil, notFound("unknown assistant %q: GET /api/assistants lists them", id)
	}
	return a, nil
}

func sortedAssistants(app *assistant.App) []*assistant.Assistant {
	out := make([]*assistant.Assistant, 0, len(app.Assistants))
	for _, a := range app.Assistants {
		if a != nil {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) assistants(w http.ResponseWriter, r *http.Request, _ string) {
	app, err := s.app()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list := sortedAssistants(app)
	data := make([]AssistantInfo, 0, len(list))
	for _, a := range list {
		data = append(data, publicInfo(a, locale(r, r.URL.Query().Get("locale"))))
	}
	writeJSON(w, http.StatusOK, listResponse[AssistantInfo]{Object: "list", Data: data})
}

func (s *Server) assistant(w http.ResponseWriter, r *http.Request, _ string) {
	a, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, publicInfo(a, locale(r, r.URL.Query().Get("locale"))))
}

// listResponse is the {"object": "list", "data": [...]} envelope of listings.
type listResponse[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
}

// model is an entry of GET /v1/models.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) toModel(a *assistant.Assistant) model {
	return model{ID: a.ID, Object: "model", Created: s.started.Unix(), OwnedBy: "agentbox"}
}

// modelByID is GET /v1/models/{id}: one assistant as an OpenAI model, or
// a 404.
func (s *Server) modelByID(w http.ResponseWriter, r *http.Request, _ string) {
	a, err := s.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toModel(a))
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, _ string) {
	app, err := s.app()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list := sortedAssistants(app)
	data := make([]model, 0, len(list))
	for _, a := range list {
		data = append(data, s.toModel(a))
	}
	writeJSON(w, http.StatusOK, listResponse[model]{Object: "list", Data: data})
}
