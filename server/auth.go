package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// envPrefix marks a token value read from the environment.
const envPrefix = "$ENV."

// DevUser is the user id of requests in development mode (no tokens, a
// loopback address) that do not name one with the X-User-ID header.
const DevUser = "dev"

// ResolveTokens turns app.jsonc's auth.tokens into the token -> user map
// Config.Tokens takes. "$ENV.NAME" values are read from the environment;
// a missing or empty variable, an empty token, a bad user id or a token
// listed twice is an error that names the entry (and the variable), never
// the token itself.
func ResolveTokens(tokens []assistant.TokenConfig) (map[string]string, error) {
	out := make(map[string]string, len(tokens))
	seen := make(map[string]int, len(tokens))
	for i, tc := range tokens {
		where := fmt.Sprintf("auth.tokens[%d]", i)
		if err := validateID("user", tc.User); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		tok := tc.Token
		if name, ok := strings.CutPrefix(tok, envPrefix); ok {
			if name == "" {
				return nil, fmt.Errorf("%s: token %q names no environment variable", where, envPrefix)
			}
			v, set := os.LookupEnv(name)
			switch {
			case !set:
				return nil, fmt.Errorf("%s: environment variable %s is not set", where, name)
			case strings.TrimSpace(v) == "":
				return nil, fmt.Errorf("%s: environment variable %s is empty", where, name)
			}
			tok = v
		}
		tok = strings.TrimSpace(tok)
		if tok == "" {
			return nil, fmt.Errorf("%s: token is empty", where)
		}
		if j, dup := seen[tok]; dup {
			return nil, fmt.Errorf("%s: same token as auth.tokens[%d]: every token must be unique", where, j)
		}
		seen[tok] = i
		out[tok] = tc.User
	}
	return out, nil
}

const (
	msgMissingToken = "missing bearer token: send Authorization: Bearer <token>"
	msgInvalidToken = "invalid bearer token"
)

// authenticator maps bearer tokens to users. Tokens are kept as SHA-256
// digests and compared in constant time, so neither the map lookup nor the
// comparison leaks a token's prefix through timing.
type authenticator struct {
	users map[[sha256.Size]byte]string
	dev   bool
}

func newAuthenticator(tokens map[string]string, dev bool) *authenticator {
	a := &authenticator{users: make(map[[sha256.Size]byte]string, len(tokens)), dev: dev}
	for tok, user := range tokens {
		a.users[sha256.Sum256([]byte(tok))] = user
	}
	return a
}

// user returns the authenticated user of r.
func (a *authenticator) user(r *http.Request) (string, error) {
	if a.dev {
		u := r.Header.Get("X-User-ID")
		if u == "" {
			return DevUser, nil
		}
		if err := validateID("user", u); err != nil {
			return "", fmt.Errorf("X-User-ID: %w", err)
		}
		return u, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", pipeline.Errorf(http.StatusUnauthorized, chat.ErrAuth, msgMissingToken)
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", pipeline.Errorf(http.StatusUnauthorized, chat.ErrAuth, "malformed Authorization header: expected \"Bearer <token>\"")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	var found string
	for k, u := range a.users {
		// Visit every entry so timing does not depend on which one matched.
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			found = u
		}
	}
	if found == "" {
		return "", pipeline.Errorf(http.StatusUnauthorized, chat.ErrAuth, msgInvalidToken)
	}
	return found, nil
}
