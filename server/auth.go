package server

import (
	"context"
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

// identity is who a request's credentials stand for: a user and, when the
// credentials name one, the team the user acts for.
type identity struct{ user, team string }

// authenticator maps bearer tokens to identities. Tokens are kept as
// SHA-256 digests and compared in constant time, so neither the map lookup
// nor the comparison leaks a token's prefix through timing.
type authenticator struct {
	users map[[sha256.Size]byte]identity
	dev   bool
}

// newAuthenticator maps each token to its user (tokens) and team (teams,
// by token; a token absent there names no team).
func newAuthenticator(tokens, teams map[string]string, dev bool) *authenticator {
	a := &authenticator{users: make(map[[sha256.Size]byte]identity, len(tokens)), dev: dev}
	for tok, user := range tokens {
		a.users[sha256.Sum256([]byte(tok))] = identity{user: user, team: teams[tok]}
	}
	return a
}

// teamKey carries the authenticated team of a request in its context.
type teamKey struct{}

// withTeam returns r with its authenticated team in its context.
func withTeam(r *http.Request, team string) *http.Request {
	if team == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), teamKey{}, team))
}

// teamOf returns the team r's credentials name ("" for none): the team of
// its bearer token (auth.tokens[].team), or in development mode the
// X-Team-ID header, as the user is X-User-ID there. No field of a request
// body chooses it.
func teamOf(r *http.Request) string {
	t, _ := r.Context().Value(teamKey{}).(string)
	return t
}

// user returns the authenticated identity of r.
func (a *authenticator) user(r *http.Request) (identity, error) {
	if a.dev {
		id := identity{user: r.Header.Get("X-User-ID"), team: r.Header.Get("X-Team-ID")}
		if id.user == "" {
			id.user = DevUser
		} else if err := validateID("user", id.user); err != nil {
			return identity{}, fmt.Errorf("X-User-ID: %w", err)
		}
		if id.team != "" {
			if err := validateID("team", id.team); err != nil {
				return identity{}, fmt.Errorf("X-Team-ID: %w", err)
			}
		}
		return id, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		if tok := webSocketToken(r); tok != "" {
			h = "Bearer " + tok
		}
	}
	if h == "" {
		return identity{}, errorf(http.StatusUnauthorized, chat.ErrAuth, msgMissingToken)
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return identity{}, errorf(http.StatusUnauthorized, chat.ErrAuth, "malformed Authorization header: expected \"Bearer <token>\"")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	var found identity
	for k, u := range a.users {
		// Visit every entry so timing does not depend on which one matched.
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			found = u
		}
	}
	if found.user == "" {
		return identity{}, errorf(http.StatusUnauthorized, chat.ErrAuth, msgInvalidToken)
	}
	return found, nil
}
