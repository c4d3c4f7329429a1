package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"
)

// driver is one database engine the store runs on.
type driver struct {
	// open connects to the database cfg names. It returns the pool the
	// store's queries use and the driver's backend; nothing is migrated
	// yet.
	open func(ctx context.Context, cfg Config) (*sql.DB, backend, error)
	// migrations returns the driver's schema migrations, in order.
	migrations func() ([]migration, error)
}

// drivers is the registry of drivers, by the name app.jsonc's
// store.driver gives. It is one explicit map; its values do nothing until
// called.
var drivers = map[string]driver{
	"sqlite":   {open: openSQLite, migrations: sync.OnceValues(func() ([]migration, error) { return loadMigrations("sqlite") })},
	"postgres": {open: openPostgres, migrations: sync.OnceValues(func() ([]migration, error) { return loadMigrations("postgres") })},
}

// Drivers lists the drivers' names, sorted.
func Drivers() []string {
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// backend is one open database of a driver: what differs between drivers
// beyond SQL text.
type backend interface {
	// String describes the database for messages, without secrets.
	String() string
	// migrate applies the pending migrations of ms under the driver's
	// migration lock (see migrate.go).
	migrate(ctx context.Context, db *sql.DB, ms []migration) error
	// lockChat is Store.LockChat.
	lockChat(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error)
	// chatTurns is Store.ChatTurns.
	chatTurns(ctx context.Context, db *sql.DB, user, chat string) (int, error)
	// sharedLocks reports whether lockChat holds across processes.
	sharedLocks() bool
	// blob is the argument that stores s in a column of bytes (a
	// message's content, which may hold any bytes).
	blob(s string) any
	// close releases what the backend holds besides the store's pool
	// (which the store closes after it).
	close() error
}

// LockChat serialises the turns of the user's chat: it waits until no
// other turn holds the chat, for at most wait, and returns the function
// that releases it (safe to call more than once; it needs no context and
// never blocks for long). Waiting turns are served in the order they came.
// It fails with an error wrapping ErrChatQueueFull when queue turns already
// wait for the chat, ErrChatWait when the wait passed, and ctx's error
// when ctx ended first.
//
// On SQLite the lock holds within this process (one server per database
// file). On PostgreSQL it holds across every server sharing the database:
// each held or waiting lock keeps one connection of its own, and a server
// that dies releases its locks when its connections close.
func (s *Store) LockChat(ctx context.Context, user, chatID string, queue int, wait time.Duration) (func(), error) {
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return nil, fmt.Errorf("lock chat: %w", err)
	}
	return s.be.lockChat(ctx, user, chatID, max(queue, 0), wait)
}

// ChatTurns returns how many turns hold the user's chat or wait in its
// line (LockChat), on every server sharing the store (SQLite: in this
// process). It is for diagnostics and tests: the count may change at once.
func (s *Store) ChatTurns(ctx context.Context, user, chatID string) (int, error) {
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	if err := checkChat(user, chatID); err != nil {
		return 0, fmt.Errorf("chat turns: %w", err)
	}
	n, err := s.be.chatTurns(ctx, s.db, user, chatID)
	if err != nil {
		return 0, fmt.Errorf("chat turns: %w", err)
	}
	return n, nil
}

// SharedLocks reports whether LockChat serialises a chat's turns across
// processes (PostgreSQL) or only within this one (SQLite).
func (s *Store) SharedLocks() bool { return s.be.sharedLocks() }
