package approval

import (
	"context"
	"sync"
)

// MemStore is a Store in memory: what users allow for the rest of a chat
// lasts while the process runs. It is safe for concurrent use.
type MemStore struct {
	mu    sync.Mutex
	rules map[memKey]map[string]bool
}

type memKey struct{ user, chat string }

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{rules: map[memKey]map[string]bool{}} }

// RememberApproval implements Store.
func (m *MemStore) RememberApproval(_ context.Context, user, chatID, rule string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{user, chatID}
	if m.rules[k] == nil {
		m.rules[k] = map[string]bool{}
	}
	m.rules[k][rule] = true
	return nil
}

// ApprovalRemembered implements Store.
func (m *MemStore) ApprovalRemembered(_ context.Context, user, chatID, rule string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rules[memKey{user, chatID}][rule], nil
}

// ForgetApprovals implements Store.
func (m *MemStore) ForgetApprovals(_ context.Context, user, chatID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rules, memKey{user, chatID})
	return nil
}
