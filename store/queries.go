package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// statements are the store's prepared statements, prepared once by Open.
type statements struct {
	all []*sql.Stmt

	history, historyTail, appendChat, replaceChat, deleteMessages      *sql.Stmt
	listChats, getChat, deleteChat, claimChat                          *sql.Stmt
	memGet, memSet, memDel, memKeys, memClear                          *sql.Stmt
	memLen, memGetDel, memAdd, memSwap                                 *sql.Stmt
	insertUsage, usageTotals, usageByModel, egressSummary              *sql.Stmt
	touchWorkspace, workspaceLastUse, staleWorkspaces, forgetWorkspace *sql.Stmt
	saveResponse, getResponse, latestResponse, deleteResponses         *sql.Stmt
	renameChat, firstUserMessage                                       *sql.Stmt
	skills                                                             skillStatements
	approvals                                                          approvalStatements
}

// query is one statement: SQL both drivers accept, with $1-style
// placeholders (rebound to ?1 for SQLite), and a driver's own text where
// they differ. Where a statement updates a row on conflict, columns of the
// stored row are qualified with the table's name (PostgreSQL requires it).
type query struct {
	dst      **sql.Stmt
	sql      string
	byDriver map[string]string
}

func (st *statements) queries() []query {
	return slices.Concat(st.coreQueries(), st.skillQueries(), st.approvalQueries())
}

func (st *statements) coreQueries() []query {
	return []query{
		{dst: &st.history, sql: `SELECT role, content, name, tool_call_id, tool_calls, error, parts, said FROM messages
			WHERE user_id = $1 AND chat_id = $2 ORDER BY seq`},
		{dst: &st.historyTail, sql: `SELECT role, content, name, tool_call_id, tool_calls, error, parts, said FROM (
			SELECT seq, role, content, name, tool_call_id, tool_calls, error, parts, said FROM messages
			WHERE user_id = $1 AND chat_id = $2 ORDER BY seq DESC LIMIT $3) AS tail ORDER BY seq`},
		// appendChat creates or updates the chat for an append of $5
		// messages and returns its new message count; the row stays
		// locked until the transaction ends, so appends to one chat
		// number their messages one after the other.
		{dst: &st.appendChat, sql: `INSERT INTO chats (user_id, chat_id, assistant_id, title, message_count, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET
				assistant_id = CASE WHEN $3 = '' THEN chats.assistant_id ELSE $3 END,
				title = CASE WHEN chats.title_set = 0 AND chats.title = '' THEN $4 ELSE chats.title END,
				message_count = chats.message_count + $5,
				updated_at = $6
			RETURNING message_count`},
		// replaceChat is appendChat for a history replaced by $5 messages.
		{dst: &st.replaceChat, sql: `INSERT INTO chats (user_id, chat_id, assistant_id, title, message_count, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET
				assistant_id = CASE WHEN $3 = '' THEN chats.assistant_id ELSE $3 END,
				title = CASE WHEN chats.title_set = 0 THEN $4 ELSE chats.title END,
				message_count = $5,
				updated_at = $6`},
		{dst: &st.deleteMessages, sql: `DELETE FROM messages WHERE user_id = $1 AND chat_id = $2`},
		{dst: &st.listChats, sql: `SELECT chat_id, assistant_id, title, message_count, created_at, updated_at
			FROM chats WHERE user_id = $1 ORDER BY updated_at DESC, chat_id`},
		{dst: &st.getChat, sql: `SELECT chat_id, assistant_id, title, message_count, created_at, updated_at
			FROM chats WHERE user_id = $1 AND chat_id = $2`},
		{dst: &st.deleteChat, sql: `DELETE FROM chats WHERE user_id = $1 AND chat_id = $2`},
		{dst: &st.renameChat, sql: `UPDATE chats SET title = $1, title_set = $2, updated_at = $3
			WHERE user_id = $4 AND chat_id = $5`},
		{dst: &st.firstUserMessage, sql: `SELECT content FROM messages WHERE user_id = $1 AND chat_id = $2 AND role = 'user'
			ORDER BY seq LIMIT 1`},
		// claimChat binds a chat to an assistant, creating the chat row
		// when new, unless it already has one; RETURNING gives the
		// assistant it has after.
		{dst: &st.claimChat, sql: `INSERT INTO chats (user_id, chat_id, assistant_id, title, message_count, created_at, updated_at)
			VALUES ($1, $2, $3, '', 0, $4, $4)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET
				assistant_id = CASE WHEN chats.assistant_id = '' THEN excluded.assistant_id ELSE chats.assistant_id END
			RETURNING assistant_id`},
		{dst: &st.memGet, sql: `SELECT value FROM memory WHERE ns = $1 AND owner = $2 AND key = $3`},
		{dst: &st.memSet, sql: `INSERT INTO memory (ns, owner, key, value, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (ns, owner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`},
		{dst: &st.memDel, sql: `DELETE FROM memory WHERE ns = $1 AND owner = $2 AND key = $3`},
		{dst: &st.memKeys, sql: `SELECT key FROM memory WHERE ns = $1 AND owner = $2 ORDER BY key`},
		{dst: &st.memClear, sql: `DELETE FROM memory WHERE ns = $1 AND owner = $2`},
		{dst: &st.memLen, sql: `SELECT COUNT(*) FROM memory WHERE ns = $1 AND owner = $2`},
		{dst: &st.memGetDel, sql: `DELETE FROM memory WHERE ns = $1 AND owner = $2 AND key = $3 RETURNING value`},
		{dst: &st.memAdd, sql: `INSERT INTO memory (ns, owner, key, value, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (ns, owner, key) DO NOTHING`},
		{dst: &st.memSwap, sql: `UPDATE memory SET value = $5, updated_at = $6 WHERE ns = $1 AND owner = $2 AND key = $3 AND value = $4`},
		{dst: &st.insertUsage, sql: `INSERT INTO usage (time, user_id, chat_id, assistant_id, connector, model,
			input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd, turns, duration_ms, error)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			RETURNING id`},
		{dst: &st.usageTotals, sql: `SELECT COUNT(*), ` + usageSums + `
			FROM usage WHERE ($1 = '' OR user_id = $1) AND time >= $2`},
		{dst: &st.usageByModel, sql: `SELECT connector, model, COUNT(*), ` + usageSums + `
			FROM usage WHERE ($1 = '' OR user_id = $1) AND time >= $2
			GROUP BY connector, model ORDER BY connector, model`},
		{dst: &st.egressSummary, sql: `SELECT e.host, CAST(SUM(e.requests) AS BIGINT), CAST(SUM(e.denied) AS BIGINT),
			CAST(SUM(e.bytes_sent) AS BIGINT), CAST(SUM(e.bytes_received) AS BIGINT)
			FROM usage_egress e JOIN usage u ON u.id = e.usage_id
			WHERE ($1 = '' OR u.user_id = $1) AND u.time >= $2
			GROUP BY e.host ORDER BY e.host`},
		{dst: &st.touchWorkspace, sql: `INSERT INTO workspaces (user_id, chat_id, last_used) VALUES ($1, $2, $3)
			ON CONFLICT (user_id, chat_id) DO UPDATE SET
				last_used = CASE WHEN excluded.last_used > workspaces.last_used THEN excluded.last_used ELSE workspaces.last_used END`},
		{dst: &st.workspaceLastUse, sql: `SELECT last_used FROM workspaces WHERE user_id = $1 AND chat_id = $2`},
		{dst: &st.staleWorkspaces, sql: `SELECT user_id, chat_id, last_used FROM workspaces WHERE last_used < $1
			ORDER BY last_used, user_id, chat_id`},
		{dst: &st.forgetWorkspace, sql: `DELETE FROM workspaces WHERE user_id = $1 AND chat_id = $2`},
		{dst: &st.saveResponse, sql: `INSERT INTO responses (user_id, id, chat_id, assistant_id, body, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`},
		{dst: &st.getResponse, sql: `SELECT id, chat_id, assistant_id, body, created_at FROM responses WHERE user_id = $1 AND id = $2`},
		{dst: &st.latestResponse, sql: `SELECT id FROM responses WHERE user_id = $1 AND chat_id = $2
			ORDER BY seq DESC LIMIT 1`},
		{dst: &st.deleteResponses, sql: `DELETE FROM responses WHERE user_id = $1 AND chat_id = $2`},
	}
}

