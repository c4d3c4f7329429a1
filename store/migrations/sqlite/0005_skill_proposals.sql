-- 5: skills agents drafted for their users (pending; approved: the user's
-- skills, one per name; rejected and retired ones are kept with their
-- reason), with the last test turn of each (JSON, '' before the first).

CREATE TABLE skill_proposals (
	user_id      TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	assistant_id TEXT    NOT NULL,
	chat_id      TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	description  TEXT    NOT NULL,
	instructions TEXT    NOT NULL,
	files        TEXT    NOT NULL,
	test_prompt  TEXT    NOT NULL,
	status       TEXT    NOT NULL,
	reason       TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	decided_at   INTEGER NOT NULL,
	test         TEXT    NOT NULL,
	PRIMARY KEY (user_id, id)
) WITHOUT ROWID;
CREATE INDEX skill_proposals_by_assistant ON skill_proposals (user_id, assistant_id, status, created_at);
CREATE UNIQUE INDEX skill_proposals_approved ON skill_proposals (user_id, assistant_id, name) WHERE status = 'approved';
