package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// DevUser is the user id of requests in development mode (no tokens, a
// loopback address) that do not name one with the X-User-ID header.
const DevUser = "dev"

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
		if tok := webSocketToken(r); tok != "" {
			h = "Bearer " + tok
		}
	}
	if h == "" {
		return "", errorf(http.StatusUnauthorized, chat.ErrAuth, msgMissingToken)
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", errorf(http.StatusUnauthorized, chat.ErrAuth, "malformed Authorization header: expected \"Bearer <token>\"")
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
		return "", errorf(http.StatusUnauthorized, chat.ErrAuth, msgInvalidToken)
	}
	return found, nil
}
