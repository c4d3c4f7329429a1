package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
)

// MaxTitleLen bounds a chat title a user sets, in bytes.
const MaxTitleLen = 200

// RenameChat sets the title of the user's chat; found is false when the
// user has no such chat. The title is kept from then on, also when the
// chat's history is replaced; an empty title goes back to the start of
// the first user message. Leading and trailing spaces are dropped; a title
// over MaxTitleLen bytes, holding a line break or NUL, or not UTF-8 is
// ErrInvalid.
func (s *Store) RenameChat(ctx context.Context, user, chatID, newTitle string) (found bool, err error) {
	done, err := s.enter()
	if err != nil {
		return false, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return false, fmt.Errorf("rename chat: %w", err)
	}
	newTitle = strings.TrimSpace(newTitle)
	switch {
	case len(newTitle) > MaxTitleLen:
		return false, fmt.Errorf("rename chat: %w: the title is %d bytes long (at most %d)", ErrInvalid, len(newTitle), MaxTitleLen)
	case !utf8.ValidString(newTitle):
		return false, fmt.Errorf("rename chat: %w: the title is not valid UTF-8", ErrInvalid)
	case strings.ContainsAny(newTitle, "\r\n\x00"):
		return false, fmt.Errorf("rename chat: %w: the title holds a line break or NUL", ErrInvalid)
	}
	set := 1
	if newTitle == "" {
		set = 0
		var first string
		err := s.stmts.firstUserMessage.QueryRowContext(ctx, user, chatID).Scan(&first)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("rename chat %q: %w", chatID, err)
		}
		newTitle = title([]chat.Message{{Role: chat.RoleUser, Content: first}})
	}
	res, err := s.stmts.renameChat.ExecContext(ctx, newTitle, set, time.Now().UnixMilli(), user, chatID)
	if err != nil {
		return false, fmt.Errorf("rename chat %q: %w", chatID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("rename chat %q: %w", chatID, err)
	}
	return n > 0, nil
}
