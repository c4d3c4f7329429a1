-- 1: chats, messages, hook memory, usage, workspace last use. Databases
-- from before schema_migrations have PRAGMA user_version = 1 for it.

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
