package store

import (
	"context"
	"fmt"
	"time"
)

// ClaimChat makes assistantID the assistant of the user's chat when the
// chat has none yet (a new chat is created, with no messages), and returns
// the chat's assistant: assistantID, or the one that had it before. It is
// atomic: of two concurrent claims of a new chat, one wins and the other
// gets the winner.
func (s *Store) ClaimChat(ctx context.Context, user, chatID, assistantID string) (string, error) {
	done, err := s.enter()
	if err != nil {
		return "", err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return "", fmt.Errorf("claim chat: %w", err)
	}
	if err := checkID("assistant id", assistantID); err != nil {
		return "", fmt.Errorf("claim chat: %w", err)
	}
	var owner string
	if err := s.stmts.claimChat.QueryRowContext(ctx, user, chatID, assistantID, time.Now().UnixMilli()).Scan(&owner); err != nil {
		return "", fmt.Errorf("claim chat %q: %w", chatID, err)
	}
	return owner, nil
}
