-- 8: the approval rules a chat's user allowed for the rest of the chat (an
-- answer with "remember"), so that they outlive the server; DeleteChat
-- drops a chat's.

CREATE TABLE approvals_remembered (
	user_id    TEXT COLLATE "C" NOT NULL,
	chat_id    TEXT COLLATE "C" NOT NULL,
	rule       TEXT COLLATE "C" NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (user_id, chat_id, rule)
);
