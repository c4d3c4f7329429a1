package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MaxRuleLen bounds an approval rule the store remembers, in bytes.
const MaxRuleLen = 4096

// approvalStatements are the prepared statements of remembered approvals.
type approvalStatements struct {
	remember, remembered, forget *sql.Stmt
}

func (st *statements) approvalQueries() []query {
	ap := &st.approvals
	return []query{
		{dst: &ap.remember, sql: `INSERT INTO approvals_remembered (user_id, chat_id, rule, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (user_id, chat_id, rule) DO NOTHING`},
		{dst: &ap.remembered, sql: `SELECT 1 FROM approvals_remembered WHERE user_id = $1 AND chat_id = $2 AND rule = $3`},
		{dst: &ap.forget, sql: `DELETE FROM approvals_remembered WHERE user_id = $1 AND chat_id = $2`},
	}
}

// RememberApproval records that the user allowed, for the rest of the
// chat, every tool call the approval rule asks about (an answer with
// "remember"). Recording a rule twice is not an error; DeleteChat and
// ForgetApprovals drop the chat's. A rule that is empty, over MaxRuleLen
// bytes or not UTF-8 is ErrInvalid.
func (s *Store) RememberApproval(ctx context.Context, user, chatID, rule string) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkApproval(user, chatID, rule); err != nil {
		return fmt.Errorf("remember approval: %w", err)
	}
	if _, err := s.stmts.approvals.remember.ExecContext(ctx, user, chatID, rule, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("remember approval in chat %q: %w", chatID, err)
	}
	return nil
}

// ApprovalRemembered reports whether the user allowed the rule for the
// rest of the chat (RememberApproval).
func (s *Store) ApprovalRemembered(ctx context.Context, user, chatID, rule string) (bool, error) {
	done, err := s.enter()
	if err != nil {
		return false, err
	}
	defer done()
	if err := checkApproval(user, chatID, rule); err != nil {
		return false, fmt.Errorf("remembered approval: %w", err)
	}
	var one int
	switch err := s.stmts.approvals.remembered.QueryRowContext(ctx, user, chatID, rule).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remembered approval in chat %q: %w", chatID, err)
	}
	return true, nil
}

// ForgetApprovals drops the rules the user allowed for the rest of the
// chat. A chat without any is not an error.
func (s *Store) ForgetApprovals(ctx context.Context, user, chatID string) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return fmt.Errorf("forget approvals: %w", err)
	}
	if _, err := s.stmts.approvals.forget.ExecContext(ctx, user, chatID); err != nil {
		return fmt.Errorf("forget approvals of chat %q: %w", chatID, err)
	}
	return nil
}

func checkApproval(user, chatID, rule string) error {
	if err := checkChat(user, chatID); err != nil {
		return err
	}
	if rule == "" {
		return fmt.Errorf("%w: the rule is empty", ErrInvalid)
	}
	return checkText("rule", rule, MaxRuleLen)
}
