package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// TestClaimChat: the first assistant to claim a chat owns it; later claims
// by others get the owner; a chat written before claims existed is owned
// by its last writer; concurrent claims of a new chat agree on one owner.
func TestClaimChat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	for _, tc := range []struct{ chat, asst, want string }{
		{"c1", "coder", "coder"},
		{"c1", "qa", "coder"},
		{"c1", "coder", "coder"},
		{"c2", "qa", "qa"},
	} {
		got, err := s.ClaimChat(ctx, "alice", tc.chat, tc.asst)
		if err != nil || got != tc.want {
			t.Errorf("ClaimChat(%s, %s) = %q, %v; want %q", tc.chat, tc.asst, got, err, tc.want)
		}
	}
	// Bob's c1 is another chat.
	if got, _ := s.ClaimChat(ctx, "bob", "c1", "qa"); got != "qa" {
		t.Errorf("bob's c1 owner = %q", got)
	}
	// A claimed chat has no messages until a turn writes them; writing
	// keeps the owner.
	info, found, err := s.Chat(ctx, "alice", "c1")
	if err != nil || !found || info.AssistantID != "coder" || info.Messages != 0 {
		t.Errorf("chat = %+v %v %v", info, found, err)
	}
	if err := s.AppendMessages(ctx, "alice", "c1", "coder", chat.Message{Role: chat.RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	// A chat stored without an assistant is claimed by the first to ask.
	if err := s.AppendMessages(ctx, "alice", "old", "", chat.Message{Role: chat.RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ClaimChat(ctx, "alice", "old", "qa"); got != "qa" {
		t.Errorf("unowned chat claimed by %q", got)
	}
	if _, err := s.ClaimChat(ctx, "alice", "c3", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty assistant: %v", err)
	}

	var wg sync.WaitGroup
	owners := make([]string, 8)
	for i := range owners {
		wg.Go(func() {
			o, err := s.ClaimChat(ctx, "alice", "race", fmt.Sprintf("a%d", i))
			if err != nil {
				t.Error(err)
			}
			owners[i] = o
		})
	}
	wg.Wait()
	for _, o := range owners {
		if o != owners[0] {
			t.Fatalf("concurrent claims disagree: %v", owners)
		}
	}
}
