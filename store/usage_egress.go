package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

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
		case !utf8.ValidString(h.Host) || strings.IndexByte(h.Host, 0) >= 0:
			return fmt.Errorf("%w: egress host %q: want UTF-8 without NUL bytes", ErrInvalid, h.Host)
		case seen[h.Host]:
			return fmt.Errorf("%w: egress host %q listed twice", ErrInvalid, h.Host)
		case h.Requests < 0 || h.Denied < 0 || h.BytesSent < 0 || h.BytesReceived < 0:
			return fmt.Errorf("%w: egress host %q: negative counts", ErrInvalid, h.Host)
		}
		seen[h.Host] = true
	}
	return nil
}

// insertEgress stores the egress lines of usage record id, a few hundred
// per statement.
func (s *Store) insertEgress(ctx context.Context, tx *sql.Tx, id int64, hosts []chat.HostUsage) error {
	const cols = 6
	for len(hosts) > 0 {
		n := min(len(hosts), insertRows)
		args := make([]any, 0, n*cols)
		for _, h := range hosts[:n] {
			args = append(args, id, h.Host, h.Requests, h.Denied, h.BytesSent, h.BytesReceived)
		}
		q := `INSERT INTO usage_egress (usage_id, host, requests, denied, bytes_sent, bytes_received) VALUES ` + values(n, cols)
		if _, err := tx.ExecContext(ctx, rebind(s.drv, q), args...); err != nil {
			return err
		}
		hosts = hosts[n:]
	}
	return nil
}

// egressSummary totals egress per host over the usage records of user
// (every user for "") from millisecond from on, sorted by host.
func (s *Store) egressSummary(ctx context.Context, user string, from int64) ([]chat.HostUsage, error) {
	rows, err := s.stmts.egressSummary.QueryContext(ctx, user, from)
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
