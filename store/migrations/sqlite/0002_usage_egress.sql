-- 2: a turn's egress traffic per host (chat.Usage.Egress).

CREATE TABLE usage_egress (
	usage_id       INTEGER NOT NULL REFERENCES usage (id) ON DELETE CASCADE,
	host           TEXT    NOT NULL,
	requests       INTEGER NOT NULL,
	denied         INTEGER NOT NULL,
	bytes_sent     INTEGER NOT NULL,
	bytes_received INTEGER NOT NULL,
	PRIMARY KEY (usage_id, host)
) WITHOUT ROWID;
