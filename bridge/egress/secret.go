package egress

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
)

// Secret is a credential the sandbox holds only as a placeholder: the
// proxy puts the real value in place of the placeholder in the headers of
// requests to the secret's hosts, over TLS it terminates, and nowhere else.
//
// Only headers: that is where credentials travel (Authorization, API-key
// headers, git's Basic auth). A URL or query string is not: URLs are
// logged by servers and echoed back in redirects (a Location header would
// bring the real value into the sandbox), and bodies are not: they are what
// a service stores and shows (an issue's text, a commit, a paste), so
// replacing there would let the agent publish the secret. Plain HTTP never
// carries it: it would cross the network in clear text.
type Secret struct {
	// Name is the environment variable that holds the placeholder.
	Name string
	// Placeholder is what the sandbox sees (see NewPlaceholder).
	Placeholder string
	// Value is the real value. It never leaves the host but in requests
	// to Hosts.
	Value string
	// Hosts are where the value may be sent; the proxy terminates TLS for
	// these (and only these) hosts.
	Hosts []Rule
}

// String never shows the value.
func (s Secret) String() string { return "secret " + s.Name }

// GoString never shows the value.
func (s Secret) GoString() string { return "egress.Secret{" + s.Name + "}" }

// NewPlaceholder returns a fresh placeholder for the named secret: letters,
// digits, '-' and '_' only (safe in headers, Basic credentials and URLs),
// unguessable, and saying what it stands for.
func NewPlaceholder(name string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "agentbox-placeholder-" + name + "-" + hex.EncodeToString(b)
}

// applies reports whether the secret may be sent to t.
func (s *Secret) applies(t Target) bool {
	for _, r := range s.Hosts {
		if r.Allows(t) {
			return true
		}
	}
	return false
}

// inject replaces the placeholders of secrets in header values, including
// inside Basic credentials (base64 of user:password, which is how git and
// curl send a token given in a URL or by a credential helper). It returns
// the names of the secrets it put in.
func inject(h http.Header, secrets []*Secret) []string {
	var used []string
	for _, s := range secrets {
		found := false
		for k, vs := range h {
			for i, v := range vs {
				nv := v
				if strings.Contains(nv, s.Placeholder) {
					nv = strings.ReplaceAll(nv, s.Placeholder, s.Value)
				}
				if k == "Authorization" || k == "Proxy-Authorization" {
					nv = injectBasic(nv, s)
				}
				if nv != v {
					vs[i] = nv
					found = true
				}
			}
		}
		if found {
			used = append(used, s.Name)
		}
	}
	return used
}

// injectBasic replaces the placeholder inside "Basic base64(user:pass)".
func injectBasic(v string, s *Secret) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return v
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil || !strings.Contains(string(raw), s.Placeholder) {
		return v
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), s.Placeholder, s.Value)))
}

// scrub puts placeholders back where a response header echoes a real value,
// so the value cannot come back into the sandbox that way.
func scrub(h http.Header, secrets []*Secret) {
	for _, s := range secrets {
		if s.Value == "" {
			continue
		}
		for _, vs := range h {
			for i, v := range vs {
				if strings.Contains(v, s.Value) {
					vs[i] = strings.ReplaceAll(v, s.Value, s.Placeholder)
				}
			}
		}
	}
}
