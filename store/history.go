package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
)

// titleLen bounds a chat title (runes), taken from its first user message.
const titleLen = 80

// ChatInfo describes one stored chat of a user.
type ChatInfo struct {
	// ID is the chat id.
	ID string `json:"id"`
	// AssistantID is the assistant of the last turn that wrote to the chat.
	AssistantID string `json:"assistant_id,omitempty"`
	// Title is the start of the chat's first user message.
	Title string `json:"title,omitempty"`
	// Messages is the number of stored messages.
	Messages int `json:"messages"`
	// Created and Updated are when the chat was first and last written.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// History returns the stored messages of the user's chat, oldest first, or
// an empty slice when the chat has none (an unknown chat is not an error).
func (s *Store) History(ctx context.Context, user, chatID string) ([]chat.Message, error) {
	return s.history(ctx, user, chatID, 0)
}

// HistoryTail returns at most the last n stored messages of the user's
// chat, oldest first. n <= 0 means all of them.
func (s *Store) HistoryTail(ctx context.Context, user, chatID string, n int) ([]chat.Message, error) {
	return s.history(ctx, user, chatID, n)
}

func (s *Store) history(ctx context.Context, user, chatID string, n int) ([]chat.Message, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var rows *sql.Rows
	if n > 0 {
		rows, err = s.stmts.historyTail.QueryContext(ctx, user, chatID, n)
	} else {
		rows, err = s.stmts.history.QueryContext(ctx, user, chatID)
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	msgs := []chat.Message{}
	for rows.Next() {
		var m chat.Message
		var calls, failure, parts, said string
		if err := rows.Scan(&m.Role, &m.Content, &m.Name, &m.ToolCallID, &calls, &failure, &parts, &said); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		if calls != "" {
			if err := json.Unmarshal([]byte(calls), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("history: tool calls of a %s message: %w", m.Role, err)
			}
		}
		if failure != "" {
			if err := json.Unmarshal([]byte(failure), &m.Failure); err != nil {
				return nil, fmt.Errorf("history: error of a %s message: %w", m.Role, err)
			}
		}
		if parts != "" {
			if err := json.Unmarshal([]byte(parts), &m.Parts); err != nil {
				return nil, fmt.Errorf("history: content parts of a %s message: %w", m.Role, err)
			}
		}
		if said != "" {
			if err := json.Unmarshal([]byte(said), &m.Said); err != nil {
				return nil, fmt.Errorf("history: messages said into a %s message: %w", m.Role, err)
			}
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return msgs, nil
}

// AppendMessages adds msgs at the end of the user's chat, creating the chat
// when it is new, in one transaction: either all are stored or none.
// assistantID records which assistant wrote the turn ("" keeps the previous
// one). Appending no messages is a no-op.
func (s *Store) AppendMessages(ctx context.Context, user, chatID, assistantID string, msgs ...chat.Message) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkWrite(user, chatID, assistantID, msgs); err != nil {
		return fmt.Errorf("append messages: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	now := time.Now().UnixMilli()
	err = s.tx(ctx, func(tx *sql.Tx) error {
		// The chat's row first: it is locked until the commit, so
		// concurrent appends number their messages one after the other.
		var count int64
		if err := tx.StmtContext(ctx, s.stmts.appendChat).QueryRowContext(ctx,
			user, chatID, assistantID, title(msgs), len(msgs), now).Scan(&count); err != nil {
			return err
		}
		return s.insertMessages(ctx, tx, user, chatID, count-int64(len(msgs)), now, msgs)
	})
	if err != nil {
		return fmt.Errorf("append messages to chat %q: %w", chatID, err)
	}
	return nil
}

// ReplaceHistory replaces the whole stored history of the user's chat with
// msgs (creating the chat when it is new), in one transaction. An empty msgs
// leaves the chat with no messages; use DeleteChat to forget it.
func (s *Store) ReplaceHistory(ctx context.Context, user, chatID, assistantID string, msgs []chat.Message) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkWrite(user, chatID, assistantID, msgs); err != nil {
		return fmt.Errorf("replace history: %w", err)
	}
	now := time.Now().UnixMilli()
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, s.stmts.replaceChat).ExecContext(ctx,
			user, chatID, assistantID, title(msgs), len(msgs), now); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.stmts.deleteMessages).ExecContext(ctx, user, chatID); err != nil {
			return err
		}
		return s.insertMessages(ctx, tx, user, chatID, 0, now, msgs)
	})
	if err != nil {
		return fmt.Errorf("replace history of chat %q: %w", chatID, err)
	}
	return nil
}

// ListChats returns the user's chats, most recently updated first.
func (s *Store) ListChats(ctx context.Context, user string) ([]ChatInfo, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkID("user id", user); err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	rows, err := s.stmts.listChats.QueryContext(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	chats := []ChatInfo{}
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, fmt.Errorf("list chats: %w", err)
		}
		chats = append(chats, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	return chats, nil
}

// Chat returns one chat's info; found is false when the user has no such
// chat.
func (s *Store) Chat(ctx context.Context, user, chatID string) (info ChatInfo, found bool, err error) {
	done, err := s.enter()
	if err != nil {
		return ChatInfo{}, false, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return ChatInfo{}, false, fmt.Errorf("chat: %w", err)
	}
	c, err := scanChat(s.stmts.getChat.QueryRowContext(ctx, user, chatID))
	if errors.Is(err, sql.ErrNoRows) {
		return ChatInfo{}, false, nil
	}
	if err != nil {
		return ChatInfo{}, false, fmt.Errorf("chat: %w", err)
	}
	return c, true, nil
}

// DeleteChat removes the user's chat, its messages, its stored responses,
// its remembered approvals and its workspace last-use record. Deleting a chat that does not exist is not an error.
// Hook memory (see MemClear) and the workspace folder are not touched: the
// caller owns their naming.
func (s *Store) DeleteChat(ctx context.Context, user, chatID string) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return fmt.Errorf("delete chat: %w", err)
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		// The chat's row first, as writers of the chat lock it.
		for _, st := range []*sql.Stmt{s.stmts.deleteChat, s.stmts.deleteMessages, s.stmts.forgetWorkspace, s.stmts.deleteResponses, s.stmts.approvals.forget} {
			if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, user, chatID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete chat %q: %w", chatID, err)
	}
	return nil
}

