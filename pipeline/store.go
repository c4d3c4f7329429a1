package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/store"
)

// Compile-time checks: the store persists history and usage as it is, and
// hook memory through StoreMemory.
var (
	_ History           = (*store.Store)(nil)
	_ UsageRecorder     = (*store.Store)(nil)
	_ jsapi.MemoryStore = storeMemory{}
	_ ChatLocks         = storeChatLocks{}
	_ approval.Store    = (*store.Store)(nil)
)

// StoreChatLocks makes the store's chat locks the pipeline's: in this
// process on SQLite, across every server sharing the database on
// PostgreSQL. Their errors are ErrChatQueueFull and ErrChatWait.
func StoreChatLocks(s *store.Store) ChatLocks { return storeChatLocks{s} }

type storeChatLocks struct{ s *store.Store }

func (l storeChatLocks) Lock(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error) {
	return l.s.LockChat(ctx, user, chat, queue, wait)
}

// StoreMemory makes the store the hooks' persistent memory (the user,
// team and chat namespaces).
func StoreMemory(s *store.Store) jsapi.MemoryStore { return storeMemory{s} }

type storeMemory struct{ s *store.Store }

func (m storeMemory) Get(ctx context.Context, ns jsapi.Namespace, owner, key string) (json.RawMessage, bool, error) {
	return m.s.MemGet(ctx, string(ns), owner, key)
}

func (m storeMemory) Set(ctx context.Context, ns jsapi.Namespace, owner, key string, val json.RawMessage) error {
	return m.s.MemSet(ctx, string(ns), owner, key, val)
}

func (m storeMemory) Del(ctx context.Context, ns jsapi.Namespace, owner, key string) error {
	return m.s.MemDel(ctx, string(ns), owner, key)
}

func (m storeMemory) Keys(ctx context.Context, ns jsapi.Namespace, owner string) ([]string, error) {
	return m.s.MemKeys(ctx, string(ns), owner)
}

func (m storeMemory) Len(ctx context.Context, ns jsapi.Namespace, owner string) (int64, error) {
	return m.s.MemLen(ctx, string(ns), owner)
}

func (m storeMemory) Clear(ctx context.Context, ns jsapi.Namespace, owner string) (int64, error) {
	return m.s.MemClear(ctx, string(ns), owner)
}

func (m storeMemory) Incr(ctx context.Context, ns jsapi.Namespace, owner, key string, delta int64) (int64, error) {
	return m.s.MemIncr(ctx, string(ns), owner, key, delta)
}

func (m storeMemory) GetDel(ctx context.Context, ns jsapi.Namespace, owner, key string) (json.RawMessage, bool, error) {
	return m.s.MemGetDel(ctx, string(ns), owner, key)
}
