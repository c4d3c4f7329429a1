package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

// testRenameChat: a title the user sets is kept, also when the history is
// replaced, until an empty one goes back to the first user message.
func testRenameChat(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := bg
	user := []chat.Message{{Role: chat.RoleUser, Content: "first question"}, {Role: chat.RoleAssistant, Content: "answer"}}
	if err := s.AppendMessages(ctx, "u", "c", "a", user...); err != nil {
		t.Fatal(err)
	}
	title := func() string {
		t.Helper()
		info, found, err := s.Chat(ctx, "u", "c")
		if err != nil || !found {
			t.Fatalf("chat: %v %v", found, err)
		}
		return info.Title
	}
	if found, err := s.RenameChat(ctx, "u", "c", "  My project  "); err != nil || !found {
		t.Fatalf("rename = %v, %v", found, err)
	}
	if got := title(); got != "My project" {
		t.Errorf("title = %q", got)
	}
	// Replacing the history keeps a title the user set.
	if err := s.ReplaceHistory(ctx, "u", "c", "a", []chat.Message{{Role: chat.RoleUser, Content: "other"}}); err != nil {
		t.Fatal(err)
	}
	if got := title(); got != "My project" {
		t.Errorf("after replace, title = %q", got)
	}
	// An empty title goes back to the first user message.
	if _, err := s.RenameChat(ctx, "u", "c", ""); err != nil {
		t.Fatal(err)
	}
	if got := title(); got != "other" {
		t.Errorf("reset title = %q", got)
	}
	if err := s.ReplaceHistory(ctx, "u", "c", "a", []chat.Message{{Role: chat.RoleUser, Content: "third"}}); err != nil {
		t.Fatal(err)
	}
	if got := title(); got != "third" {
		t.Errorf("derived title after reset = %q", got)
	}
	if found, err := s.RenameChat(ctx, "u", "nope", "x"); err != nil || found {
		t.Errorf("unknown chat = %v, %v", found, err)
	}
	if found, _ := s.RenameChat(ctx, "other-user", "c", "x"); found {
		t.Error("another user renamed the chat")
	}
	if found, err := s.RenameChat(ctx, "u", "c", "  "+strings.Repeat("é", store.MaxTitleLen/2)+"  "); err != nil || !found || title() != strings.Repeat("é", store.MaxTitleLen/2) {
		t.Errorf("a title of the longest length: %v, %v, %q", found, err, title())
	}
	for _, bad := range []string{strings.Repeat("x", store.MaxTitleLen+1), "a\nb", "\xff", "a\x00b"} {
		if _, err := s.RenameChat(ctx, "u", "c", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("title %q: err = %v, want store.ErrInvalid", bad, err)
		}
	}
}
