package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// UsageRecord is what one chat turn cost, recorded when the turn ends
// (successfully or not).
type UsageRecord struct {
	// Time is when the turn ended (zero: now).
	Time        time.Time
	UserID      string
	ChatID      string
	AssistantID string
	// Connector is the connector id (or executor name) that served the turn.
	Connector string
	Model     string
	Usage     chat.Usage
	// Error is the turn's error code ("" on success).
	Error      string
	DurationMS int64
}

// UsageSummary totals usage records.
type UsageSummary struct {
	// Requests is the number of recorded turns; Errors how many failed.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// Usage sums the turns' usage; its DurationMS sums the records'
	// DurationMS.
	Usage chat.Usage `json:"usage"`
	// ByModel breaks the totals down by connector and model, sorted.
	ByModel []ModelUsage `json:"by_model"`
}

// ModelUsage is the part of a UsageSummary served by one connector and model.
type ModelUsage struct {
	Connector string     `json:"connector"`
	Model     string     `json:"model"`
	Requests  int64      `json:"requests"`
	Errors    int64      `json:"errors"`
	Usage     chat.Usage `json:"usage"`
}

// RecordUsage stores one usage record. UserID is required; the other ids
// may be empty (for example a turn rejected before its chat was known).
func (s *Store) RecordUsage(ctx context.Context, r UsageRecord) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkID("user id", r.UserID); err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	for _, f := range []struct{ what, v string }{
		{"chat id", r.ChatID}, {"assistant id", r.AssistantID}, {"connector", r.Connector},
		{"model", r.Model}, {"error code", r.Error},
	} {
		if err := checkText(f.what, f.v, MaxIDLen); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	u := r.Usage
	args := []any{t.UnixMilli(), r.UserID, r.ChatID, r.AssistantID, r.Connector, r.Model,
		u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.CostUSD, u.Turns, r.DurationMS, r.Error}
	if len(u.Egress) == 0 {
		if _, err = s.stmts.insertUsage.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
		return nil
	}
	if err := checkEgress(u.Egress); err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var id int64
		if err := tx.StmtContext(ctx, s.stmts.insertUsage).QueryRowContext(ctx, args...).Scan(&id); err != nil {
			return err
		}
		return s.insertEgress(ctx, tx, id, u.Egress)
	})
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}

// UsageSummary totals the usage records of user (all users when user is
// "") at or after since (all records when since is zero).
func (s *Store) UsageSummary(ctx context.Context, user string, since time.Time) (UsageSummary, error) {
	done, err := s.enter()
	if err != nil {
		return UsageSummary{}, err
	}
	defer done()
	if err := checkText("user id", user, MaxIDLen); err != nil {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	from := millis(since)
	var sum UsageSummary
	u := &sum.Usage
	err = s.stmts.usageTotals.QueryRowContext(ctx, user, from).Scan(&sum.Requests, &sum.Errors,
		&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheCreationTokens, &u.CostUSD, &u.Turns, &u.DurationMS)
	if err != nil {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	rows, err := s.stmts.usageByModel.QueryContext(ctx, user, from)
	if err != nil {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	defer rows.Close()
	sum.ByModel = []ModelUsage{}
	for rows.Next() {
		var m ModelUsage
		u := &m.Usage
		if err := rows.Scan(&m.Connector, &m.Model, &m.Requests, &m.Errors, &u.InputTokens, &u.OutputTokens,
			&u.CacheReadTokens, &u.CacheCreationTokens, &u.CostUSD, &u.Turns, &u.DurationMS); err != nil {
			return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
		}
		sum.ByModel = append(sum.ByModel, m)
	}
	if err := rows.Err(); err != nil {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	if sum.Usage.Egress, err = s.egressSummary(ctx, user, from); err != nil {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", err)
	}
	return sum, nil
}

// WorkspaceUse is when a chat's workspace was last used.
type WorkspaceUse struct {
	UserID   string
	ChatID   string
	LastUsed time.Time
}

// TouchWorkspace records that the user's chat workspace was used at t (zero:
// now). A time earlier than the recorded one is ignored, so concurrent
// requests never move the last use backwards.
func (s *Store) TouchWorkspace(ctx context.Context, user, chatID string, t time.Time) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return fmt.Errorf("touch workspace: %w", err)
	}
	if t.IsZero() {
		t = time.Now()
	}
	if _, err := s.stmts.touchWorkspace.ExecContext(ctx, user, chatID, t.UnixMilli()); err != nil {
		return fmt.Errorf("touch workspace: %w", err)
	}
	return nil
}

// WorkspaceLastUse returns when the user's chat workspace was last used;
// found is false when no use was recorded.
func (s *Store) WorkspaceLastUse(ctx context.Context, user, chatID string) (t time.Time, found bool, err error) {
	done, err := s.enter()
	if err != nil {
		return time.Time{}, false, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return time.Time{}, false, fmt.Errorf("workspace last use: %w", err)
	}
	var ms int64
	err = s.stmts.workspaceLastUse.QueryRowContext(ctx, user, chatID).Scan(&ms)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("workspace last use: %w", err)
	}
	return fromMillis(ms), true, nil
}

// StaleWorkspaces lists the workspaces last used before before, oldest
// first. The retention job removes their folders (skipping any in use) and
// then calls ForgetWorkspace.
func (s *Store) StaleWorkspaces(ctx context.Context, before time.Time) ([]WorkspaceUse, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.stmts.staleWorkspaces.QueryContext(ctx, millis(before))
	if err != nil {
		return nil, fmt.Errorf("stale workspaces: %w", err)
	}
	defer rows.Close()
	out := []WorkspaceUse{}
	for rows.Next() {
		var w WorkspaceUse
		var ms int64
		if err := rows.Scan(&w.UserID, &w.ChatID, &ms); err != nil {
			return nil, fmt.Errorf("stale workspaces: %w", err)
		}
		w.LastUsed = fromMillis(ms)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stale workspaces: %w", err)
	}
	return out, nil
}

// ForgetWorkspace removes the last-use record of the user's chat workspace.
// Forgetting an unknown workspace is not an error.
func (s *Store) ForgetWorkspace(ctx context.Context, user, chatID string) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return fmt.Errorf("forget workspace: %w", err)
	}
	if _, err := s.stmts.forgetWorkspace.ExecContext(ctx, user, chatID); err != nil {
		return fmt.Errorf("forget workspace: %w", err)
	}
	return nil
}
