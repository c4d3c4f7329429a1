-- 3: an assistant message's tool calls (JSON, '' for none); the Responses
-- API's stored responses (the body as bytes, as the client received it).

ALTER TABLE messages ADD COLUMN tool_calls TEXT NOT NULL DEFAULT '';

CREATE TABLE responses (
	seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	user_id      TEXT COLLATE "C" NOT NULL,
	id           TEXT COLLATE "C" NOT NULL,
	chat_id      TEXT COLLATE "C" NOT NULL,
	assistant_id TEXT COLLATE "C" NOT NULL,
	body         BYTEA  NOT NULL,
	created_at   BIGINT NOT NULL,
	UNIQUE (user_id, id)
);
CREATE INDEX responses_by_chat ON responses (user_id, chat_id, seq);
