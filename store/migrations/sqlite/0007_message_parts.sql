-- 7: the content parts of a message with images (JSON [{type, text,
-- image_url: {url, detail}}], '' for a message of text only; content
-- holds its text either way).

ALTER TABLE messages ADD COLUMN parts TEXT NOT NULL DEFAULT '';
