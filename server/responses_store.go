package server

import (
	"context"
	"sync"

	"github.com/agentbox/agentbox/store"
)

// ResponseStore keeps the Responses API's stored responses (created with
// store: true, the default), per user: previous_response_id and
// item_reference find them, GET /v1/responses/{id} returns them.
// *store.Store implements it. Implementations are safe for concurrent
// use.
type ResponseStore interface {
	// SaveResponse stores r for user.
	SaveResponse(ctx context.Context, user string, r store.Response) error
	// Response returns the user's response id; found is false when the
	// user has none of that id.
	Response(ctx context.Context, user, id string) (r store.Response, found bool, err error)
	// LatestResponse returns the id of the newest stored response of the
	// user's chat ("" when none).
	LatestResponse(ctx context.Context, user, chatID string) (string, error)
}

var _ ResponseStore = (*store.Store)(nil)

// memResponses is the ResponseStore of a server configured without one: it
// keeps the newest maxMemResponses responses in memory, for the life of
// the server.
type memResponses struct {
	mu     sync.Mutex
	byKey  map[[2]string]store.Response // (user, id)
	latest map[[2]string]string         // (user, chat) -> id
	order  [][2]string
}

const maxMemResponses = 10000

func newMemResponses() *memResponses {
	return &memResponses{byKey: map[[2]string]store.Response{}, latest: map[[2]string]string{}}
}

func (m *memResponses) SaveResponse(_ context.Context, user string, r store.Response) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{user, r.ID}
	if _, ok := m.byKey[k]; !ok {
		m.order = append(m.order, k)
	}
	m.byKey[k] = r
	m.latest[[2]string{user, r.ChatID}] = r.ID
	for len(m.order) > maxMemResponses {
		old := m.order[0]
		m.order = m.order[1:]
		chat := [2]string{old[0], m.byKey[old].ChatID}
		if m.latest[chat] == old[1] {
			delete(m.latest, chat)
		}
		delete(m.byKey, old)
	}
	return nil
}

func (m *memResponses) Response(_ context.Context, user, id string) (store.Response, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byKey[[2]string{user, id}]
	return r, ok, nil
}

func (m *memResponses) LatestResponse(_ context.Context, user, chatID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest[[2]string{user, chatID}], nil
}
