package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are the schema versions in order: migrations[i] moves the
// database from user_version i to i+1. Never edit a released entry; append a
// new one.
var migrations = []string{
	// 1: chats, messages, memory, usage, workspaces.
	`
CREATE TABLE chats (
	user_id       TEXT    NOT NULL,
	chat_id       TEXT    NOT NULL,
	assistant_id  TEXT    NOT NULL DEFAULT '',
	title         TEXT    NOT NULL DEFAULT '',
	message_count INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (user_id, chat_id)
) WITHOUT ROWID;
CREATE INDEX chats_by_update ON chats (user_id, updated_at DESC);

CREATE TABLE messages (
	user_id      TEXT    NOT NULL,
	chat_id      TEXT    NOT NULL,
	seq          INTEGER NOT NULL,
	role         TEXT    NOT NULL,
	content      TEXT    NOT NULL,
	name         TEXT    NOT NULL DEFAULT '',
	tool_call_id TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (user_id, chat_id, seq)
) WITHOUT ROWID;

CREATE TABLE memory (
	ns         TEXT    NOT NULL,
	owner      TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (ns, owner, key)
) WITHOUT ROWID;

CREATE TABLE usage (
	id                    INTEGER PRIMARY KEY,
	time                  INTEGER NOT NULL,
	user_id               TEXT    NOT NULL,
	chat_id               TEXT    NOT NULL,
	assistant_id          TEXT    NOT NULL,
	connector             TEXT    NOT NULL,
	model                 TEXT    NOT NULL,
	input_tokens          INTEGER NOT NULL,
	output_tokens         INTEGER NOT NULL,
	cache_read_tokens     INTEGER NOT NULL,
	cache_creation_tokens INTEGER NOT NULL,
	cost_usd              REAL    NOT NULL,
	turns                 INTEGER NOT NULL,
	duration_ms           INTEGER NOT NULL,
	error                 TEXT    NOT NULL
);
CREATE INDEX usage_by_user_time ON usage (user_id, time);
CREATE INDEX usage_by_time ON usage (time);

CREATE TABLE workspaces (
	user_id   TEXT    NOT NULL,
	chat_id   TEXT    NOT NULL,
	last_used INTEGER NOT NULL,
	PRIMARY KEY (user_id, chat_id)
) WITHOUT ROWID;
CREATE INDEX workspaces_by_last_used ON workspaces (last_used);
`,
	// 2: a turn's egress traffic per host (chat.Usage.Egress).
	`
CREATE TABLE usage_egress (
	usage_id       INTEGER NOT NULL REFERENCES usage (id) ON DELETE CASCADE,
	host           TEXT    NOT NULL,
	requests       INTEGER NOT NULL,
	denied         INTEGER NOT NULL,
	bytes_sent     INTEGER NOT NULL,
	bytes_received INTEGER NOT NULL,
	PRIMARY KEY (usage_id, host)
) WITHOUT ROWID;
`,
	// 3: an assistant message's tool calls (JSON, '' for none); the
	// Responses API's stored responses.
	`
ALTER TABLE messages ADD COLUMN tool_calls TEXT NOT NULL DEFAULT '';

CREATE TABLE responses (
	seq          INTEGER PRIMARY KEY,
	user_id      TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	chat_id      TEXT    NOT NULL,
	assistant_id TEXT    NOT NULL,
	body         TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	UNIQUE (user_id, id)
);
CREATE INDEX responses_by_chat ON responses (user_id, chat_id, seq);
`,
	// 4: a title the user gave a chat (RenameChat) is kept when its
	// history is replaced.
	`ALTER TABLE chats ADD COLUMN title_set INTEGER NOT NULL DEFAULT 0;`,
}

// SchemaVersion is the schema version this build writes.
var SchemaVersion = len(migrations)

// migrate applies the pending migrations in one write transaction. The
// version is read inside the transaction, so two processes opening the same
// new database at once do not both apply a migration.
func (s *Store) migrate(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > len(migrations) {
			return fmt.Errorf("%w: the file has version %d, this build knows up to %d; upgrade agentbox or use another data_root",
				ErrSchemaTooNew, v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
			}
		}
		if v == len(migrations) {
			return nil
		}
		// PRAGMA takes no bound parameters; the value is our own integer.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	})
}

