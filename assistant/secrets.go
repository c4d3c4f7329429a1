package assistant

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/bridge/egress"
)

// Secret is one entry of sandbox.secrets: a credential the agent may use
// but never holds. Inside the sandbox the variable Name holds a
// per-request placeholder; the egress proxy puts the real value in its
// place in the headers of HTTPS requests to Hosts, and nowhere else.
//
// Two forms load into it:
//
//	"secrets": {"GITHUB_TOKEN": {"value": "$ENV.GH_TOKEN", "hosts": ["api.github.com"]}}
//	"secrets": {"GITHUB_TOKEN": "$ENV.GH_TOKEN"}
//
// The second is Yao's (sandbox v1): it names no hosts, so the value may go
// to every host of sandbox.network.allow. In Yao the container held the
// value itself and could send it anywhere; here the sandbox never sees it
// and the allow list, which the author wrote for this assistant, bounds
// where it goes. Naming hosts narrows that and is the better form.
// Either form needs an allow-list network: without the proxy a placeholder
// could never become the value.
type Secret struct {
	// Name is the environment variable inside the sandbox.
	Name string
	// Value is "$ENV.NAME" (read at request time) or a literal value.
	Value string
	// Hosts are where the value may be sent (all of sandbox.network.allow
	// in the plain form).
	Hosts []egress.Rule
	// AllHosts is set for the plain form.
	AllHosts bool
}

// Resolve returns the secret's value, reading the environment for
// "$ENV.NAME". A missing or empty variable is an error naming it, never the
// value.
func (s Secret) Resolve() (string, error) {
	v, err := ResolveValue(s.Value)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", s.Name, err)
	}
	if v == "" {
		return "", fmt.Errorf("secret %s: the value is empty", s.Name)
	}
	return v, nil
}

// String describes the secret without its value.
func (s Secret) String() string {
	hosts := make([]string, 0, len(s.Hosts))
	for _, h := range s.Hosts {
		hosts = append(hosts, h.String())
	}
	return fmt.Sprintf("secret %s value=%s hosts=[%s]", s.Name, redactRaw(s.Value), strings.Join(hosts, " "))
}

// GoString is String, so %#v cannot print the value either.
func (s Secret) GoString() string { return "assistant.Secret{" + s.String() + "}" }

// LogValue keeps the value out of structured logs.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.String("value", redactRaw(s.Value)))
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

// parseSecrets checks sandbox.secrets at path (a map from variable names
// to a value or {value, hosts}) against the sandbox's egress policy, which
// must exist. Secrets come back sorted by name.
func parseSecrets(d *doc, path string, raw map[string]any, eg *Egress) []Secret {
	if len(raw) == 0 {
		return nil
	}
	if eg == nil {
		d.errPath(path, "%s need sandbox.network {\"allow\": [HOSTS]}: the sandbox holds only placeholders, and the egress proxy, which exists only with an allow list, puts the values into requests to those hosts", path)
		return nil
	}
	var out []Secret
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
		s := Secret{Name: name}
		switch v := raw[name].(type) {
		case string:
			s.Value, s.Hosts, s.AllHosts = v, slices.Clone(eg.Allow), true
		case map[string]any:
			for _, k := range sortedAnyKeys(v) {
				if k != "value" && k != "hosts" {
					d.errPath(p+"."+k, "unknown field %q in %s (known: hosts, value)", k, p)
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
		default:
			d.errPath(p, "%s: want \"$ENV.NAME\" or {\"value\": \"$ENV.NAME\", \"hosts\": [HOSTS]}", p)
			continue
		}
		vp := p
		if !s.AllHosts || d.has(p+".value") {
			vp = p + ".value"
		}
		switch {
		case s.Value == "":
			d.errPath(vp, "%s is empty", vp)
			continue
		case checkEnvRef(s.Value) != "":
			d.errPath(vp, "%s: %s", vp, checkEnvRef(s.Value))
			continue
		}
		if len(s.Hosts) == 0 {
			continue // problems reported by parseSecretHosts
		}
		out = append(out, s)
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