// usageSums totals usage columns; integer sums are cast back to BIGINT
// (PostgreSQL sums BIGINT into NUMERIC).
const usageSums = `CAST(COALESCE(SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END), 0) AS BIGINT),
			CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT),
			CAST(COALESCE(SUM(cache_read_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(cache_creation_tokens), 0) AS BIGINT),
			COALESCE(SUM(cost_usd), 0), CAST(COALESCE(SUM(turns), 0) AS BIGINT), CAST(COALESCE(SUM(duration_ms), 0) AS BIGINT)`

func (st *statements) prepare(ctx context.Context, db *sql.DB, drv string) error {
	for _, q := range st.queries() {
		text := q.sql
		if t, ok := q.byDriver[drv]; ok {
			text = t
		}
		stmt, err := db.PrepareContext(ctx, rebind(drv, text))
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(text), err)
		}
		*q.dst = stmt
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

var dollarParam = regexp.MustCompile(`\$([0-9]+)`)

// rebind turns $N placeholders into the driver's: SQLite's ?N (the same
// numbering; $N there would be a named parameter). The store's SQL has no
// '$' but in placeholders.
func rebind(drv, q string) string {
	if drv != "sqlite" {
		return q
	}
	return dollarParam.ReplaceAllString(q, "?$1")
}

// values returns the placeholders of a multi-row VALUES list: rows tuples
// of cols parameters each, numbered from 1.
func values(rows, cols int) string {
	var b strings.Builder
	n := 1
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", n)
			n++
		}
		b.WriteByte(')')
	}
	return b.String()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
