package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/agentbox/agentbox/internal/chatlock"
)

// busyTimeout is how long a statement waits for another connection's write
// lock before it fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// sqliteBackend is a database file in WAL mode with a busy timeout; every
// write transaction takes the write lock when it begins (BEGIN IMMEDIATE),
// so concurrent writers queue on the busy timeout instead of failing on a
// lock upgrade. Chat locks hold within the process.
type sqliteBackend struct {
	path  string
	db    *sql.DB
	locks *chatlock.Local
}

func openSQLite(ctx context.Context, cfg Config) (*sql.DB, backend, error) {
	path := cfg.Path
	switch {
	case cfg.DSN != "":
		return nil, nil, fmt.Errorf("open store: %w: the sqlite driver takes a path, not a dsn", ErrInvalid)
	case path == "" || path == ":memory:" || strings.HasPrefix(path, "file:"):
		return nil, nil, fmt.Errorf("open store %q: %w: want a database file path", path, ErrInvalid)
	case strings.ContainsAny(path, "?#"):
		return nil, nil, fmt.Errorf("open store %q: %w: the path may not contain '?' or '#'", path, ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, nil, fmt.Errorf("open store: create folder: %w", err)
	}
	// Create the file ourselves so it gets 0600 rather than SQLite's 0644.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}

	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", abs+"?"+q.Encode())
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	// WAL allows many readers beside one writer; a small pool is plenty and
	// bounds file handles. Idle connections are kept so pragmas are not
	// re-applied on every burst.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, &sqliteBackend{path: abs, db: db, locks: chatlock.New()}, nil
}

func (b *sqliteBackend) String() string { return "sqlite " + b.path }

// migrate applies the pending migrations in one write transaction, which
// holds the database's write lock from its start: a second process
// opening the same new database waits, then finds them applied.
//
// Databases from before schema_migrations counted their migrations in
// PRAGMA user_version; the first migrate records those as applied. It
// keeps user_version equal to the schema version, so an older agentbox
// still refuses a newer database.
func (b *sqliteBackend) migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	err = b.migrateTx(ctx, tx, ms)
	if err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}

func (b *sqliteBackend) migrateTx(ctx context.Context, tx *sql.Tx, ms []migration) error {
	var tables, legacy int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&legacy); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if tables == 0 {
		if legacy > len(ms) {
			return tooNew(legacy, "", ms)
		}
		if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		for _, m := range ms[:legacy] {
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("record schema version %d: %w", m.version, err)
			}
		}
	}
	n, err := appliedMigrations(ctx, tx, ms)
	if err != nil {
		return err
	}
	for _, m := range ms[n:] {
		if err := applyMigration(ctx, tx, m, func(q string) string { return rebind("sqlite", q) }); err != nil {
			return err
		}
	}
	if legacy != len(ms) {
		// PRAGMA takes no bound parameters; the value is our own integer.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(ms))); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
	}
	return nil
}

func (b *sqliteBackend) lockChat(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error) {
	return b.locks.Lock(ctx, user, chat, queue, wait)
}

func (b *sqliteBackend) chatTurns(_ context.Context, _ *sql.DB, user, chat string) (int, error) {
	return b.locks.Turns(user, chat), nil
}

func (b *sqliteBackend) sharedLocks() bool { return false }

func (b *sqliteBackend) blob(s string) any { return s }

// close lets SQLite refresh its query planner statistics; cheap, bounded.
func (b *sqliteBackend) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := b.db.ExecContext(ctx, "PRAGMA optimize")
	return err
}
