-- 4: a title the user gave a chat (RenameChat) is kept when its history
-- is replaced.

ALTER TABLE chats ADD COLUMN title_set INTEGER NOT NULL DEFAULT 0;
