package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
