package store

import (
	"context"
	"fmt"
	"time"
)

// claimChat binds a chat to an assistant, creating the chat row when new,
// unless it already has one; RETURNING gives the assistant it has after.
const claimChat = `INSERT INTO chats (user_id, chat_id, assistant_id, title, message_count, created_at, updated_at)
	VALUES (?1, ?2, ?3, '', 0, ?4, ?4)
	ON CONFLICT (user_id, chat_id) DO UPDATE SET
		assistant_id = CASE WHEN assistant_id = '' THEN excluded.assistant_id ELSE assistant_id END
	RETURNING assistant_id`

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
	if err := s.db.QueryRowContext(ctx, claimChat, user, chatID, assistantID, time.Now().UnixMilli()).Scan(&owner); err != nil {
		return "", fmt.Errorf("claim chat %q: %w", chatID, err)
	}
	return owner, nil
}
