package store

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
)

// minPostgres is the oldest PostgreSQL the store runs on (14:
// client_connection_check_interval, which drops the lock waits of a
// server that died).
const minPostgres = 140000

// pgBackend is a PostgreSQL database (pgx through database/sql). The
// store's queries use one pool; chat locks use a second, where each held
// or waiting lock has a connection of its own for as long as it is held.
type pgBackend struct {
	where  string  // host:port/db, for messages
	schema string  // the schema the store's tables are in
	locks  *sql.DB // chat locks' connections

	mu   sync.Mutex
	held map[*sql.Conn]struct{} // connections of held locks, dropped by close
}

// pgTracer, when set (by benchmarks), sees every statement sent.
var pgTracer pgx.QueryTracer

// pgConnectTimeout bounds a connection attempt when the DSN sets none.
const pgConnectTimeout = 10 * time.Second

func openPostgres(ctx context.Context, cfg Config) (*sql.DB, backend, error) {
	switch {
	case cfg.Path != "":
		return nil, nil, fmt.Errorf("open store: %w: the postgres driver takes a dsn, not a path", ErrInvalid)
	case cfg.DSN == "":
		return nil, nil, fmt.Errorf("open store: %w: the postgres driver needs a dsn (postgres://user@host:5432/db)", ErrInvalid)
	}
	// pgx leaves the password out of its parse errors.
	pc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w: postgres dsn: %v", ErrInvalid, err)
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = pgConnectTimeout
	}
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "agentbox"
	}
	if pgTracer != nil {
		pc.Tracer = pgTracer
	}
	b := &pgBackend{where: net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))) + "/" + pc.Database, held: map[*sql.Conn]struct{}{}}
	db := stdlib.OpenDB(*pc, stdlib.OptionShouldPing(pingIfStale))
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute)
	if err := b.check(ctx, db); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("open store %s: %w", b, err), db.Close())
	}

	lc := pc.Copy()
	// A lock wait whose client is gone (its server died) leaves
	// PostgreSQL's queue within a second instead of when it is granted.
	lc.RuntimeParams["client_connection_check_interval"] = "1000"
	// A held lock's session sits idle for the whole turn, and a wait is
	// one statement as long as chat_wait: timeouts meant for queries (in
	// the DSN or the server's settings) must not end them.
	lc.RuntimeParams["statement_timeout"] = "0"
	lc.RuntimeParams["idle_session_timeout"] = "0"
	// A canceled wait is canceled on the server, not by dropping the
	// connection (which would be slower to leave the queue).
	lc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
	}
	b.locks = stdlib.OpenDB(*lc, stdlib.OptionShouldPing(pingIfStale))
	b.locks.SetMaxIdleConns(4)
	b.locks.SetConnMaxIdleTime(time.Minute)
	return db, b, nil
}

// check connects, and checks the server's version and the schema the
// tables go to.
func (b *pgBackend) check(ctx context.Context, db *sql.DB) error {
	var version string
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num'), current_schema()`).Scan(&version, &schema); err != nil {
		return err
	}
	if v, _ := strconv.Atoi(version); v < minPostgres {
		return fmt.Errorf("PostgreSQL %s is too old: agentbox needs 14 or later", version)
	}
	if !schema.Valid {
		return errors.New("no schema of the connection's search_path exists: create one, or set search_path in the dsn")
	}
	b.schema = schema.String
	return nil
}

func (b *pgBackend) String() string { return "postgres " + b.where }

// lockKey is the advisory lock key of a chat (or of the store's
// migrations), per schema so two stores in one database stay apart.
func (b *pgBackend) lockKey(kind, user, chat string) int64 {
	h := fnv.New64a()
	for _, s := range []string{"agentbox", kind, b.schema, user, chat} {
		h.Write([]byte(s))
		h.Write([]byte{0}) // ids hold no NUL: the parts cannot run together
	}
	return int64(h.Sum64())
}

// migrate applies the pending migrations, each in a transaction, holding
// an advisory lock meanwhile: a second server starting at once waits for
// it, then finds them applied.
func (b *pgBackend) migrate(ctx context.Context, db *sql.DB, ms []migration) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			discard(conn) // also releases the lock
			return
		}
		err = conn.Close()
	}()
	key := b.lockKey("migrate", "", "")
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return fmt.Errorf("lock schema_migrations: %w", err)
	}
	if _, err := conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	n, err := appliedMigrations(ctx, conn, ms)
	if err != nil {
		return err
	}
	for _, m := range ms[n:] {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin migration: %w", err)
		}
		if err := applyMigration(ctx, tx, m, func(q string) string { return q }); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit migration %d: %w", m.version, err)
		}
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		return fmt.Errorf("unlock schema_migrations: %w", err)
	}
	return nil
}

