-- 6: the error a stored turn failed or stopped with (JSON {code,
-- message}, '' for an answer that ended well), on its assistant message.

ALTER TABLE messages ADD COLUMN error TEXT NOT NULL DEFAULT '';
