package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/skills"
)

// Statuses of a skill proposal.
const (
	// ProposalPending: drafted by an agent, waiting for its user.
	ProposalPending = "pending"
	// ProposalApproved: one of the user's skills for the assistant.
	ProposalApproved = "approved"
	// ProposalRejected: refused by the user (Reason says why); kept.
	ProposalRejected = "rejected"
	// ProposalRetired: was approved, then replaced by a newer approval of
	// its name or removed by its user (Reason says which); kept.
	ProposalRetired = "retired"
)

// Statuses of a proposal's test turn.
const (
	TestRunning = "running"
	// TestCompleted: the turn ended normally (see SkillTest for what it did).
	TestCompleted = "completed"
	// TestFailed: the turn ended with an error (SkillTest.Error).
	TestFailed = "failed"
)

// MaxReasonLen bounds the reason a proposal is rejected or retired for.
const MaxReasonLen = 4096

// SkillProposal is a skill an agent drafted for its user, and what became
// of it. A user's approved proposals are the user's skills for the
// assistant, at most one approved per name.
type SkillProposal struct {
	ID          string `json:"id"`
	UserID      string `json:"user_id"`
	AssistantID string `json:"assistant_id"`
	// ChatID is the chat whose agent drafted it.
	ChatID string `json:"chat_id"`
	// Draft is the skill: name, description, instructions and files (a
	// listing leaves instructions and files out).
	skills.Draft
	// TestPrompt is the prompt the agent suggested for trying it ("" when
	// none).
	TestPrompt string    `json:"test_prompt,omitempty"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	DecidedAt  time.Time `json:"decided_at,omitzero"`
	// Test is the last test turn (nil before the first).
	Test *SkillTest `json:"test,omitempty"`
}

// SkillTest is a test turn of a proposal: a short turn in a throwaway
// sandbox with the skill installed, and what it showed.
type SkillTest struct {
	// Status is TestRunning, TestCompleted or TestFailed.
	Status string `json:"status"`
	Prompt string `json:"prompt"`
	// ChatID is the throwaway chat the turn ran as (unique per test).
	ChatID     string    `json:"chat_id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Answer is the agent's answer (cut to a few KiB).
	Answer string `json:"answer,omitempty"`
	// ToolCalls are the tools the agent called, in order.
	ToolCalls []TestToolCall `json:"tool_calls,omitempty"`
	Usage     chat.Usage     `json:"usage"`
	// SessionSkills are the skills the CLI reported when its session
	// started; SkillLoaded says the proposed skill was among them, and
	// SkillUsed that the agent invoked it or read its files.
	SessionSkills []string `json:"session_skills,omitempty"`
	SkillLoaded   bool     `json:"skill_loaded"`
	SkillUsed     bool     `json:"skill_used"`
	// Notices are the notice codes the turn raised.
	Notices []string `json:"notices,omitempty"`
	// Error is why the turn failed (TestFailed).
	Error *TestError `json:"error,omitempty"`
}

// TestToolCall is one tool call of a test turn.
type TestToolCall struct {
	Name    string `json:"name"`
	IsError bool   `json:"is_error,omitempty"`
}

// TestError is a failed test turn's error code and message.
type TestError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ProposalFilter selects proposals in a listing ("" matches any).
type ProposalFilter struct {
	AssistantID string
	Status      string
	// Limit bounds the listing (0: 100; at most 1000).
	Limit int
}

// CreateSkillProposal stores a new pending proposal. It fails with
// ErrLimit when the user already has maxPending pending proposals for the
// assistant (0: no limit).
func (s *Store) CreateSkillProposal(ctx context.Context, p *SkillProposal, maxPending int) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkProposal(p); err != nil {
		return fmt.Errorf("create skill proposal: %w", err)
	}
	files, err := json.Marshal(p.Files)
	if err != nil {
		return fmt.Errorf("create skill proposal: %w", err)
	}
	test, err := encodeTest(p.Test)
	if err != nil {
		return fmt.Errorf("create skill proposal: %w", err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if maxPending > 0 {
			// On PostgreSQL two proposals made at once may both pass: the
			// limit bounds a user's backlog, it is not a quota.
			var n int
			if err := tx.StmtContext(ctx, s.stmts.skills.countPending).QueryRowContext(ctx, p.UserID, p.AssistantID).Scan(&n); err != nil {
				return fmt.Errorf("count pending proposals: %w", err)
			}
			if n >= maxPending {
				return fmt.Errorf("%w: %d proposals of assistant %s wait for approval (at most %d)", ErrLimit, n, p.AssistantID, maxPending)
			}
		}
		_, err := tx.StmtContext(ctx, s.stmts.skills.insertProposal).ExecContext(ctx,
			p.UserID, p.ID, p.AssistantID, p.ChatID, p.Name, p.Description, p.Instructions, string(files),
			p.TestPrompt, p.Status, p.Reason, millis(p.CreatedAt), millis(p.DecidedAt), test)
		if err != nil {
			return fmt.Errorf("create skill proposal %q: %w", p.ID, err)
		}
		return nil
	})
}

