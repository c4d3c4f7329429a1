-- 5: skills agents drafted for their users (pending; approved: the user's
-- skills, one per name; rejected and retired ones are kept with their
-- reason), with the last test turn of each (JSON, '' before the first).

CREATE TABLE skill_proposals (
	user_id      TEXT COLLATE "C" NOT NULL,
	id           TEXT COLLATE "C" NOT NULL,
	assistant_id TEXT COLLATE "C" NOT NULL,
	chat_id      TEXT COLLATE "C" NOT NULL,
	name         TEXT COLLATE "C" NOT NULL,
	description  TEXT   NOT NULL,
	instructions TEXT   NOT NULL,
	files        TEXT   NOT NULL,
	test_prompt  TEXT   NOT NULL,
	status       TEXT COLLATE "C" NOT NULL,
	reason       TEXT   NOT NULL,
	created_at   BIGINT NOT NULL,
	decided_at   BIGINT NOT NULL,
	test         TEXT   NOT NULL,
	PRIMARY KEY (user_id, id)
);
CREATE INDEX skill_proposals_by_assistant ON skill_proposals (user_id, assistant_id, status, created_at);
CREATE UNIQUE INDEX skill_proposals_approved ON skill_proposals (user_id, assistant_id, name) WHERE status = 'approved';
