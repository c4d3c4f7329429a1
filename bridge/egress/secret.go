package egress

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Secret is a credential the sandbox holds only as a placeholder: the
// proxy puts the real value in place of the placeholder in the credential
// headers of requests to the secret's hosts, over TLS it terminates, and
// nowhere else.
//
// Only the headers the secret names (Authorization unless it names
// others): a header such as User-Agent or Accept is one a host may echo
// back (httpbin does, and so do error pages), and a URL or query string is
// logged by servers and echoed in redirects. Bodies never: they are what a
// service stores and shows (an issue's text, a commit, a paste), so
// replacing there would let the agent publish the secret. Plain HTTP never
// carries it: it would cross the network in clear text. A request that
// carries the placeholder anywhere else the proxy looks (another header,
// the URL) is refused, and so is a protocol upgrade (WebSocket) that would
// carry the value: what comes back over it could not be scrubbed.
//
// Whatever comes back through the proxy is scrubbed of every secret's
// value (see Scrubber).
type Secret struct {
	// Name is the environment variable that holds the placeholder.
	Name string
	// Placeholder is what the sandbox sees (see NewPlaceholder).
	Placeholder string
	// Value is the real value (at least MinSecretLen bytes). It never
	// leaves the host but in requests to Hosts.
	Value string
	// Hosts are where the value may be sent; the proxy terminates TLS for
	// these (and only these) hosts.
	Hosts []Rule
	// Headers are the request headers the value may be put in (nil:
	// DefaultSecretHeaders). Hop-by-hop headers, Host and the body's
	// framing are refused.
	Headers []string
}

// DefaultSecretHeaders are where a secret that names no headers goes: the
// header HTTP defines for credentials, which git, curl, npm, pip and the
// API clients of GitHub, GitLab and OpenAI use (Bearer, token or Basic).
var DefaultSecretHeaders = []string{"Authorization"}

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

// notCredentialHeaders may not carry a secret: the connection's own
// (hop-by-hop, removed by the proxy), the host, and the body's framing.
var notCredentialHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// CheckSecretHeader returns the canonical form of a header a secret may be
// put in, or an error saying why it may not.
func CheckSecretHeader(name string) (string, error) {
	if !httpguts.ValidHeaderFieldName(name) {
		return "", fmt.Errorf("%q is not a valid header name", name)
	}
	c := textproto.CanonicalMIMEHeaderKey(name)
	if slices.Contains(notCredentialHeaders, c) {
		return "", fmt.Errorf("%s cannot carry a secret (the proxy sets it, or it is not passed on)", c)
	}
	return c, nil
}

// check validates s as New takes it, filling in the default headers.
func (s *Secret) check() error {
	switch {
	case s.Name == "" || s.Value == "" || s.Placeholder == "" || len(s.Hosts) == 0:
		return fmt.Errorf("egress secret %q: name, value, placeholder and hosts are required", s.Name)
	case len(s.Value) < MinSecretLen:
		return fmt.Errorf("egress secret %s: its value is %d bytes; the proxy recognises a value in what comes back only from %d bytes, so a shorter one is refused", s.Name, len(s.Value), MinSecretLen)
	case strings.Contains(s.Value, s.Placeholder) || strings.Contains(s.Placeholder, s.Value):
		return fmt.Errorf("egress secret %s: the value and the placeholder contain one another", s.Name)
	}
	if len(s.Headers) == 0 {
		s.Headers = DefaultSecretHeaders
	}
	hs := make([]string, 0, len(s.Headers))
	for _, h := range s.Headers {
		c, err := CheckSecretHeader(h)
		if err != nil {
			return fmt.Errorf("egress secret %s: header %w", s.Name, err)
		}
		hs = append(hs, c)
	}
	s.Headers = hs
	return nil
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

// misplaced says where r carries the placeholder of a secret of secrets
// outside the headers that secret names ("" when nowhere): the URL or
// another header, as text or inside Basic credentials. The body is not
// looked at: the value never goes there, so a placeholder in it stays a
// placeholder.
func misplaced(r *http.Request, secrets []*Secret) (*Secret, string) {
	uri := r.URL.RequestURI()
	if u, err := url.PathUnescape(uri); err == nil {
		uri += " " + u
	}
	for _, s := range secrets {
		if strings.Contains(uri, s.Placeholder) {
			return s, "the URL"
		}
		for k, vs := range r.Header {
			if slices.Contains(s.Headers, k) {
				continue
			}
			for _, v := range vs {
				if strings.Contains(v, s.Placeholder) || strings.Contains(basicCredentials(v), s.Placeholder) {
					return s, "the " + k + " header"
				}
			}
		}
	}
	return nil, ""
}

// inject replaces the placeholders of secrets in the headers each names,
// including inside Basic credentials (base64 of user:password, which is how
// git and curl send a token given in a URL or by a credential helper). It
// returns the names of the secrets it put in.
func inject(h http.Header, secrets []*Secret) []string {
	var used []string
	for _, s := range secrets {
		found := false
		for _, k := range s.Headers {
			vs := h[k]
			for i, v := range vs {
				nv := strings.ReplaceAll(v, s.Placeholder, s.Value)
				nv = injectBasic(nv, s)
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

// carries reports whether inject would put a secret into h.
func carries(h http.Header, secrets []*Secret) bool {
	for _, s := range secrets {
		for _, k := range s.Headers {
			for _, v := range h[k] {
				if strings.Contains(v, s.Placeholder) || strings.Contains(basicCredentials(v), s.Placeholder) {
					return true
				}
			}
		}
	}
	return false
}

// basicCredentials decodes "Basic base64(user:pass)" ("" for anything
// else).
func basicCredentials(v string) string {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ""
	}
	return string(raw)
}

// injectBasic replaces the placeholder inside "Basic base64(user:pass)".
func injectBasic(v string, s *Secret) string {
	raw := basicCredentials(v)
	if !strings.Contains(raw, s.Placeholder) {
		return v
	}
	scheme, _, _ := strings.Cut(v, " ")
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(raw, s.Placeholder, s.Value)))
}
