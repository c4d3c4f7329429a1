package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Namespace names a hook memory space ("user", "chat", ...). The store
// gives no meaning to it: values in different namespaces, or of different
// owners in one namespace, never see each other.
type Namespace = string

// MemGet returns the JSON value stored under key for owner in namespace ns;
// found is false (and the value nil) when there is none.
func (s *Store) MemGet(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error) {
	done, err := s.enter()
	if err != nil {
		return nil, false, err
	}
	defer done()
	if err := checkMem(ns, owner, key); err != nil {
		return nil, false, fmt.Errorf("memory get: %w", err)
	}
	var v string
	err = s.stmts.memGet.QueryRowContext(ctx, ns, owner, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("memory get %s/%q: %w", ns, key, err)
	}
	return json.RawMessage(v), true, nil
}

// MemSet stores val (which must be valid JSON of at most MaxValueBytes)
// under key for owner in namespace ns, replacing any previous value.
func (s *Store) MemSet(ctx context.Context, ns Namespace, owner, key string, val json.RawMessage) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkMem(ns, owner, key); err != nil {
		return fmt.Errorf("memory set: %w", err)
	}
	switch {
	case len(val) > MaxValueBytes:
		return fmt.Errorf("memory set %q: %w: the value is %d bytes of JSON (at most %d)", key, ErrInvalid, len(val), MaxValueBytes)
	case !json.Valid(val):
		return fmt.Errorf("memory set %q: %w: the value is not valid JSON", key, ErrInvalid)
	case !utf8.Valid(val):
		return fmt.Errorf("memory set %q: %w: the value is not valid UTF-8 (JSON text is UTF-8)", key, ErrInvalid)
	}
	if _, err := s.stmts.memSet.ExecContext(ctx, ns, owner, key, string(val), time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("memory set %s/%q: %w", ns, key, err)
	}
	return nil
}

// MemDel removes key for owner in namespace ns. Removing a missing key is
// not an error.
func (s *Store) MemDel(ctx context.Context, ns Namespace, owner, key string) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := checkMem(ns, owner, key); err != nil {
		return fmt.Errorf("memory delete: %w", err)
	}
	if _, err := s.stmts.memDel.ExecContext(ctx, ns, owner, key); err != nil {
		return fmt.Errorf("memory delete %s/%q: %w", ns, key, err)
	}
	return nil
}

// MemKeys returns owner's keys in namespace ns, sorted; an empty slice when
// there are none.
func (s *Store) MemKeys(ctx context.Context, ns Namespace, owner string) ([]string, error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkOwner(ns, owner); err != nil {
		return nil, fmt.Errorf("memory keys: %w", err)
	}
	rows, err := s.stmts.memKeys.QueryContext(ctx, ns, owner)
	if err != nil {
		return nil, fmt.Errorf("memory keys %s: %w", ns, err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("memory keys %s: %w", ns, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory keys %s: %w", ns, err)
	}
	return keys, nil
}

// MemClear removes all of owner's keys in namespace ns and returns how many
// there were.
func (s *Store) MemClear(ctx context.Context, ns Namespace, owner string) (int64, error) {
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	if err := checkOwner(ns, owner); err != nil {
		return 0, fmt.Errorf("memory clear: %w", err)
	}
	res, err := s.stmts.memClear.ExecContext(ctx, ns, owner)
	if err != nil {
		return 0, fmt.Errorf("memory clear %s: %w", ns, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("memory clear %s: %w", ns, err)
	}
	return n, nil
}

// MemLen returns how many keys owner has in namespace ns.
func (s *Store) MemLen(ctx context.Context, ns Namespace, owner string) (int64, error) {
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	if err := checkOwner(ns, owner); err != nil {
		return 0, fmt.Errorf("memory len: %w", err)
	}
	var n int64
	if err := s.stmts.memLen.QueryRowContext(ctx, ns, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("memory len %s: %w", ns, err)
	}
	return n, nil
}

// MemGetDel removes key for owner in namespace ns and returns the value it
// had, in one step: of two callers at once, one gets it.
func (s *Store) MemGetDel(ctx context.Context, ns Namespace, owner, key string) (json.RawMessage, bool, error) {
	done, err := s.enter()
	if err != nil {
		return nil, false, err
	}
	defer done()
	if err := checkMem(ns, owner, key); err != nil {
		return nil, false, fmt.Errorf("memory getdel: %w", err)
	}
	var v string
	err = s.stmts.memGetDel.QueryRowContext(ctx, ns, owner, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("memory getdel %s/%q: %w", ns, key, err)
	}
	return json.RawMessage(v), true, nil
}

// ErrNotInteger is the cause of MemIncr's error on a value that is not an
// integer.
var ErrNotInteger = errors.New("the value is not an integer")

// MemIncr adds delta to the integer stored under key (a missing key counts
// as 0) and returns the new value. It is atomic on every driver and across
// servers sharing a database: it swaps the value it read, and reads again
// when another caller changed it in between. A value that is not an
// integer is left as it was (ErrNotInteger).
func (s *Store) MemIncr(ctx context.Context, ns Namespace, owner, key string, delta int64) (int64, error) {
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	if err := checkMem(ns, owner, key); err != nil {
		return 0, fmt.Errorf("memory incr: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("memory incr %s/%q: %w", ns, key, err)
		}
		var old string
		err := s.stmts.memGet.QueryRowContext(ctx, ns, owner, key).Scan(&old)
		now := time.Now().UnixMilli()
		if errors.Is(err, sql.ErrNoRows) {
			res, err := s.stmts.memAdd.ExecContext(ctx, ns, owner, key, strconv.FormatInt(delta, 10), now)
			if err != nil {
				return 0, fmt.Errorf("memory incr %s/%q: %w", ns, key, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				return delta, nil
			}
			continue // another caller made it first
		}
		if err != nil {
			return 0, fmt.Errorf("memory incr %s/%q: %w", ns, key, err)
		}
		cur, ok := jsonInt(old)
		if !ok {
			return 0, fmt.Errorf("memory incr %s/%q: %w (it is %s)", ns, key, ErrNotInteger, shorten(old))
		}
		next := cur + delta
		if (delta > 0 && next < cur) || (delta < 0 && next > cur) {
			return 0, fmt.Errorf("memory incr %s/%q: %d%+d overflows a 64-bit integer: %w", ns, key, cur, delta, ErrInvalid)
		}
		res, err := s.stmts.memSwap.ExecContext(ctx, ns, owner, key, old, strconv.FormatInt(next, 10), now)
		if err != nil {
			return 0, fmt.Errorf("memory incr %s/%q: %w", ns, key, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return next, nil
		}
	}
}

// jsonInt reads a JSON number that is an integer.
func jsonInt(s string) (int64, bool) {
	var n json.Number
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func checkOwner(ns, owner string) error {
	if err := checkID("memory namespace", ns); err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w: memory owner is empty", ErrInvalid)
	}
	return checkText("memory owner", owner, MaxOwnerLen)
}

func checkMem(ns, owner, key string) error {
	if err := checkOwner(ns, owner); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: memory key is empty", ErrInvalid)
	}
	return checkText("memory key", key, MaxKeyLen)
}
