package openaiclient

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/server"
)

// TestOpenAPIValidates checks /openapi.json with an OpenAPI 3.1 validator
// from npm (server's own test checks it describes every route).
func TestOpenAPIValidates(t *testing.T) {
	spec, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version       string `json:"version"`
		Valid         bool   `json:"valid"`
		Specification string `json:"specification"`
		Errors        string `json:"errors"`
		Warnings      []any  `json:"warnings"`
	}
	runNode(t, "openapi.mjs", map[string]string{"OPENAPI_FILE": file}, &got)
	t.Logf("@readme/openapi-parser %s", got.Version)
	if !got.Valid || got.Specification != "OpenAPI" || len(got.Warnings) > 0 {
		t.Errorf("valid %v (%s), warnings %v:\n%s", got.Valid, got.Specification, got.Warnings, got.Errors)
	}
}
