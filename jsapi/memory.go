package jsapi

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

// Namespace is a memory namespace.
type Namespace string

// Memory namespaces. User and chat values persist in a MemoryStore across
// requests; context values live in the request's Context and are gone when
// it ends.
const (
	// NamespaceUser is keyed by the user id: shared by all of a user's chats.
	NamespaceUser Namespace = "user"
	// NamespaceChat is keyed by ChatOwner(user, chat).
	NamespaceChat Namespace = "chat"
	// NamespaceContext is per request; it never reaches a MemoryStore.
	NamespaceContext Namespace = "context"
)

// Limits on what hooks may store.
const (
	// MaxKeyLen bounds a memory key, in bytes.
	MaxKeyLen = 256
	// MaxValueSize bounds one memory value, JSON-encoded.
	MaxValueSize = 1 << 20
)

// ChatOwner is the owner string of the chat namespace for a user's chat.
// User and chat ids are validated before they reach hooks (no "/"), so the
// pair is unambiguous.
func ChatOwner(userID, chatID string) string { return userID + "/" + chatID }

// MemoryStore persists the user and chat memory namespaces. Values are JSON.
// Implementations are safe for concurrent use. A missing key is not an error
// (Get reports ok=false; Del succeeds).
type MemoryStore interface {
	// Get returns the value stored under key, and whether there is one.
	Get(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error)
	// Set stores val (valid JSON) under key, replacing any value.
	Set(ctx context.Context, ns Namespace, owner, key string, val json.RawMessage) error
	// Del removes key. Removing a missing key succeeds.
	Del(ctx context.Context, ns Namespace, owner, key string) error
	// Keys lists the owner's keys in the namespace, sorted.
	Keys(ctx context.Context, ns Namespace, owner string) ([]string, error)
}

// MemStore is an in-memory MemoryStore for tests and embedders that need no
// persistence. The zero value is not ready: use NewMemStore.
type MemStore struct {
	mu   sync.RWMutex
	data map[memOwner]map[string]json.RawMessage
}

type memOwner struct {
	ns    Namespace
	owner string
}

var _ MemoryStore = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store, safe for concurrent use.
func NewMemStore() *MemStore {
	return &MemStore{data: map[memOwner]map[string]json.RawMessage{}}
}

// Get implements MemoryStore.
func (m *MemStore) Get(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.data[memOwner{ns, owner}][key]
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(v), true, nil
}

// Set implements MemoryStore.
func (m *MemStore) Set(ctx context.Context, ns Namespace, owner, key string, val json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := memOwner{ns, owner}
	if m.data[o] == nil {
		m.data[o] = map[string]json.RawMessage{}
	}
	m.data[o][key] = slices.Clone(val)
	return nil
}

// Del implements MemoryStore.
func (m *MemStore) Del(ctx context.Context, ns Namespace, owner, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := memOwner{ns, owner}
	delete(m.data[o], key)
	if len(m.data[o]) == 0 {
		delete(m.data, o)
	}
	return nil
}

// Keys implements MemoryStore.
func (m *MemStore) Keys(ctx context.Context, ns Namespace, owner string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	keys := make([]string, 0, len(m.data[memOwner{ns, owner}]))
	for k := range m.data[memOwner{ns, owner}] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}
