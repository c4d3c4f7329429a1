package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

// testConcurrent hammers one store from many goroutines: appends to shared
// and private chats, memory writes, usage records and reads. Every append
// must land exactly once and in a consistent order per writer.
func testConcurrent(t *testing.T, o Opener) {
	s := o.Open(t)
	hammer(t, []*store.Store{s}, 16, 20)
}

// testConcurrentStores is testConcurrent through two stores on one
// database, as two servers would write it.
func testConcurrentStores(t *testing.T, o Opener) {
	s := o.Open(t)
	hammer(t, []*store.Store{s, o.Reopen(t, s)}, 12, 15)
}

func hammer(t *testing.T, stores []*store.Store, workers, rounds int) {
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			own := fmt.Sprintf("c%d", w)
			for r := range rounds {
				steps := []func() error{
					func() error {
						return s.AppendMessages(bg, "u", "shared", "a", chat.Message{Role: "user", Content: fmt.Sprintf("%d:%d", w, r)})
					},
					func() error { return s.AppendMessages(bg, "u", own, "a", msgs(fmt.Sprint(r), "ok")...) },
					func() error {
						return s.MemSet(bg, "user", "u", fmt.Sprintf("k%d", w), json.RawMessage(fmt.Sprint(r)))
					},
					func() error { return s.MemSet(bg, "user", "u", "contended", json.RawMessage(fmt.Sprint(w))) },
					func() error {
						return s.RecordUsage(bg, store.UsageRecord{UserID: "u", Usage: chat.Usage{InputTokens: 1}})
					},
					func() error { _, err := s.History(bg, "u", "shared"); return err },
					func() error { _, err := s.ListChats(bg, "u"); return err },
					func() error { _, err := s.ClaimChat(bg, "u", "shared", "a"); return err },
					func() error { return s.TouchWorkspace(bg, "u", "shared", time.Time{}) },
				}
				for _, f := range steps {
					if err := f(); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	s := stores[0]
	shared, err := s.History(bg, "u", "shared")
	must(t, err)
	if len(shared) != workers*rounds {
		t.Fatalf("shared chat has %d messages, want %d", len(shared), workers*rounds)
	}
	next := make([]int, workers) // each writer's messages appear in its own order
	for _, m := range shared {
		var w, r int
		if _, err := fmt.Sscanf(m.Content, "%d:%d", &w, &r); err != nil {
			t.Fatal(err)
		}
		if r != next[w] {
			t.Fatalf("writer %d: message %d out of order (want %d)", w, r, next[w])
		}
		next[w]++
	}
	if info, _, _ := s.Chat(bg, "u", "shared"); info.Messages != workers*rounds {
		t.Errorf("shared chat counts %d messages, has %d", info.Messages, workers*rounds)
	}
	for w := range workers {
		h, err := s.History(bg, "u", fmt.Sprintf("c%d", w))
		if err != nil || len(h) != 2*rounds {
			t.Fatalf("chat c%d: %d messages, %v", w, len(h), err)
		}
		v, _, err := s.MemGet(bg, "user", "u", fmt.Sprintf("k%d", w))
		if err != nil || string(v) != fmt.Sprint(rounds-1) {
			t.Errorf("memory k%d = %s, %v", w, v, err)
		}
	}
	sum, err := s.UsageSummary(bg, "u", time.Time{})
	if err != nil || sum.Requests != int64(workers*rounds) {
		t.Errorf("usage requests = %d, %v", sum.Requests, err)
	}
	chats, _ := s.ListChats(bg, "u")
	if len(chats) != workers+1 {
		t.Errorf("ListChats = %d chats, want %d", len(chats), workers+1)
	}
}

// testCanceledContext: every method given an ended context returns its
// error and writes nothing.
func testCanceledContext(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	calls := map[string]func() error{
		"AppendMessages": func() error { return s.AppendMessages(ctx, "u", "c", "a", msgs("x")...) },
		"ReplaceHistory": func() error { return s.ReplaceHistory(ctx, "u", "c", "a", msgs("x")) },
		"History":        func() error { _, err := s.History(ctx, "u", "c"); return err },
		"HistoryTail":    func() error { _, err := s.HistoryTail(ctx, "u", "c", 2); return err },
		"ListChats":      func() error { _, err := s.ListChats(ctx, "u"); return err },
		"Chat":           func() error { _, _, err := s.Chat(ctx, "u", "c"); return err },
		"DeleteChat":     func() error { return s.DeleteChat(ctx, "u", "c") },
		"ClaimChat":      func() error { _, err := s.ClaimChat(ctx, "u", "c", "a"); return err },
		"MemSet":         func() error { return s.MemSet(ctx, "user", "u", "k", json.RawMessage(`1`)) },
		"MemGet":         func() error { _, _, err := s.MemGet(ctx, "user", "u", "k"); return err },
		"MemDel":         func() error { return s.MemDel(ctx, "user", "u", "k") },
		"MemKeys":        func() error { _, err := s.MemKeys(ctx, "user", "u"); return err },
		"MemClear":       func() error { _, err := s.MemClear(ctx, "user", "u"); return err },
		"RecordUsage":    func() error { return s.RecordUsage(ctx, store.UsageRecord{UserID: "u"}) },
		"UsageSummary":   func() error { _, err := s.UsageSummary(ctx, "u", time.Time{}); return err },
		"TouchWorkspace": func() error { return s.TouchWorkspace(ctx, "u", "c", time.Time{}) },
		"WorkspaceLastUse": func() error {
			_, _, err := s.WorkspaceLastUse(ctx, "u", "c")
			return err
		},
		"StaleWorkspaces": func() error { _, err := s.StaleWorkspaces(ctx, time.Now()); return err },
		"ForgetWorkspace": func() error { return s.ForgetWorkspace(ctx, "u", "c") },
		"LockChat":        func() error { _, err := s.LockChat(ctx, "u", "c", 1, time.Second); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s(canceled) = %v, want context.Canceled", name, err)
		}
	}
	if h, err := s.History(bg, "u", "c"); err != nil || len(h) != 0 {
		t.Errorf("history after canceled writes = %v, %v", h, err)
	}
	if _, found, _ := s.MemGet(bg, "user", "u", "k"); found {
		t.Error("a canceled MemSet was stored")
	}
	if sum, _ := s.UsageSummary(bg, "u", time.Time{}); sum.Requests != 0 {
		t.Error("a canceled RecordUsage was stored")
	}
	// The store still works, and the chat was never locked.
	unlock, err := s.LockChat(bg, "u", "c", 0, time.Second)
	must(t, err)
	unlock()
	must(t, s.AppendMessages(bg, "u", "c", "a", msgs("x")...))
}

// testClosed: after Close every method returns ErrClosed; Close is
// idempotent, and a lock held across it is released.
func testClosed(t *testing.T, o Opener) {
	s := o.Open(t)
	must(t, s.AppendMessages(bg, "u", "c", "a", msgs("x")...))
	unlock, err := s.LockChat(bg, "u", "held", 0, time.Second)
	must(t, err)
	s2 := o.Reopen(t, s)
	must(t, s.Close())
	must(t, s.Close())
	calls := map[string]func() error{
		"History":        func() error { _, err := s.History(bg, "u", "c"); return err },
		"AppendMessages": func() error { return s.AppendMessages(bg, "u", "c", "a", msgs("x")...) },
		"ClaimChat":      func() error { _, err := s.ClaimChat(bg, "u", "c", "a"); return err },
		"MemGet":         func() error { _, _, err := s.MemGet(bg, "user", "u", "k"); return err },
		"RecordUsage":    func() error { return s.RecordUsage(bg, store.UsageRecord{UserID: "u"}) },
		"TouchWorkspace": func() error { return s.TouchWorkspace(bg, "u", "c", time.Time{}) },
		"LockChat":       func() error { _, err := s.LockChat(bg, "u", "c", 1, time.Second); return err },
		"SchemaVersion":  func() error { _, err := s.SchemaVersion(bg); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if s2.SharedLocks() {
		// The closed store's lock went with its connections (the
		// database ends their sessions a moment after: wait for it).
		u, err := s2.LockChat(bg, "u", "held", 1, 10*time.Second)
		if err != nil {
			t.Fatalf("a lock of a closed store is still held: %v", err)
		}
		u()
	}
	unlock() // after Close: no effect, no panic
	if h, err := s2.History(bg, "u", "c"); err != nil || len(h) != 1 {
		t.Errorf("history through another store = %v, %v", h, err)
	}
}

// testReopen: a second store on the database sees what the first wrote,
// and the schema is at this build's version.
func testReopen(t *testing.T, o Opener) {
	s := o.Open(t)
	must(t, s.AppendMessages(bg, "u", "c", "a", msgs("hi", "there")...))
	must(t, s.MemSet(bg, "chat", "u/c", "k", json.RawMessage(`{"n":1}`)))
	s2 := o.Reopen(t, s)
	h, err := s2.History(bg, "u", "c")
	if err != nil || fmt.Sprint(contents(h)) != "[hi there]" {
		t.Errorf("history through a second store = %v, %v", contents(h), err)
	}
	if v, _, _ := s2.MemGet(bg, "chat", "u/c", "k"); string(v) != `{"n":1}` {
		t.Errorf("memory through a second store = %s", v)
	}
	for _, st := range []*store.Store{s, s2} {
		v, err := st.SchemaVersion(bg)
		if err != nil || v != store.SchemaVersion() || v < 1 {
			t.Errorf("SchemaVersion = %d, %v; want %d", v, err, store.SchemaVersion())
		}
	}
	if s.Driver() != s2.Driver() || s.String() != s2.String() || s.String() == "" {
		t.Errorf("stores describe themselves as %q (%s) and %q (%s)", s, s.Driver(), s2, s2.Driver())
	}
}
