package server

import (
	"maps"
	"net/http"
	"slices"
	"sort"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/desktop"
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
	// Desktop is set when the assistant's sandbox has a live desktop
	// (sandbox.desktop, computer.vnc), served as one of its chat's ports.
	Desktop bool `json:"desktop,omitempty"`
	// Previews are the other ports the sandbox may serve to the chat's
	// user (sandbox.ports, computer.ports, services): each that listens
	// has a preview URL in GET /api/chats/{chat}/ports.
	Previews []PreviewPort `json:"previews,omitempty"`
	// Skills are the assistant's own Agent Skills (its folder's skills/),
	// by name.
	Skills []SkillInfo `json:"skills"`
	// Connectors are the ids a request may choose from (package.yao
	// connector_options), when it may choose.
	Connectors []string `json:"connectors,omitempty"`
	// Available is false for an assistant that does not run: its
	// definition has errors (Error says which), and a request to it is a
	// 503 assistant_unavailable.
	Available bool `json:"available"`
	// Error is set when the assistant's definition has errors: it does
	// not run, or (Error.ServingLastGood) its last good version answers
	// until they are fixed.
	Error *DefinitionError `json:"error,omitempty"`
	// Metadata is package.yao's metadata for the UI and permissions
	// (type, avatar, tags, sort, public, placeholder, modes, ...).
	assistant.Metadata
}

// PreviewPort is a port an assistant's sandbox may serve, with its label.
type PreviewPort struct {
	Port  int    `json:"port"`
	Label string `json:"label,omitempty"`
}

// DefinitionError is what is wrong with an assistant's definition.
type DefinitionError struct {
	// Message names the first error with its position.
	Message string `json:"message"`
	// Problems are every error, positioned in the app folder's files.
	Problems []ProblemInfo `json:"problems"`
	// ServingLastGood: the version loaded before these errors still
	// answers.
	ServingLastGood bool `json:"serving_last_good,omitempty"`
}

// ProblemInfo is one error of a definition: file relative to the app
// folder, 1-based line and column (0 for the file as a whole).
type ProblemInfo struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

func definitionError(f *assistant.Failed) *DefinitionError {
	e := &DefinitionError{Message: f.Error(), ServingLastGood: f.Serving(), Problems: make([]ProblemInfo, 0, len(f.Problems))}
	for _, p := range f.Problems {
		e.Problems = append(e.Problems, ProblemInfo{File: p.File, Line: p.Line, Col: p.Col, Message: p.Msg})
	}
	return e
}

// failedInfo describes an assistant that does not run.
func failedInfo(f *assistant.Failed, locale string) AssistantInfo {
	info := AssistantInfo{ID: f.ID, Skills: []SkillInfo{}, Error: definitionError(f), Metadata: assistant.Metadata{Type: "assistant"}}
	info.Name, info.Description = f.Localized(locale)
	return info
}

// SkillInfo is one of an assistant's own skills: what its SKILL.md's
// front matter says it is for.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func publicInfo(app *assistant.App, a *assistant.Assistant, locale string) AssistantInfo {
	info := AssistantInfo{ID: a.ID, Skills: []SkillInfo{}, Metadata: a.Meta, Available: true}
	if f := app.FailedAssistant(a.ID); f != nil {
		info.Error = definitionError(f)
	}
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
		info.Desktop = a.Sandbox.Desktop != nil
		for _, p := range a.Sandbox.Ports {
			if info.Desktop && p.Port == desktop.NoVNCPort {
				continue
			}
			info.Previews = append(info.Previews, PreviewPort{Port: p.Port, Label: p.Label})
		}
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

// lookup resolves an assistant id: a 404 naming it when the app has no
// such assistant, a 503 assistant_unavailable with its first error when
// its definition has errors.
func (s *Server) lookup(id string) (*assistant.Assistant, error) {
	app, err := s.app()
	if err != nil {
		return nil, err
	}
	a, ok := app.Assistants[id]
	if !ok || a == nil {
		if f := app.FailedAssistant(id); f != nil {
			return nil, &chat.Error{Code: chat.ErrUnavailable, Message: f.Error(), Err: f}
		}
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
	loc := locale(r, r.URL.Query().Get("locale"))
	list := sortedAssistants(app)
	data := make([]AssistantInfo, 0, len(list)+len(app.Failed))
	for _, a := range list {
		data = append(data, publicInfo(app, a, loc))
	}
	// The assistants that do not run are listed too, with why.
	for _, id := range slices.Sorted(maps.Keys(app.Failed)) {
		if f := app.Failed[id]; !f.Serving() {
			data = append(data, failedInfo(f, loc))
		}
	}
	sort.SliceStable(data, func(i, j int) bool { return data[i].ID < data[j].ID })
	writeJSON(w, http.StatusOK, listResponse[AssistantInfo]{Object: "list", Data: data})
}

// assistant is GET /api/assistants/{id}: one assistant, also one that
// does not run (with its error), or a 404.
func (s *Server) assistant(w http.ResponseWriter, r *http.Request, _ string) {
	app, err := s.app()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	loc := locale(r, r.URL.Query().Get("locale"))
	id := r.PathValue("id")
	if a := app.Assistants[id]; a != nil {
		writeJSON(w, http.StatusOK, publicInfo(app, a, loc))
		return
	}
	if f := app.FailedAssistant(id); f != nil {
		writeJSON(w, http.StatusOK, failedInfo(f, loc))
		return
	}
	writeError(w, s.log, notFound("unknown assistant %q: GET /api/assistants lists them", id))
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
