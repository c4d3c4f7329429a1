// Package store is agentbox's persistence: chat history per (user, chat),
// the chats' assistants, the tool calls users allowed for the rest of a
// chat, the hooks' memory, usage records, workspace last-use times, and
// the lock that serialises each chat's turns. It runs
// on one of two databases, its drivers (Drivers):
//
//   - "sqlite" (the default): one database file under the data root
//     (modernc.org/sqlite, pure Go), for one server. Chat locks hold
//     within the process.
//   - "postgres": a PostgreSQL database (pgx), shared by any number of
//     servers. Chat locks are advisory locks, so a chat's turns run one
//     at a time whichever server takes them; a server that dies releases
//     its locks with its connections.
//
// Both drivers run the same Go code: a query is written once, with $1
// placeholders, in the SQL both accept, and a driver gives its own text
// only where they differ (queries.go). Each driver has its numbered,
// forward-only migrations (migrations/DRIVER/NNNN_name.sql, the same
// numbers and names for both), applied by Open under a lock so that
// servers starting together do not race (migrate.go).
//
// One package rather than one per driver: the drivers differ in SQL text,
// in how they open and migrate, and in their chat lock; everything else (a
// feature's validation, scanning and transactions) is written once.
//
// A *Store is safe for concurrent use by many goroutines.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/chatlock"
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
	// MaxPartsBytes bounds one message's content parts: its images as
	// data: URLs, which came in one request body (app.jsonc
	// limits.request_body), below SQLite's longest value.
	MaxPartsBytes = 512 << 20
)

// Errors returned by the store. Match them with errors.Is.
var (
	// ErrInvalid marks bad input (an empty or too long id, a value that is
	// not JSON, ...). The wrapped message says which argument and why.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store is closed")
	// ErrSchemaTooNew means the database was migrated by a newer agentbox.
	ErrSchemaTooNew = errors.New("database schema is newer than this agentbox")
	// ErrChatQueueFull and ErrChatWait are LockChat's refusals: too many
	// turns wait for the chat, or the wait passed.
	ErrChatQueueFull = chatlock.ErrQueueFull
	ErrChatWait      = chatlock.ErrWait
	// ErrNotFound: the record asked for does not exist (for this user).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the record's state does not allow the change (a skill
	// proposal already decided, a test of it running).
	ErrConflict = errors.New("conflict")
	// ErrLimit: the change would take the user over a limit the caller set.
	ErrLimit = errors.New("limit reached")
)

// Config selects a driver and its database.
type Config struct {
	// Driver is "sqlite" (the default when empty) or "postgres".
	Driver string
	// Path is the SQLite database file.
	Path string
	// DSN is the PostgreSQL connection string, a URL
	// ("postgres://user:pass@host:5432/db?sslmode=verify-full") or
	// key=value pairs.
	DSN string
}

// Store is an open database. Create it with Open or OpenConfig and release
// it with Close.
type Store struct {
	db  *sql.DB
	be  backend
	drv string

	mu     sync.RWMutex // guards closed against use during Close
	closed bool

	stmts statements
}

// Open opens (creating when absent) the SQLite database at path: see
// OpenConfig.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenConfig(ctx, Config{Driver: "sqlite", Path: path})
}

// OpenConfig opens the database cfg names, applies pending schema
// migrations and prepares the store's statements. A database migrated by a
// newer agentbox is refused with ErrSchemaTooNew.
//
// SQLite: the parent folder is created with mode 0700 and a new database
// file with mode 0600, since chat history is private. Path must be a file
// path (":memory:" is refused: each pooled connection would see a
// different empty database).
//
// PostgreSQL: the database must exist; the store's tables are created in
// the first schema of the connection's search_path. PostgreSQL 14 or later
// is required.
func OpenConfig(ctx context.Context, cfg Config) (*Store, error) {
	name := cfg.Driver
	if name == "" {
		name = "sqlite"
	}
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("open store: %w: unknown driver %q (known: %s)", ErrInvalid, cfg.Driver, strings.Join(Drivers(), ", "))
	}
	ms, err := d.migrations()
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db, be, err := d.open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, be: be, drv: name}
	fail := func(err error, more ...error) (*Store, error) {
		return nil, errors.Join(append([]error{fmt.Errorf("open store %s: %w", be, err)}, append(more, be.close(), db.Close())...)...)
	}
	if err := be.migrate(ctx, db, ms); err != nil {
		return fail(err)
	}
	if err := s.stmts.prepare(ctx, db, name); err != nil {
		return fail(err, s.stmts.close())
	}
	return s, nil
}

// Driver returns the store's driver name.
func (s *Store) Driver() string { return s.drv }

// String describes the database without secrets: "sqlite /path/agentbox.db"
// or "postgres host:5432/db".
func (s *Store) String() string { return s.be.String() }

// Close releases the prepared statements and the database. It waits for
// calls in progress; calls after Close return ErrClosed. Chat locks still
// held are released. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.stmts.close(), s.be.close(), s.db.Close())
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

// tx runs fn in a write transaction, committing when fn returns nil and
// rolling back otherwise. On SQLite it takes the database's write lock when
// it begins (BEGIN IMMEDIATE); on PostgreSQL it runs at READ COMMITTED and
// each write locks the rows it touches (a chat's row first: see
// AppendMessages).
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
	if v == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	return checkText(what, v, MaxIDLen)
}

// checkText validates text the store keeps as text on every driver: at
// most limit bytes of UTF-8 without NUL bytes (PostgreSQL's text holds
// nothing else; message contents, which may hold any bytes, are not text).
func checkText(what, v string, limit int) error {
	switch {
	case len(v) > limit:
		return fmt.Errorf("%w: %s is %d bytes long (at most %d)", ErrInvalid, what, len(v), limit)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
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