// takeTicket takes one of the queue+1 places of a chat's line (the
// holder's and the waiters'), each an advisory lock tried in turn without
// waiting, and returns its number; no row means every place is taken. A
// recursive query, so the places are tried one at a time and the first
// free one ends the search.
const takeTicket = `WITH RECURSIVE ticket(slot, taken) AS (
	SELECT 0, pg_try_advisory_lock($1::bigint)
	UNION ALL
	SELECT slot + 1, pg_try_advisory_lock($1::bigint + slot + 1) FROM ticket WHERE NOT taken AND slot < $2::int
) SELECT slot FROM ticket WHERE taken`

// waitChat waits in PostgreSQL's queue for the chat's lock, at most $2
// milliseconds (lock_timeout, set before the wait begins).
const waitChat = `WITH t AS (SELECT set_config('lock_timeout', $2, false))
SELECT pg_advisory_lock($1::bigint) FROM t`

// lockChat takes a place in the chat's line (ErrChatQueueFull when there
// is none), then waits for the chat's lock in PostgreSQL's queue, which
// serves waiters in arrival order whichever server they came from. Both
// are session locks on a connection kept until unlock, so a server that
// dies releases them when its connections close (and its waits leave the
// queue: client_connection_check_interval).
func (b *pgBackend) lockChat(ctx context.Context, user, chat string, queue int, wait time.Duration) (func(), error) {
	conn, err := b.locks.Conn(ctx)
	if err != nil {
		return nil, lockErr(ctx, err)
	}
	base := b.lockKey("queue", user, chat) & (1<<62 - 1) // room for + slot
	var slot int
	switch err := conn.QueryRowContext(ctx, takeTicket, base, queue).Scan(&slot); {
	case errors.Is(err, sql.ErrNoRows):
		release(conn)
		return nil, ErrChatQueueFull
	case err != nil:
		discard(conn)
		return nil, lockErr(ctx, err)
	}
	key := b.lockKey("chat", user, chat)
	if wait <= 0 {
		var ok bool
		err = conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1::bigint)`, key).Scan(&ok)
		if err == nil && !ok {
			release(conn)
			return nil, ErrChatWait
		}
	} else {
		ms := max(wait.Milliseconds(), 1)
		_, err = conn.ExecContext(ctx, waitChat, key, strconv.FormatInt(ms, 10))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available: lock_timeout passed
			release(conn)
			return nil, ErrChatWait
		}
	}
	if err != nil {
		// Canceled or broken: the lock may have been granted meanwhile;
		// dropping the connection releases it in any case.
		discard(conn)
		return nil, lockErr(ctx, err)
	}
	b.mu.Lock()
	b.held[conn] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			_, ok := b.held[conn]
			delete(b.held, conn)
			b.mu.Unlock()
			if ok { // else close dropped it
				release(conn)
			}
		})
	}, nil
}

// chatTurns counts the sessions that hold the chat's lock or wait in
// PostgreSQL's queue for it. A turn that has taken its place in line but
// not yet asked for the lock is not counted.
func (b *pgBackend) chatTurns(ctx context.Context, db *sql.DB, user, chat string) (int, error) {
	key := uint64(b.lockKey("chat", user, chat))
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid::bigint = $1 AND objid::bigint = $2`, int64(key>>32), int64(key&0xffffffff)).Scan(&n)
	return n, err
}

func lockErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("chat lock: %w", err)
}

// unlockTimeout bounds releasing a lock connection's locks; past it the
// connection is dropped, which releases them too.
const unlockTimeout = 5 * time.Second

// release unlocks everything conn holds and returns it to its pool; a
// connection that cannot be unlocked is closed, which releases its locks.
func release(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		discard(conn)
		return
	}
	_ = conn.Close()
}

// discard closes conn instead of returning it to its pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = conn.Close()
}

func (b *pgBackend) sharedLocks() bool { return true }

// blob passes s as bytes: pgx would send a string as text, which
// PostgreSQL refuses for NUL bytes (and parses as bytea's escape format).
func (b *pgBackend) blob(s string) any { return []byte(s) }

// close drops the connections of the locks still held, which releases
// them, and closes the locks' pool.
func (b *pgBackend) close() error {
	b.mu.Lock()
	held := b.held
	b.held = map[*sql.Conn]struct{}{}
	b.mu.Unlock()
	for conn := range held {
		discard(conn)
	}
	if b.locks == nil {
		return nil
	}
	return b.locks.Close()
}

// CheckDSN reports whether dsn is a PostgreSQL connection string pgx
// accepts; the error does not show the password.
func CheckDSN(dsn string) error {
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return fmt.Errorf("%w: postgres dsn: %v", ErrInvalid, err)
	}
	return nil
}