func checkProposal(p *SkillProposal) error {
	for _, c := range []struct{ what, v string }{
		{"user id", p.UserID}, {"proposal id", p.ID}, {"assistant id", p.AssistantID}, {"chat id", p.ChatID}, {"skill name", p.Name},
	} {
		if err := checkID(c.what, c.v); err != nil {
			return err
		}
	}
	switch p.Status {
	case ProposalPending, ProposalApproved, ProposalRejected, ProposalRetired:
	default:
		return fmt.Errorf("%w: unknown proposal status %q", ErrInvalid, p.Status)
	}
	n := len(p.Description) + len(p.Instructions) + len(p.TestPrompt) + len(p.Reason)
	texts := []struct{ what, v string }{{"description", p.Description}, {"instructions", p.Instructions}, {"test prompt", p.TestPrompt}, {"reason", p.Reason}}
	for _, f := range p.Files {
		n += len(f.Path) + len(f.Content)
		texts = append(texts, struct{ what, v string }{"file path", f.Path}, struct{ what, v string }{"file " + f.Path, f.Content})
	}
	if n > MaxMessageBytes {
		return fmt.Errorf("%w: proposal is %d bytes long (at most %d)", ErrInvalid, n, MaxMessageBytes)
	}
	for _, t := range texts {
		if err := checkText(t.what, t.v, MaxMessageBytes); err != nil {
			return err
		}
	}
	return nil
}

func checkReason(reason string) error {
	return checkText("reason", reason, MaxReasonLen)
}

func encodeTest(t *SkillTest) (string, error) {
	if t == nil {
		return "", nil
	}
	b, err := json.Marshal(t)
	return string(b), err
}

// proposalColumns are a proposal's columns in the order scanProposal reads
// them; a listing reads empty instructions and files.
const (
	proposalColumns = `id, user_id, assistant_id, chat_id, name, description, instructions, files, test_prompt,
		status, reason, created_at, decided_at, test`
	proposalSummary = `id, user_id, assistant_id, chat_id, name, description, '', '', test_prompt,
		status, reason, created_at, decided_at, test`
)

// skillStatements are the prepared statements of skill proposals.
type skillStatements struct {
	insertProposal, countPending, getProposal, lockProposal, lockName, listProposals, approvedSkills *sql.Stmt
	retireApproved, decideProposal, setProposalTest                                                  *sql.Stmt
}

func (st *statements) skillQueries() []query {
	sk := &st.skills
	get := `SELECT ` + proposalColumns + ` FROM skill_proposals WHERE user_id = $1 AND id = $2`
	lockName := `SELECT id FROM skill_proposals WHERE user_id = $1 AND assistant_id = $2 AND name = $3 ORDER BY id`
	return []query{
		{dst: &sk.insertProposal, sql: `INSERT INTO skill_proposals (user_id, id, assistant_id, chat_id, name, description,
			instructions, files, test_prompt, status, reason, created_at, decided_at, test)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`},
		{dst: &sk.countPending, sql: `SELECT COUNT(*) FROM skill_proposals WHERE user_id = $1 AND assistant_id = $2 AND status = 'pending'`},
		{dst: &sk.getProposal, sql: get},
		// lockProposal reads a proposal to change it: on PostgreSQL its row
		// stays locked until the transaction ends (SQLite's write
		// transaction holds the whole database).
		{dst: &sk.lockProposal, sql: get, byDriver: map[string]string{"postgres": get + ` FOR UPDATE`}},
		// lockName locks every proposal of a skill name, in one order, so
		// that two approvals of one name run one after the other.
		{dst: &sk.lockName, sql: lockName, byDriver: map[string]string{"postgres": lockName + ` FOR UPDATE`}},
		{dst: &sk.listProposals, sql: `SELECT ` + proposalSummary + ` FROM skill_proposals
			WHERE user_id = $1 AND ($2 = '' OR assistant_id = $2) AND ($3 = '' OR status = $3)
			ORDER BY created_at DESC, id DESC LIMIT $4`},
		{dst: &sk.approvedSkills, sql: `SELECT ` + proposalColumns + ` FROM skill_proposals
			WHERE user_id = $1 AND ($2 = '' OR assistant_id = $2) AND status = 'approved' ORDER BY assistant_id, name`},
		{dst: &sk.retireApproved, sql: `UPDATE skill_proposals SET status = 'retired', reason = $1, decided_at = $2
			WHERE user_id = $3 AND assistant_id = $4 AND name = $5 AND status = 'approved'`},
		{dst: &sk.decideProposal, sql: `UPDATE skill_proposals SET status = $1, reason = $2, decided_at = $3 WHERE user_id = $4 AND id = $5`},
		{dst: &sk.setProposalTest, sql: `UPDATE skill_proposals SET test = $1 WHERE user_id = $2 AND id = $3`},
	}
}

