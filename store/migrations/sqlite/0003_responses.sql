-- 3: an assistant message's tool calls (JSON, '' for none); the Responses
-- API's stored responses.

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
