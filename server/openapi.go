package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"gopkg.in/yaml.v3"
)

// openAPISource is the API's OpenAPI 3.1 description, written as YAML so
// that it reads well next to the handlers.
//
//go:embed openapi.yaml
var openAPISource []byte

// OpenAPI returns the API's OpenAPI 3.1 description as JSON (what GET
// /openapi.json serves).
var OpenAPI = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPISource, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return b, nil
})

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, _ string) {
	b, err := OpenAPI()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeRawJSON(w, http.StatusOK, b)
}

// Route is one route the server registers.
type Route struct {
	Method, Path string
	// Public routes take no token.
	Public bool
}

// Routes lists the routes the server registers, in order: what
// /openapi.json must describe.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routeList...) }