func scanProposal(row interface{ Scan(...any) error }) (*SkillProposal, error) {
	var p SkillProposal
	var files, test string
	var created, decided int64
	if err := row.Scan(&p.ID, &p.UserID, &p.AssistantID, &p.ChatID, &p.Name, &p.Description, &p.Instructions, &files,
		&p.TestPrompt, &p.Status, &p.Reason, &created, &decided, &test); err != nil {
		return nil, err
	}
	p.CreatedAt, p.DecidedAt = fromMillis(created), fromMillis(decided)
	if files != "" {
		if err := json.Unmarshal([]byte(files), &p.Files); err != nil {
			return nil, fmt.Errorf("proposal %q: files: %w", p.ID, err)
		}
	}
	if test != "" {
		p.Test = &SkillTest{}
		if err := json.Unmarshal([]byte(test), p.Test); err != nil {
			return nil, fmt.Errorf("proposal %q: test: %w", p.ID, err)
		}
	}
	return &p, nil
}

// SkillProposal returns the user's proposal id; another user's proposals
// are never found (ErrNotFound).
func (s *Store) SkillProposal(ctx context.Context, user, id string) (*SkillProposal, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkID("user id", user); err != nil {
		return nil, fmt.Errorf("skill proposal: %w", err)
	}
	return proposal(ctx, s.stmts.skills.getProposal, user, id)
}

