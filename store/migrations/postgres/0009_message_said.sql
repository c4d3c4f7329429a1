-- 9: the messages a user sent into a running turn, on its assistant
-- message (JSON [{content, at}], '' for none).

ALTER TABLE messages ADD COLUMN said TEXT NOT NULL DEFAULT '';