type scanner interface{ Scan(...any) error }

func scanChat(r scanner) (ChatInfo, error) {
	var c ChatInfo
	var created, updated int64
	if err := r.Scan(&c.ID, &c.AssistantID, &c.Title, &c.Messages, &created, &updated); err != nil {
		return ChatInfo{}, err
	}
	c.Created, c.Updated = fromMillis(created), fromMillis(updated)
	return c, nil
}

// insertRows bounds the messages of one INSERT (SQLite allows 32766
// parameters per statement).
const insertRows = 256

// insertMessages stores msgs as the chat's messages last+1, last+2, ...,
// a few hundred per statement. A message's tool calls, error, content
// parts and the messages said into its turn are kept as JSON ("" for
// none).
func (s *Store) insertMessages(ctx context.Context, tx *sql.Tx, user, chatID string, last, now int64, msgs []chat.Message) error {
	const cols = 12
	for len(msgs) > 0 {
		n := min(len(msgs), insertRows)
		args := make([]any, 0, n*cols)
		for i, m := range msgs[:n] {
			calls, failure, parts, said := "", "", "", ""
			if len(m.ToolCalls) > 0 {
				b, err := json.Marshal(m.ToolCalls)
				if err != nil {
					return fmt.Errorf("tool calls of message %d: %w", i, err)
				}
				calls = string(b)
			}
			if m.Failure.Code != "" {
				b, err := json.Marshal(m.Failure)
				if err != nil {
					return fmt.Errorf("error of message %d: %w", i, err)
				}
				failure = string(b)
			}
			if len(m.Parts) > 0 {
				b, err := json.Marshal(m.Parts)
				if err != nil {
					return fmt.Errorf("content parts of message %d: %w", i, err)
				}
				parts = string(b)
			}
			if len(m.Said) > 0 {
				b, err := json.Marshal(m.Said)
				if err != nil {
					return fmt.Errorf("messages said into message %d: %w", i, err)
				}
				said = string(b)
			}
			last++
			args = append(args, user, chatID, last, m.Role, s.be.blob(m.Content), m.Name, m.ToolCallID, calls, failure, parts, said, now)
		}
		q := `INSERT INTO messages (user_id, chat_id, seq, role, content, name, tool_call_id, tool_calls, error, parts, said, created_at) VALUES ` + values(n, cols)
		if _, err := tx.ExecContext(ctx, rebind(s.drv, q), args...); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

func checkChat(user, chatID string) error {
	if err := checkID("user id", user); err != nil {
		return err
	}
	return checkID("chat id", chatID)
}

func checkWrite(user, chatID, assistantID string, msgs []chat.Message) error {
	if err := checkChat(user, chatID); err != nil {
		return err
	}
	if err := checkText("assistant id", assistantID, MaxIDLen); err != nil {
		return err
	}
	for i, m := range msgs {
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return fmt.Errorf("%w: message %d has role %q (want system, user, assistant or tool)", ErrInvalid, i, m.Role)
		}
		if len(m.Content) > MaxMessageBytes {
			return fmt.Errorf("%w: message %d is %d bytes long (at most %d)", ErrInvalid, i, len(m.Content), MaxMessageBytes)
		}
		if n := partsBytes(m.Parts); n > MaxPartsBytes {
			return fmt.Errorf("%w: message %d's content parts are %d bytes long (at most %d)", ErrInvalid, i, n, MaxPartsBytes)
		}
		if err := checkText(fmt.Sprintf("message %d's name", i), m.Name, MaxIDLen); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("message %d's tool call id", i), m.ToolCallID, MaxIDLen); err != nil {
			return err
		}
	}
	return nil
}

// partsBytes is about the size of parts as stored: their text and
// image addresses.
func partsBytes(parts []chat.Part) int {
	n := 0
	for _, p := range parts {
		n += len(p.Text)
		if p.ImageURL != nil {
			n += len(p.ImageURL.URL)
		}
	}
	return n
}

// title derives a chat title from the first user message of msgs.
func title(msgs []chat.Message) string {
	for _, m := range msgs {
		if m.Role != chat.RoleUser {
			continue
		}
		// A title is text on every driver: invalid UTF-8 and NUL bytes
		// (which a message may hold) are replaced.
		t := strings.Join(strings.Fields(strings.ToValidUTF8(strings.ReplaceAll(m.Content, "\x00", " "), "\uFFFD")), " ")
		if t == "" {
			continue
		}
		if utf8.RuneCountInString(t) > titleLen {
			r := []rune(t)
			t = strings.TrimSpace(string(r[:titleLen-1])) + "…"
		}
		return t
	}
	return ""
}
