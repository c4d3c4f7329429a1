package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Response is a stored response of the Responses API (created with
// store: true): the chat it belongs to and the response object as the
// client received it.
type Response struct {
	ID          string
	ChatID      string
	AssistantID string
	// Body is the response object (JSON).
	Body    []byte
	Created time.Time
}

// SaveResponse stores r for user. Ids are unique per user; saving an id
// twice is an error.
func (s *Store) SaveResponse(ctx context.Context, user string, r Response) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkChat(user, r.ChatID); err != nil {
		return fmt.Errorf("save response: %w", err)
	}
	if err := checkID("response id", r.ID); err != nil {
		return fmt.Errorf("save response: %w", err)
	}
	if err := checkText("assistant id", r.AssistantID, MaxIDLen); err != nil {
		return fmt.Errorf("save response: %w", err)
	}
	if len(r.Body) > MaxMessageBytes {
		return fmt.Errorf("save response: %w: body is %d bytes long (at most %d)", ErrInvalid, len(r.Body), MaxMessageBytes)
	}
	if _, err := s.stmts.saveResponse.ExecContext(ctx, user, r.ID, r.ChatID, r.AssistantID, s.be.blob(string(r.Body)), millis(r.Created)); err != nil {
		return fmt.Errorf("save response %q: %w", r.ID, err)
	}
	return nil
}

// Response returns the user's stored response id; found is false when the
// user has none of that id (another user's responses are never found).
func (s *Store) Response(ctx context.Context, user, id string) (r Response, found bool, err error) {
	done, err := s.enter()
	if err != nil {
		return Response{}, false, err
	}
	defer done()
	if err := checkID("user id", user); err != nil {
		return Response{}, false, fmt.Errorf("response: %w", err)
	}
	if checkID("response id", id) != nil {
		return Response{}, false, nil // no response has such an id
	}
	var body string
	var created int64
	err = s.stmts.getResponse.QueryRowContext(ctx, user, id).Scan(&r.ID, &r.ChatID, &r.AssistantID, &body, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Response{}, false, nil
	case err != nil:
		return Response{}, false, fmt.Errorf("response %q: %w", id, err)
	}
	r.Body, r.Created = []byte(body), fromMillis(created)
	return r, true, nil
}

// LatestResponse returns the id of the response of the user's chat that
// was stored last, "" when it has none.
func (s *Store) LatestResponse(ctx context.Context, user, chatID string) (string, error) {
	done, err := s.enter()
	if err != nil {
		return "", err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return "", fmt.Errorf("latest response: %w", err)
	}
	var id string
	err = s.stmts.latestResponse.QueryRowContext(ctx, user, chatID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest response of chat %q: %w", chatID, err)
	}
	return id, nil
}
