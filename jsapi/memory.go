package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
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
	// NamespaceTeam is keyed by the team id: shared by the team's users.
	NamespaceTeam Namespace = "team"
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
	// Len counts the owner's keys in the namespace.
	Len(ctx context.Context, ns Namespace, owner string) (int64, error)
	// Clear removes all of the owner's keys in the namespace.
	Clear(ctx context.Context, ns Namespace, owner string) (int64, error)
	// Incr adds delta to the integer under key (missing: 0) and returns
	// the new value, atomically; a value that is not an integer is an
	// error and stays as it was.
	Incr(ctx context.Context, ns Namespace, owner, key string, delta int64) (int64, error)
	// GetDel removes key and returns its value, atomically.
	GetDel(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error)
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

// Len implements MemoryStore.
func (m *MemStore) Len(ctx context.Context, ns Namespace, owner string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int64(len(m.data[memOwner{ns, owner}])), nil
}

// Clear implements MemoryStore.
func (m *MemStore) Clear(ctx context.Context, ns Namespace, owner string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(len(m.data[memOwner{ns, owner}]))
	delete(m.data, memOwner{ns, owner})
	return n, nil
}

// Incr implements MemoryStore.
func (m *MemStore) Incr(ctx context.Context, ns Namespace, owner, key string, delta int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := memOwner{ns, owner}
	var cur int64
	if v, ok := m.data[o][key]; ok {
		var err error
		if cur, err = intValue(v); err != nil {
			return 0, err
		}
	}
	if m.data[o] == nil {
		m.data[o] = map[string]json.RawMessage{}
	}
	cur += delta
	m.data[o][key] = json.RawMessage(strconv.FormatInt(cur, 10))
	return cur, nil
}

// GetDel implements MemoryStore.
func (m *MemStore) GetDel(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := memOwner{ns, owner}
	v, ok := m.data[o][key]
	delete(m.data[o], key)
	return v, ok, nil
}

// errNotInteger is Incr's error on a value that is not an integer.
var errNotInteger = errors.New("the value is not an integer")

// intValue reads a stored value that is an integer.
func intValue(v json.RawMessage) (int64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, errNotInteger
	}
	return int64(f), nil
}
