package assistant

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestAllowedHostsAndOrigins: app.jsonc's allowed_hosts and
// allowed_origins, normalised as the server compares them, and their
// problems with positions.
func TestAllowedHostsAndOrigins(t *testing.T) {
	t.Parallel()
	app, err := Load(appWith(t, `{
		"allowed_hosts": ["Agentbox.Example.com.", "*.tunnel.example"],
		"allowed_origins": ["https://App.Example.com", "http://localhost:5173/"],
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(app.Config.AllowedHosts, []string{"agentbox.example.com", "*.tunnel.example"}) ||
		!slices.Equal(app.Config.AllowedOrigins, []string{"https://app.example.com", "http://localhost:5173"}) {
		t.Errorf("hosts %q, origins %q", app.Config.AllowedHosts, app.Config.AllowedOrigins)
	}
	_, err = Load(appWith(t, `{
  "allowed_hosts": ["*", "example.com:8080", "ok.example"],
  "allowed_origins": ["example.com", "https://example.com/app", "null"],
}`))
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		`app.jsonc:2:21: allowed_hosts[0]: allowed host "*": want a host name`,
		`app.jsonc:2:26: allowed_hosts[1]: allowed host "example.com:8080": want a host name without scheme, port or path`,
		`app.jsonc:3:23: allowed_origins[0]: allowed origin "example.com": want http:// or https://`,
		`allowed_origins[1]: allowed origin "https://example.com/app": want scheme://host[:port] and nothing more`,
		`allowed_origins[2]: allowed origin "null"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}
