-- 8: the approval rules a chat's user allowed for the rest of the chat (an
-- answer with "remember"), so that they outlive the server; DeleteChat
-- drops a chat's.

CREATE TABLE approvals_remembered (
	user_id    TEXT    NOT NULL,
	chat_id    TEXT    NOT NULL,
	rule       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (user_id, chat_id, rule)
) WITHOUT ROWID;
