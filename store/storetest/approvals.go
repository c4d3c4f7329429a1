package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/store"
)

// testRememberedApprovals: a rule the user allowed for the rest of a chat
// is remembered for that user's chat only, on every store of the
// database; remembering it twice is no error; ForgetApprovals and
// DeleteChat drop the chat's; bad rules are ErrInvalid.
func testRememberedApprovals(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := bg
	const rule = "Bash(git push:*)"
	has := func(s *store.Store, user, chatID, rule string) bool {
		t.Helper()
		ok, err := s.ApprovalRemembered(ctx, user, chatID, rule)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if has(s, "u", "c", rule) {
		t.Fatal("a rule is remembered before it was")
	}
	for range 2 {
		must(t, s.RememberApproval(ctx, "u", "c", rule))
	}
	must(t, s.RememberApproval(ctx, "u", "c", "Write(*.md)"))
	must(t, s.RememberApproval(ctx, "u", "other", rule))
	if !has(s, "u", "c", rule) || !has(s, "u", "c", "Write(*.md)") {
		t.Error("remembered rules are not")
	}
	if has(s, "v", "c", rule) || has(s, "u", "c2", rule) || has(s, "u", "c", "Bash(git push)") || has(s, "u", "c", "bash(git push:*)") {
		t.Error("a rule is remembered for another user, chat or rule")
	}
	// Another server on the database (or this one restarted) sees them.
	if s2 := o.Reopen(t, s); !has(s2, "u", "c", rule) {
		t.Error("a remembered rule is not seen by another store on the database")
	}

	must(t, s.ForgetApprovals(ctx, "u", "c"))
	if has(s, "u", "c", rule) || has(s, "u", "c", "Write(*.md)") || !has(s, "u", "other", rule) {
		t.Error("ForgetApprovals dropped the wrong rules")
	}
	must(t, s.ForgetApprovals(ctx, "u", "never"))

	// Deleting the chat drops them with its history.
	must(t, s.AppendMessages(ctx, "u", "other", "a", msgs("hi")...))
	must(t, s.DeleteChat(ctx, "u", "other"))
	if has(s, "u", "other", rule) {
		t.Error("a deleted chat's rule is still remembered")
	}
	// A chat with nothing but remembered rules is deleted too.
	must(t, s.RememberApproval(ctx, "u", "bare", rule))
	must(t, s.DeleteChat(ctx, "u", "bare"))
	if has(s, "u", "bare", rule) {
		t.Error("a deleted chat's rule is still remembered")
	}

	for _, bad := range []string{"", strings.Repeat("x", store.MaxRuleLen+1), "a\x00b", "\xff"} {
		if err := s.RememberApproval(ctx, "u", "c", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("rule %.20q: err = %v, want store.ErrInvalid", bad, err)
		}
		if _, err := s.ApprovalRemembered(ctx, "u", "c", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("rule %.20q: err = %v, want store.ErrInvalid", bad, err)
		}
	}
	if err := s.RememberApproval(ctx, "", "c", rule); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty user: %v", err)
	}
	if err := s.ForgetApprovals(ctx, "u", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty chat: %v", err)
	}
}
