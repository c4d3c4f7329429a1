package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentbox/agentbox/chat"
)

// maxHostLen bounds a host of an egress usage line ("name:port").
const maxHostLen = 300

// checkEgress validates a turn's egress usage lines.
func checkEgress(hosts []chat.HostUsage) error {
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		switch {
		case h.Host == "" || len(h.Host) > maxHostLen:
			return fmt.Errorf("%w: egress host %q: want 1 to %d bytes", ErrInvalid, h.Host, maxHostLen)
		case seen[h.Host]:
			return fmt.Errorf("%w: egress host %q listed twice", ErrInvalid, h.Host)
		case h.Requests < 0 || h.Denied < 0 || h.BytesSent < 0 || h.BytesReceived < 0:
			return fmt.Errorf("%w: egress host %q: negative counts", ErrInvalid, h.Host)
		}
		seen[h.Host] = true
	}
	return nil
}

// insertEgress stores the egress lines of usage record id.
func insertEgress(ctx context.Context, tx *sql.Tx, id int64, hosts []chat.HostUsage) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage_egress (usage_id, host, requests, denied, bytes_sent, bytes_received)
		VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, h := range hosts {
		if _, err := stmt.ExecContext(ctx, id, h.Host, h.Requests, h.Denied, h.BytesSent, h.BytesReceived); err != nil {
			return err
		}
	}
	return nil
}

// egressSummary totals egress per host over the usage records of user
// (every user for "") from millisecond from on, sorted by host.
func (s *Store) egressSummary(ctx context.Context, user string, from int64) ([]chat.HostUsage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT e.host, SUM(e.requests), SUM(e.denied), SUM(e.bytes_sent), SUM(e.bytes_received)
		FROM usage_egress e JOIN usage u ON u.id = e.usage_id
		WHERE (?1 = '' OR u.user_id = ?1) AND u.time >= ?2
		GROUP BY e.host ORDER BY e.host`, user, from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []chat.HostUsage
	for rows.Next() {
		var h chat.HostUsage
		if err := rows.Scan(&h.Host, &h.Requests, &h.Denied, &h.BytesSent, &h.BytesReceived); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
