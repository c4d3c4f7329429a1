package assistant

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/bridge/egress"
)

// Secret is one entry of sandbox.secrets (Sandbox.Secrets, by variable
// name): a credential the agent may use but never holds. Inside the
// sandbox the variable holds a per-request placeholder; the egress proxy
// puts the real value in its place in the credential headers (Headers) of
// HTTPS requests to Hosts, and nowhere else.
//
// The forms that load into it:
//
//	"secrets": {"GITHUB_TOKEN": {"value": "$ENV.GH_TOKEN", "hosts": ["api.github.com"], "required": true}}
//	"secrets": {"OPENAI_KEY": {"value": "$ENV.OPENAI_KEY", "hosts": ["api.openai.com"], "headers": ["Authorization"]}}
//	"secrets": {"GITHUB_TOKEN": "$ENV.GH_TOKEN"}
//
// The second is Yao's (sandbox v1; v2's objects add label, description and
// multiline, which are kept or ignored): it names no hosts, so the value
// may go to every host of sandbox.network.allow. In Yao the container held
// the value itself and could send it anywhere; here the sandbox never sees
// it and the allow list, which the author wrote for this assistant, bounds
// where it goes. Naming hosts narrows that and is the better form. Either
// form needs an allow-list network: without the proxy a placeholder could
// never become the value. "headers" (agentbox's; Yao has no such field)
// names the request headers the value may go in, Authorization when it is
// left out.
type Secret struct {
	// Value is "$ENV.NAME" (read at request time) or a literal value.
	Value string
	// Required makes an unset variable fail the request, naming it;
	// otherwise the secret is left out (Yao drops empty secrets).
	Required bool
	// Hosts are where the value may be sent (all of sandbox.network.allow
	// when AllHosts).
	Hosts []egress.Rule
	// AllHosts is set when the secret names no hosts.
	AllHosts bool
	// Headers are the request headers the value may be put in, canonical
	// (nil: egress.DefaultSecretHeaders, Authorization).
	Headers []string
	// Label and Description are Yao v2's words for the UI.
	Label, Description string
}

// Resolve returns the secret's value, reading the environment for
// "$ENV.NAME". An unset or empty variable gives ok false for an optional
// secret and an error naming the variable (never a value) for a required
// one.
func (s Secret) Resolve(name string) (value string, ok bool, err error) {
	v, err := ResolveValue(s.Value)
	if err == nil && v == "" {
		err = errors.New("the value is empty")
	}
	switch {
	case err != nil && s.Required:
		return "", false, fmt.Errorf("secret %s is required: %w", name, err)
	case err != nil:
		return "", false, nil
	}
	return v, true, nil
}

// String describes the secret without its value.
func (s Secret) String() string {
	hosts := make([]string, 0, len(s.Hosts))
	for _, h := range s.Hosts {
		hosts = append(hosts, h.String())
	}
	return fmt.Sprintf("secret value=%s hosts=[%s]", redactRaw(s.Value), strings.Join(hosts, " "))
}

// GoString is String, so %#v cannot print the value either.
func (s Secret) GoString() string { return "assistant.Secret{" + s.String() + "}" }

// LogValue keeps the value out of structured logs.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("value", redactRaw(s.Value)), slog.Bool("required", s.Required))
}

// MCPSecret returns the name of the sandbox secret an env value of the
// stdio MCP server def stands for. A "$ENV.NAME" value is a credential: a
// stdio server runs inside the sandbox, where every process of the agent
// could read a real value (the CLI's environment, the server's /proc), so
// the server gets the placeholder of the secret whose value is the same
// reference, which the egress proxy swaps for the value in requests to that
// secret's hosts. ok is false for any other value (configuration, given as
// it is); a reference no secret of a has is an error that says what to
// declare.
func (a *Assistant) MCPSecret(def *MCPServer, key, v string) (name string, ok bool, err error) {
	if !strings.HasPrefix(v, EnvPrefix) {
		return "", false, nil
	}
	if a.Sandbox != nil {
		for _, n := range slices.Sorted(maps.Keys(a.Sandbox.Secrets)) {
			if a.Sandbox.Secrets[n].Value == v {
				return n, true, nil
			}
		}
	}
	where := def.ID
	if def.File != "" {
		where += " (" + def.File + ")"
	}
	return "", false, fmt.Errorf("mcp server %s: env %s reads %s, a credential: a stdio server runs inside the sandbox, where the agent could read it, so it gets a placeholder that the egress proxy swaps for the value in requests to the hosts of the sandbox secret with that value; declare one in sandbox.secrets, like %q: {\"value\": %q, \"hosts\": [\"api.example.com\"]} (it needs sandbox.network {\"allow\": [...]})",
		where, key, v, strings.TrimPrefix(v, EnvPrefix), v)
}

// reservedEnv are variables the bridge or the CLI set for themselves; a
// secret may not take their names.
var reservedEnv = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_USE_ENV_PROXY", "PATH", "HOME", "USER", "SHELL",
	"TMPDIR", "LD_PRELOAD", "LD_LIBRARY_PATH", "IS_SANDBOX",
}

// reservedPrefixes are prefixes of reserved variable names.
var reservedPrefixes = []string{"ANTHROPIC_", "CLAUDE", "AGENTBOX_", "CURSOR_", "DISABLE_"}

// reservedName says why a secret may not be called name ("" when it may).
func reservedName(name string) string {
	up := strings.ToUpper(name)
	if slices.Contains(reservedEnv, up) {
		return "the sandbox's own settings use " + name
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(up, p) {
			return "names starting with " + p + " are the CLI's or agentbox's own"
		}
	}
	return ""
}