// proposal reads one proposal with stmt (getProposal, or lockProposal in
// a transaction).
func proposal(ctx context.Context, stmt *sql.Stmt, user, id string) (*SkillProposal, error) {
	p, err := scanProposal(stmt.QueryRowContext(ctx, user, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("skill proposal %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("skill proposal %q: %w", id, err)
	}
	return p, nil
}

// SkillProposals lists the user's proposals that match f, newest first,
// without their instructions and files.
func (s *Store) SkillProposals(ctx context.Context, user string, f ProposalFilter) ([]*SkillProposal, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkID("user id", user); err != nil {
		return nil, fmt.Errorf("skill proposals: %w", err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := s.stmts.skills.listProposals.QueryContext(ctx, user, f.AssistantID, f.Status, limit)
	if err != nil {
		return nil, fmt.Errorf("skill proposals: %w", err)
	}
	return collectProposals(rows)
}

func collectProposals(rows *sql.Rows) ([]*SkillProposal, error) {
	defer rows.Close()
	out := []*SkillProposal{}
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, fmt.Errorf("skill proposals: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("skill proposals: %w", err)
	}
	return out, nil
}

// ApprovedSkills returns the user's approved proposals for the assistant,
// in full, by name: the user's skills.
func (s *Store) ApprovedSkills(ctx context.Context, user, assistantID string) ([]*SkillProposal, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkID("user id", user); err != nil {
		return nil, fmt.Errorf("approved skills: %w", err)
	}
	rows, err := s.stmts.skills.approvedSkills.QueryContext(ctx, user, assistantID)
	if err != nil {
		return nil, fmt.Errorf("approved skills: %w", err)
	}
	return collectProposals(rows)
}

// DecideSkillProposal approves or rejects (status) the user's pending
// proposal id at time at, with a reason, and returns it as it is after. An
// approval retires the user's approved proposal of the same name for the
// assistant, if any: the newer one replaces it. A proposal that is not
// pending is ErrConflict.
func (s *Store) DecideSkillProposal(ctx context.Context, user, id, status, reason string, at time.Time) (*SkillProposal, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if status != ProposalApproved && status != ProposalRejected {
		return nil, fmt.Errorf("decide skill proposal: %w: status %q is neither approved nor rejected", ErrInvalid, status)
	}
	if err := checkReason(reason); err != nil {
		return nil, fmt.Errorf("decide skill proposal: %w", err)
	}
	var out *SkillProposal
	err = s.tx(ctx, func(tx *sql.Tx) error {
		// Every proposal of the name is locked before this one is read
		// again: two approvals of one name (which retire each other's)
		// never interleave, and locks are always taken in one order.
		p, err := proposal(ctx, tx.StmtContext(ctx, s.stmts.skills.getProposal), user, id)
		if err != nil {
			return err
		}
		rows, err := tx.StmtContext(ctx, s.stmts.skills.lockName).QueryContext(ctx, user, p.AssistantID, p.Name)
		if err != nil {
			return fmt.Errorf("lock skill %q: %w", p.Name, err)
		}
		if err := errors.Join(drain(rows), rows.Close()); err != nil {
			return fmt.Errorf("lock skill %q: %w", p.Name, err)
		}
		if p, err = proposal(ctx, tx.StmtContext(ctx, s.stmts.skills.lockProposal), user, id); err != nil {
			return err
		}
		if p.Status != ProposalPending {
			return fmt.Errorf("skill proposal %q: %w: it is %s", id, ErrConflict, p.Status)
		}
		if status == ProposalApproved {
			if _, err := tx.StmtContext(ctx, s.stmts.skills.retireApproved).ExecContext(ctx,
				"replaced by proposal "+id, millis(at), user, p.AssistantID, p.Name); err != nil {
				return fmt.Errorf("retire skill %q: %w", p.Name, err)
			}
		}
		if _, err := tx.StmtContext(ctx, s.stmts.skills.decideProposal).ExecContext(ctx, status, reason, millis(at), user, id); err != nil {
			return fmt.Errorf("decide skill proposal %q: %w", id, err)
		}
		p.Status, p.Reason, p.DecidedAt = status, reason, fromMillis(millis(at))
		out = p
		return nil
	})
	return out, err
}

// RetireSkill removes one of the user's skills: its approved proposal for
// the assistant named name becomes retired, with the reason. ErrNotFound
// when the user has no such skill.
func (s *Store) RetireSkill(ctx context.Context, user, assistantID, name, reason string, at time.Time) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkReason(reason); err != nil {
		return fmt.Errorf("retire skill: %w", err)
	}
	res, err := s.stmts.skills.retireApproved.ExecContext(ctx, reason, millis(at), user, assistantID, name)
	if err != nil {
		return fmt.Errorf("retire skill %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("skill %q of assistant %s: %w", name, assistantID, ErrNotFound)
	}
	return nil
}

// StartSkillTest records t (status running) as the proposal's test, unless
// a test of it runs: one started at or after staleBefore is ErrConflict
// (an older one is taken for a test whose server stopped).
func (s *Store) StartSkillTest(ctx context.Context, user, id string, t *SkillTest, staleBefore time.Time) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	enc, err := encodeTest(t)
	if err != nil {
		return fmt.Errorf("start skill test: %w", err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		p, err := proposal(ctx, tx.StmtContext(ctx, s.stmts.skills.lockProposal), user, id)
		if err != nil {
			return err
		}
		if c := p.Test; c != nil && c.Status == TestRunning && !c.StartedAt.Before(staleBefore) {
			return fmt.Errorf("skill proposal %q: %w: a test of it runs since %s", id, ErrConflict, c.StartedAt.UTC().Format(time.RFC3339))
		}
		if _, err := tx.StmtContext(ctx, s.stmts.skills.setProposalTest).ExecContext(ctx, enc, user, id); err != nil {
			return fmt.Errorf("start skill test of %q: %w", id, err)
		}
		return nil
	})
}

// FinishSkillTest records the outcome t of the proposal's test that ran as
// t.ChatID; when another test has started since, the outcome is dropped
// (ErrConflict).
func (s *Store) FinishSkillTest(ctx context.Context, user, id string, t *SkillTest) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	enc, err := encodeTest(t)
	if err != nil {
		return fmt.Errorf("finish skill test: %w", err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		p, err := proposal(ctx, tx.StmtContext(ctx, s.stmts.skills.lockProposal), user, id)
		if err != nil {
			return err
		}
		if p.Test == nil || p.Test.ChatID != t.ChatID {
			return fmt.Errorf("skill proposal %q: %w: another test has started", id, ErrConflict)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.skills.setProposalTest).ExecContext(ctx, enc, user, id); err != nil {
			return fmt.Errorf("finish skill test of %q: %w", id, err)
		}
		return nil
	})
}

// drain reads rows to their end.
func drain(rows *sql.Rows) error {
	for rows.Next() {
	}
	return rows.Err()
}
