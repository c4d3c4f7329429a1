package assistant

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/sandbox"
)

// EnvPrefix marks a value read from the environment at request time:
// "$ENV.OPENAI_API_KEY".
const EnvPrefix = "$ENV."

// ErrEnvNotSet is wrapped by resolution errors for a missing or empty
// environment variable.
var ErrEnvNotSet = errors.New("environment variable is not set")

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envRef reports whether s is an environment reference, with its name.
func envRef(s string) (name string, ok bool) {
	if !strings.HasPrefix(s, EnvPrefix) {
		return "", false
	}
	return s[len(EnvPrefix):], true
}

// checkEnvRef returns a message when s looks like an environment reference
// but names no valid variable, "" otherwise.
func checkEnvRef(s string) string {
	name, ok := envRef(s)
	if !ok || envName.MatchString(name) {
		return ""
	}
	return fmt.Sprintf("invalid environment reference %q: want $ENV.NAME with letters, digits and underscores", s)
}

// ResolveValue returns s, or the value of the environment variable it
// names when s is "$ENV.NAME". A missing or empty variable is an error
// wrapping ErrEnvNotSet that names the variable (never a value).
func ResolveValue(s string) (string, error) {
	name, ok := envRef(s)
	if !ok {
		return s, nil
	}
	if !envName.MatchString(name) {
		return "", fmt.Errorf("invalid environment reference %q", s)
	}
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s: %w", name, ErrEnvNotSet)
	}
	return v, nil
}

// Resolved is a connector ready for a request: $ENV references replaced by
// their current values. String, GoString and LogValue never show the key.
type Resolved struct {
	Type string
	// Host is the API base URL ("" = the type's public API); it came from
	// the connector's host, or its proxy when host is empty.
	Host  string
	Key   string
	Model string
	// APIVersion, AuthMode and Params are the connector's (see
	// ConnectorOptions).
	APIVersion string
	AuthMode   string
	Params     map[string]connector.ParamSpec
	// Script is the scripted connector's script file, absolute.
	Script string
	// Extra holds the other options (a copy: callers may modify it).
	Extra map[string]any
	// Capabilities are the model's (ModelCapabilities).
	Capabilities connector.Capabilities
}

// String describes the connector without its key.
func (r Resolved) String() string {
	return fmt.Sprintf("%s host=%q model=%q key=%s", r.Type, r.Host, r.Model, redacted(r.Key))
}

// GoString is String, so %#v cannot print the key either.
func (r Resolved) GoString() string { return "assistant.Resolved{" + r.String() + "}" }

// LogValue keeps the key out of structured logs.
func (r Resolved) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", r.Type), slog.String("host", r.Host),
		slog.String("model", r.Model), slog.String("key", redacted(r.Key)))
}

// String describes the options without the key.
func (o ConnectorOptions) String() string {
	return fmt.Sprintf("host=%q model=%q key=%s", o.Host, o.Model, redactRaw(o.Key))
}

// GoString is String, so %#v cannot print the key either.
func (o ConnectorOptions) GoString() string { return "assistant.ConnectorOptions{" + o.String() + "}" }

// LogValue keeps the key out of structured logs.
func (o ConnectorOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("host", o.Host), slog.String("model", o.Model), slog.String("key", redactRaw(o.Key)))
}

func redacted(k string) string {
	if k == "" {
		return "unset"
	}
	return "set"
}

// redactRaw shows an environment reference (a name, not a secret) but
// never a literal key.
func redactRaw(k string) string {
	if _, ok := envRef(k); ok {
		return k
	}
	return redacted(k)
}

// Resolve returns the connector's options with $ENV references in host
// (or proxy), key, model and version replaced by the environment's
// current values. A missing
// variable is an error naming it and the connector file; no error ever
// contains the key.
func (c *Connector) Resolve() (Resolved, error) {
	r := Resolved{Type: c.Type, Script: c.Options.Script, Extra: maps.Clone(c.Options.Extra),
		AuthMode: c.Options.AuthMode, Params: c.Options.Params}
	var errs []error
	for _, f := range []struct {
		name string
		raw  string
		dst  *string
	}{{cmpOr(c.Options.HostFrom, "host"), c.Options.Host, &r.Host}, {"key", c.Options.Key, &r.Key}, {"model", c.Options.Model, &r.Model},
		{"version", c.Options.APIVersion, &r.APIVersion}} {
		v, err := ResolveValue(f.raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		*f.dst = v
	}
	if err := errors.Join(errs...); err != nil {
		return Resolved{}, fmt.Errorf("connector %s (%s): %w", c.ID, c.File, err)
	}
	r.Capabilities = c.ModelCapabilities(r.Model)
	return r, nil
}

// ModelCapabilities are what model can take behind this connector, as Yao
// resolves them (connector.ResolveCapabilities): options.capabilities when
// the file declares them, else what Yao knows of the model. model ""
// is the connector's own (its $ENV reference resolved when set).
func (c *Connector) ModelCapabilities(model string) connector.Capabilities {
	if model == "" {
		model, _ = ResolveValue(c.Options.Model)
	}
	return connector.ResolveCapabilities(c.Type, model, c.Options.Capabilities)
}

// ResolveEnv returns the server's environment with $ENV references
// replaced by current values; a missing variable is an error naming it and
// the definition file.
func (s *MCPServer) ResolveEnv() (map[string]string, error) {
	return s.resolveMap("env", s.Env)
}

// ResolveHeaders is ResolveEnv for the HTTP headers of an http or sse
// server.
func (s *MCPServer) ResolveHeaders() (map[string]string, error) {
	return s.resolveMap("headers", s.Headers)
}

func (s *MCPServer) resolveMap(what string, m map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	var errs []error
	for k, v := range m {
		r, err := ResolveValue(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", what, k, err))
			continue
		}
		out[k] = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mcp server %s (%s): %w", s.ID, s.File, err)
	}
	return out, nil
}

// ResolveTokens returns the bearer tokens of app.jsonc (token -> user id)
// with $ENV references resolved. A missing variable is an error naming it.
func (c *AppConfig) ResolveTokens() (map[string]string, error) {
	users, _, err := c.ResolveIdentities()
	return users, err
}

// ResolveIdentities returns who each bearer token of app.jsonc stands for,
// with $ENV references resolved: its user (token -> user id) and, for the
// tokens that name one, its team (token -> team id). A missing variable
// is an error naming it.
func (c *AppConfig) ResolveIdentities() (users, teams map[string]string, err error) {
	users = make(map[string]string, len(c.Auth.Tokens))
	teams = map[string]string{}
	first := make(map[string]int, len(c.Auth.Tokens))
	var errs []error
	for i, t := range c.Auth.Tokens {
		where := fmt.Sprintf("auth.tokens[%d]", i)
		if err := sandbox.ValidateID("user", t.User); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if t.Team != "" {
			if err := sandbox.ValidateID("team", t.Team); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
		}
		v, err := ResolveValue(t.Token)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (user %s): %w", where, t.User, err))
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" {
			errs = append(errs, fmt.Errorf("%s (user %s): token is empty", where, t.User))
			continue
		}
		if j, dup := first[v]; dup {
			errs = append(errs, fmt.Errorf("%s: same token as auth.tokens[%d]: every token must be unique", where, j))
			continue
		}
		first[v] = i
		users[v] = t.User
		if t.Team != "" {
			teams[v] = t.Team
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("app.jsonc: %w", err)
	}
	return users, teams, nil
}
