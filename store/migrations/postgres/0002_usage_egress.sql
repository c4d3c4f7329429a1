-- 2: a turn's egress traffic per host (chat.Usage.Egress).

CREATE TABLE usage_egress (
	usage_id       BIGINT NOT NULL REFERENCES usage (id) ON DELETE CASCADE,
	host           TEXT COLLATE "C" NOT NULL,
	requests       BIGINT NOT NULL,
	denied         BIGINT NOT NULL,
	bytes_sent     BIGINT NOT NULL,
	bytes_received BIGINT NOT NULL,
	PRIMARY KEY (usage_id, host)
);
