-- 1: chats, messages, hook memory, usage, workspace last use.
--
-- Ids and keys are compared and sorted byte by byte (COLLATE "C"), as on
-- SQLite and in Go, whatever the database's locale. Times are Unix
-- milliseconds. A message's content is bytes (any bytes, NUL included);
-- everything else is text the store validates as UTF-8 without NUL.
-- chats.message_count is the chat's highest message seq: appends number
-- their messages from it.

CREATE TABLE chats (
	user_id       TEXT COLLATE "C" NOT NULL,
	chat_id       TEXT COLLATE "C" NOT NULL,
	assistant_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
	title         TEXT   NOT NULL DEFAULT '',
	message_count BIGINT NOT NULL DEFAULT 0,
	created_at    BIGINT NOT NULL,
	updated_at    BIGINT NOT NULL,
	PRIMARY KEY (user_id, chat_id)
);
CREATE INDEX chats_by_update ON chats (user_id, updated_at DESC);

CREATE TABLE messages (
	user_id      TEXT COLLATE "C" NOT NULL,
	chat_id      TEXT COLLATE "C" NOT NULL,
	seq          BIGINT NOT NULL,
	role         TEXT   NOT NULL,
	content      BYTEA  NOT NULL,
	name         TEXT   NOT NULL DEFAULT '',
	tool_call_id TEXT   NOT NULL DEFAULT '',
	created_at   BIGINT NOT NULL,
	PRIMARY KEY (user_id, chat_id, seq)
);

CREATE TABLE memory (
	ns         TEXT COLLATE "C" NOT NULL,
	owner      TEXT COLLATE "C" NOT NULL,
	key        TEXT COLLATE "C" NOT NULL,
	value      TEXT   NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (ns, owner, key)
);

CREATE TABLE usage (
	id                    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	time                  BIGINT NOT NULL,
	user_id               TEXT COLLATE "C" NOT NULL,
	chat_id               TEXT COLLATE "C" NOT NULL,
	assistant_id          TEXT COLLATE "C" NOT NULL,
	connector             TEXT COLLATE "C" NOT NULL,
	model                 TEXT COLLATE "C" NOT NULL,
	input_tokens          BIGINT NOT NULL,
	output_tokens         BIGINT NOT NULL,
	cache_read_tokens     BIGINT NOT NULL,
	cache_creation_tokens BIGINT NOT NULL,
	cost_usd              DOUBLE PRECISION NOT NULL,
	turns                 BIGINT NOT NULL,
	duration_ms           BIGINT NOT NULL,
	error                 TEXT   NOT NULL
);
CREATE INDEX usage_by_user_time ON usage (user_id, time);
CREATE INDEX usage_by_time ON usage (time);

CREATE TABLE workspaces (
	user_id   TEXT COLLATE "C" NOT NULL,
	chat_id   TEXT COLLATE "C" NOT NULL,
	last_used BIGINT NOT NULL,
	PRIMARY KEY (user_id, chat_id)
);
CREATE INDEX workspaces_by_last_used ON workspaces (last_used);
