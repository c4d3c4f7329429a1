package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/store"
)

// TestMemResponses: the in-memory store keeps the newest responses, per
// user, and forgets a chat's newest when it evicts it.
func TestMemResponses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newMemResponses()
	for i := range maxMemResponses + 1 {
		if err := m.SaveResponse(ctx, "alice", store.Response{ID: fmt.Sprintf("resp_%d", i), ChatID: fmt.Sprintf("c%d", i%3)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, _ := m.Response(ctx, "alice", "resp_0"); found {
		t.Error("the oldest response was kept")
	}
	if r, found, _ := m.Response(ctx, "alice", "resp_1"); !found || r.ChatID != "c1" {
		t.Errorf("resp_1 = %+v, %v", r, found)
	}
	if _, found, _ := m.Response(ctx, "bob", "resp_1"); found {
		t.Error("bob found alice's response")
	}
	if id, _ := m.LatestResponse(ctx, "alice", fmt.Sprintf("c%d", maxMemResponses%3)); id != fmt.Sprintf("resp_%d", maxMemResponses) {
		t.Errorf("latest = %q", id)
	}
	// A chat whose only response was evicted has none.
	m2 := newMemResponses()
	_ = m2.SaveResponse(ctx, "alice", store.Response{ID: "first", ChatID: "lonely"})
	for i := range maxMemResponses {
		_ = m2.SaveResponse(ctx, "alice", store.Response{ID: fmt.Sprint(i), ChatID: "busy"})
	}
	if id, _ := m2.LatestResponse(ctx, "alice", "lonely"); id != "" {
		t.Errorf("latest of a chat whose response was evicted = %q", id)
	}
	if len(m.byKey) != maxMemResponses || len(m.order) != maxMemResponses {
		t.Errorf("kept %d responses", len(m.byKey))
	}
}
