package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestMigrationsMatch: every driver has the same migrations, by number and
// name (a feature's tables are added for every driver).
func TestMigrationsMatch(t *testing.T) {
	t.Parallel()
	want, err := drivers["sqlite"].migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Drivers() {
		ms, err := drivers[name].migrations()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fmt.Sprint(names(ms)) != fmt.Sprint(names(want)) {
			t.Errorf("%s migrations %v, sqlite %v", name, names(ms), names(want))
		}
	}
	if SchemaVersion() != len(want) || SchemaVersion() < 1 {
		t.Errorf("SchemaVersion = %d, want %d", SchemaVersion(), len(want))
	}
}

func names(ms []migration) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%04d_%s", m.version, m.name))
	}
	return out
}

// database is a fresh database of a driver, opened as often as a test
// likes.
type database struct {
	cfg Config
}

// eachDriver runs fn on a new database of each driver.
func eachDriver(t *testing.T, fn func(t *testing.T, db database)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, database{Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "agentbox.db")}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg := testenv.Postgres(t)
		fn(t, database{Config{Driver: "postgres", DSN: pg.NewDatabase(t)}})
	})
}

func (d database) open(t *testing.T) *Store {
	t.Helper()
	s, err := OpenConfig(context.Background(), d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// exec runs SQL on the database (with $N placeholders).
func (d database) exec(t *testing.T, s *Store, q string, args ...any) {
	t.Helper()
	if _, err := s.db.ExecContext(context.Background(), rebind(s.drv, q), args...); err != nil {
		t.Fatal(err)
	}
}

// TestMigrate: a new database gets every migration, recorded once; two
// servers opening it at once do not race; reopening applies nothing.
func TestMigrate(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, db database) {
		ctx := context.Background()
		var wg sync.WaitGroup
		stores := make([]*Store, 6)
		errs := make([]error, len(stores))
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = OpenConfig(ctx, db.cfg) })
		}
		wg.Wait()
		for i, s := range stores {
			if errs[i] != nil {
				t.Errorf("concurrent open %d: %v", i, errs[i])
				continue
			}
			defer s.Close()
		}
		if t.Failed() {
			return
		}
		s := stores[0]
		rows, err := s.db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var v int
			var name string
			var at int64
			if err := rows.Scan(&v, &name, &at); err != nil {
				t.Fatal(err)
			}
			if at == 0 {
				t.Errorf("version %d has no applied_at", v)
			}
			got = append(got, fmt.Sprintf("%04d_%s", v, name))
		}
		ms, _ := drivers[db.cfg.Driver].migrations()
		if fmt.Sprint(got) != fmt.Sprint(names(ms)) {
			t.Errorf("schema_migrations = %v, want %v", got, names(ms))
		}
		if v, err := s.SchemaVersion(ctx); v != SchemaVersion() || err != nil {
			t.Errorf("SchemaVersion = %d, %v", v, err)
		}
	})
}

// TestSchemaTooNew: a database migrated by a newer agentbox is refused
// with a message that says what to do; so is one migrated by another
// build, or whose record was edited.
func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, db database) {
		ctx := context.Background()
		s := db.open(t)
		if err := s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "user", Content: "kept"}); err != nil {
			t.Fatal(err)
		}
		n := SchemaVersion()
		db.exec(t, s, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', 1)`, n+1)
		s.Close()
		_, err := OpenConfig(ctx, db.cfg)
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
		}
		for _, want := range []string{fmt.Sprintf("schema version %d (from_the_future)", n+1), fmt.Sprintf("knows versions up to %d", n), "upgrade agentbox"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}

		s = reopenRaw(t, db)
		db.exec(t, s, `DELETE FROM schema_migrations WHERE version = $1`, n+1)
		db.exec(t, s, `UPDATE schema_migrations SET name = 'other' WHERE version = 1`)
		s.Close()
		if _, err := OpenConfig(ctx, db.cfg); err == nil || !strings.Contains(err.Error(), `schema version 1 of the database is "other"`) {
			t.Errorf("Open of another build's database = %v", err)
		}
		s = reopenRaw(t, db)
		db.exec(t, s, `UPDATE schema_migrations SET name = 'init' WHERE version = 1`)
		if n > 1 {
			db.exec(t, s, `DELETE FROM schema_migrations WHERE version = 1`)
			s.Close()
			if _, err := OpenConfig(ctx, db.cfg); err == nil || !strings.Contains(err.Error(), "lacks version 1") {
				t.Errorf("Open with a gap = %v", err)
			}
			return
		}
		s.Close()
		s = db.open(t)
		if h, err := s.History(ctx, "u", "c"); err != nil || len(h) != 1 || h[0].Content != "kept" {
			t.Errorf("history after the refusals = %v, %v", h, err)
		}
	})
}

