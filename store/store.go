// Package store is agentbox's embedded persistence: chat history per (user,
// chat), the hooks' memory, usage records and workspace last-use times, in
// one SQLite database file (modernc.org/sqlite, pure Go, no cgo).
//
// The database runs in WAL mode with a busy timeout; every write transaction
// takes the write lock when it begins (BEGIN IMMEDIATE), so concurrent
// writers queue on the busy timeout instead of failing on a lock upgrade.
// The schema is versioned with PRAGMA user_version and migrated forward by
// Open. A *Store is safe for concurrent use by many goroutines.
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
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Limits on what the store accepts. They protect the database from a client
// or hook that sends unbounded data; callers should reject larger input
// before it reaches the store with a message of their own.
const (
	// MaxIDLen bounds user, chat, assistant ids, namespaces and owners.
	MaxIDLen = 256
	// MaxOwnerLen bounds a memory owner, which may combine ids
	// ("user/chat").
	MaxOwnerLen = 4*MaxIDLen + 3
	// MaxKeyLen bounds a memory key.
	MaxKeyLen = 512
	// MaxValueBytes bounds one memory value (encoded JSON).
	MaxValueBytes = 1 << 20
	// MaxMessageBytes bounds one chat message's content.
	MaxMessageBytes = 8 << 20
)

// Errors returned by the store. Match them with errors.Is.
var (
	// ErrInvalid marks bad input (an empty or too long id, a value that is
	// not JSON, ...). The wrapped message says which argument and why.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store is closed")
	// ErrSchemaTooNew means the database was written by a newer agentbox.
	ErrSchemaTooNew = errors.New("database schema is newer than this agentbox")
)

// busyTimeout is how long a statement waits for another connection's write
// lock before it fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Store is an open database. Create it with Open and release it with Close.
type Store struct {
	db   *sql.DB
	path string

	mu     sync.RWMutex // guards closed against use during Close
	closed bool

	stmts statements
}

// Open opens (creating when absent) the database at path, applies pending
// schema migrations, and prepares its statements. The parent folder is
// created with mode 0700 and a new database file with mode 0600, since chat
// history is private. path must be a file path (":memory:" is refused: each
// pooled connection would see a different empty database).
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open store %q: %w: want a database file path", path, ErrInvalid)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %q: %w: the path may not contain '?' or '#'", path, ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store: create folder: %w", err)
	}
	// Create the file ourselves so it gets 0600 rather than SQLite's 0644.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}

	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", abs+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	// WAL allows many readers beside one writer; a small pool is plenty and
	// bounds file handles. Idle connections are kept so pragmas are not
	// re-applied on every burst.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)

	s := &Store{db: db, path: abs}
	if err := s.migrate(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", abs, err), db.Close())
	}
	if err := s.stmts.prepare(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("open store %s: %w", abs, err), s.stmts.close(), db.Close())
	}
	return s, nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// Close releases the prepared statements and the database. It waits for
// calls in progress; calls after Close return ErrClosed. Close is
// idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// Let SQLite refresh its query planner statistics; cheap, bounded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, optErr := s.db.ExecContext(ctx, "PRAGMA optimize")
	return errors.Join(optErr, s.stmts.close(), s.db.Close())
}

// enter guards one call against a concurrent Close; the caller defers the
// returned function.
func (s *Store) enter() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	return s.mu.RUnlock, nil
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE), committing when fn
// returns nil and rolling back otherwise.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// checkID validates one id-like argument.
func checkID(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(v) > MaxIDLen:
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalid, what, len(v), MaxIDLen)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

// millis converts t to Unix milliseconds (0 for the zero time).
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMillis is the inverse of millis.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