// statements are the store's prepared statements, prepared once by Open.
type statements struct {
	all []*sql.Stmt

	history, historyTail, maxSeq, insertMessage, deleteMessages        *sql.Stmt
	upsertChat, listChats, getChat, deleteChat                         *sql.Stmt
	memGet, memSet, memDel, memKeys                                    *sql.Stmt
	insertUsage, usageTotals, usageByModel                             *sql.Stmt
	touchWorkspace, workspaceLastUse, staleWorkspaces, forgetWorkspace *sql.Stmt
	saveResponse, getResponse, latestResponse, deleteResponses         *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	list := []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.history, `SELECT role, content, name, tool_call_id, tool_calls FROM messages
			WHERE user_id = ? AND chat_id = ? ORDER BY seq`},
		{&st.historyTail, `SELECT role, content, name, tool_call_id, tool_calls FROM (
			SELECT seq, role, content, name, tool_call_id, tool_calls FROM messages
			WHERE user_id = ? AND chat_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq`},
		{&st.maxSeq, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE user_id = ? AND chat_id = ?`},
		{&st.insertMessage, `INSERT INTO messages (user_id, chat_id, seq, role, content, name, tool_call_id, tool_calls, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.deleteMessages, `DELETE FROM messages WHERE user_id = ? AND chat_id = ?`},
		{&st.upsertChat, `INSERT INTO chats (user_id, chat_id, assistant_id, title, message_count, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET
				assistant_id = CASE WHEN ?3 = '' THEN assistant_id ELSE ?3 END,
				title = CASE WHEN title_set = 0 AND (title = '' OR ?7) THEN ?4 ELSE title END,
				message_count = ?5,
				updated_at = ?6`},
		{&st.listChats, `SELECT chat_id, assistant_id, title, message_count, created_at, updated_at
			FROM chats WHERE user_id = ? ORDER BY updated_at DESC, chat_id`},
		{&st.getChat, `SELECT chat_id, assistant_id, title, message_count, created_at, updated_at
			FROM chats WHERE user_id = ? AND chat_id = ?`},
		{&st.deleteChat, `DELETE FROM chats WHERE user_id = ? AND chat_id = ?`},
		{&st.memGet, `SELECT value FROM memory WHERE ns = ? AND owner = ? AND key = ?`},
		{&st.memSet, `INSERT INTO memory (ns, owner, key, value, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (ns, owner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`},
		{&st.memDel, `DELETE FROM memory WHERE ns = ? AND owner = ? AND key = ?`},
		{&st.memKeys, `SELECT key FROM memory WHERE ns = ? AND owner = ? ORDER BY key`},
		{&st.insertUsage, `INSERT INTO usage (time, user_id, chat_id, assistant_id, connector, model,
			input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd, turns, duration_ms, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.usageTotals, `SELECT COUNT(*), COALESCE(SUM(error <> ''), 0),
			COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
			COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_creation_tokens), 0),
			COALESCE(SUM(cost_usd), 0), COALESCE(SUM(turns), 0), COALESCE(SUM(duration_ms), 0)
			FROM usage WHERE (?1 = '' OR user_id = ?1) AND time >= ?2`},
		{&st.usageByModel, `SELECT connector, model, COUNT(*), COALESCE(SUM(error <> ''), 0),
			SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_creation_tokens),
			SUM(cost_usd), SUM(turns), SUM(duration_ms)
			FROM usage WHERE (?1 = '' OR user_id = ?1) AND time >= ?2
			GROUP BY connector, model ORDER BY connector, model`},
		{&st.touchWorkspace, `INSERT INTO workspaces (user_id, chat_id, last_used) VALUES (?, ?, ?)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET last_used = MAX(last_used, excluded.last_used)`},
		{&st.workspaceLastUse, `SELECT last_used FROM workspaces WHERE user_id = ? AND chat_id = ?`},
		{&st.staleWorkspaces, `SELECT user_id, chat_id, last_used FROM workspaces WHERE last_used < ?
			ORDER BY last_used, user_id, chat_id`},
		{&st.forgetWorkspace, `DELETE FROM workspaces WHERE user_id = ? AND chat_id = ?`},
		{&st.saveResponse, `INSERT INTO responses (user_id, id, chat_id, assistant_id, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`},
		{&st.getResponse, `SELECT id, chat_id, assistant_id, body, created_at FROM responses WHERE user_id = ? AND id = ?`},
		{&st.latestResponse, `SELECT id FROM responses WHERE user_id = ? AND chat_id = ?
			ORDER BY seq DESC LIMIT 1`},
		{&st.deleteResponses, `DELETE FROM responses WHERE user_id = ? AND chat_id = ?`},
	}
	for _, p := range list {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.query), err)
		}
		*p.dst = stmt
		st.all = append(st.all, stmt)
	}
	return nil
}

func (st *statements) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	st.all = nil
	return errors.Join(errs...)
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