// reopenRaw opens the database without migrating it, for a test to edit.
func reopenRaw(t *testing.T, db database) *Store {
	t.Helper()
	d := drivers[db.cfg.Driver]
	sdb, be, err := d.open(context.Background(), db.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{db: sdb, be: be, drv: db.cfg.Driver}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestFailedMigrationRollsBack: a migration that fails leaves the database
// as it was, recorded version included, and the error names it.
func TestFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, db database) {
		ctx := context.Background()
		s := reopenRaw(t, db)
		ms, _ := drivers[db.cfg.Driver].migrations()
		broken := append(ms[:len(ms):len(ms)],
			migration{version: len(ms) + 1, name: "half", sql: "CREATE TABLE half (x INTEGER); CREATE TABLE half (x INTEGER)"})
		err := s.be.migrate(ctx, s.db, broken)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migrate schema to version %d (half)", len(ms)+1)) {
			t.Fatalf("migrate = %v", err)
		}
		var tables int
		q := `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'half'`
		if db.cfg.Driver == "sqlite" {
			q = `SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'`
		}
		if err := s.db.QueryRowContext(ctx, q).Scan(&tables); err != nil || tables != 0 {
			t.Errorf("the failed migration left %d tables (%v)", tables, err)
		}
		// PostgreSQL applies each migration in a transaction of its own;
		// SQLite all of them in one (the file is as it was: empty).
		if db.cfg.Driver == "postgres" {
			if n, err := appliedMigrations(ctx, s.db, broken); err != nil || n != len(ms) {
				t.Errorf("applied after the failure = %d, %v", n, err)
			}
		}
		s.Close()
		s = db.open(t) // the real migrations still apply
		if v, _ := s.SchemaVersion(ctx); v != len(ms) {
			t.Errorf("SchemaVersion = %d", v)
		}
	})
}

// TestSQLiteLegacyDatabase: a database from before schema_migrations
// (PRAGMA user_version counted its migrations) is recognised: nothing is
// applied twice, its data stay, and user_version keeps counting so older
// agentbox builds still refuse newer databases.
func TestSQLiteLegacyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentbox.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := drivers["sqlite"].migrations()
	for _, q := range []string{ms[0].sql, `PRAGMA user_version = 1`,
		`INSERT INTO chats VALUES ('u', 'c', 'qa', 'hi', 1, 1, 1)`,
		`INSERT INTO messages VALUES ('u', 'c', 1, 'user', 'hi', '', '', 1)`} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.History(ctx, "u", "c")
	if err != nil || len(h) != 1 || h[0].Content != "hi" {
		t.Errorf("legacy history = %v, %v", h, err)
	}
	if err := s.AppendMessages(ctx, "u", "c", "", chat.Message{Role: "assistant", Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	if info, _, _ := s.Chat(ctx, "u", "c"); info.Messages != 2 || info.AssistantID != "qa" {
		t.Errorf("legacy chat after an append = %+v", info)
	}
	var uv int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&uv); err != nil || uv != SchemaVersion() {
		t.Errorf("user_version = %d, %v; want %d", uv, err, SchemaVersion())
	}
	if v, _ := s.SchemaVersion(ctx); v != SchemaVersion() {
		t.Errorf("SchemaVersion = %d", v)
	}
	s.Close()

	// A legacy database newer than this build.
	path2 := filepath.Join(t.TempDir(), "newer.db")
	raw, _ = sql.Open("sqlite", path2)
	if _, err := raw.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Open(ctx, path2); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade agentbox") {
		t.Errorf("Open of a newer legacy database = %v", err)
	}
}