// secretFields are the fields of a secret's object form: agentbox's and
// Yao v2's.
var secretFields = []string{"description", "headers", "hosts", "label", "multiline", "required", "value"}

// parseSecrets checks sandbox.secrets at path (a map from variable names
// to a value or {value, hosts, required, ...}) against the sandbox's
// egress policy, which must exist.
func parseSecrets(d *doc, path string, raw map[string]any, eg *Egress) map[string]Secret {
	if len(raw) == 0 {
		return nil
	}
	if eg == nil {
		d.errPath(path, "%s need sandbox.network {\"allow\": [HOSTS]}: the sandbox holds only placeholders, and the egress proxy, which exists only with an allow list, puts the values into requests to those hosts", path)
		return nil
	}
	out := map[string]Secret{}
	for _, name := range sortedAnyKeys(raw) {
		p := path + "." + name
		if !envName.MatchString(name) {
			d.errPath(p, "%s: %q is not a valid environment variable name (letters, digits and underscores, not starting with a digit)", p, name)
			continue
		}
		if why := reservedName(name); why != "" {
			d.errPath(p, "%s: %s; choose another name", p, why)
			continue
		}
		s := Secret{}
		isObject := false
		switch v := raw[name].(type) {
		case string:
			s.Value, s.Hosts, s.AllHosts = v, slices.Clone(eg.Allow), true
		case map[string]any:
			isObject = true
			for _, k := range sortedAnyKeys(v) {
				if !slices.Contains(secretFields, k) {
					d.errPath(p+"."+k, "unknown field %q in %s (known: %s)", k, p, strings.Join(secretFields, ", "))
				}
			}
			for _, f := range []struct {
				name string
				dst  *string
			}{{"label", &s.Label}, {"description", &s.Description}} {
				if x, ok := v[f.name]; ok {
					if *f.dst, ok = x.(string); !ok {
						d.errPath(p+"."+f.name, "%s.%s: want a string", p, f.name)
					}
				}
			}
			for _, f := range []string{"required", "multiline"} {
				if x, ok := v[f]; ok {
					b, ok := x.(bool)
					if !ok {
						d.errPath(p+"."+f, "%s.%s: want true or false", p, f)
					}
					if f == "required" {
						s.Required = b
					}
				}
			}
			val, ok := v["value"].(string)
			if !ok {
				d.errPath(p, "%s.value is required: a string, best \"$ENV.NAME\" so the value stays out of the app folder", p)
				continue
			}
			s.Value = val
			if hosts, ok := v["hosts"]; ok {
				s.Hosts = parseSecretHosts(d, p+".hosts", hosts, eg)
			} else {
				s.Hosts, s.AllHosts = slices.Clone(eg.Allow), true
			}
			if headers, ok := v["headers"]; ok {
				s.Headers = parseSecretHeaders(d, p+".headers", headers)
				if s.Headers == nil {
					continue
				}
			}
		default:
			d.errPath(p, "%s: want \"$ENV.NAME\" or {\"value\": \"$ENV.NAME\", \"hosts\": [HOSTS]}", p)
			continue
		}
		vp := p
		if isObject {
			vp = p + ".value"
		}
		_, isEnv := envRef(s.Value)
		switch {
		case s.Value == "":
			d.errPath(vp, "%s is empty", vp)
			continue
		case checkEnvRef(s.Value) != "":
			d.errPath(vp, "%s: %s", vp, checkEnvRef(s.Value))
			continue
		case !isEnv && len(s.Value) < egress.MinSecretLen:
			d.errPath(vp, "%s is %d characters: the egress proxy recognises a value in what comes back only from %d", vp, len(s.Value), egress.MinSecretLen)
			continue
		}
		if len(s.Hosts) == 0 {
			continue // problems reported by parseSecretHosts
		}
		out[name] = s
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// parseSecretHeaders checks a secret's headers: names the value may be
// put in, canonical, no header twice; nil after a problem.
func parseSecretHeaders(d *doc, path string, v any) []string {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		d.errPath(path, "%s: want a non-empty list of the request headers the value goes in, like [\"Authorization\"] or [\"X-Api-Key\"]", path)
		return nil
	}
	var out []string
	bad := false
	for i, item := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := item.(string)
		if !ok {
			d.errPath(p, "%s: want a header name as a string", p)
			bad = true
			continue
		}
		h, err := egress.CheckSecretHeader(s)
		switch {
		case err != nil:
			d.errPath(p, "%s: %v", p, err)
			bad = true
		case slices.Contains(out, h):
			d.errPath(p, "%s: %s is listed already", p, h)
			bad = true
		default:
			out = append(out, h)
		}
	}
	if bad {
		return nil
	}
	return out
}

// parseSecretHosts checks a secret's hosts: rules like the allow list's,
// each covered by it.
func parseSecretHosts(d *doc, path string, v any, eg *Egress) []egress.Rule {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		d.errPath(path, "%s: want a non-empty list of hosts the value may be sent to, like [\"api.github.com\"]", path)
		return nil
	}
	var out []egress.Rule
	for i, item := range list {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := item.(string)
		if !ok {
			d.errPath(p, "%s: want a host as a string", p)
			continue
		}
		r, err := egress.ParseRule(s)
		if err != nil {
			d.errPath(p, "%s: %v", p, err)
			continue
		}
		covered := false
		for _, a := range eg.Allow {
			if a.Covers(r) {
				covered = true
				break
			}
		}
		if !covered {
			d.errPath(p, "%s: %q is not allowed by sandbox.network.allow, so the value could never be sent there (a secret goes over HTTPS: port 443 unless the entry names one): add it to the allow list", p, s)
			continue
		}
		out = append(out, r)
	}
	if len(out) < len(list) {
		return nil
	}
	return out
}
