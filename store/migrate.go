package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"time"
)

// Migrations are SQL files, migrations/DRIVER/NNNN_name.sql: numbered from
// 0001 without gaps, forward-only, the same numbers and names for every
// driver (a feature's tables are added once per driver). A released file is
// never edited; a change is a new file. The database records what it has
// applied in schema_migrations (version, name, applied_at); Open applies the
// rest under the driver's migration lock (SQLite: the write transaction
// they run in; PostgreSQL: an advisory lock), so servers starting at once
// do not race, and refuses a database that has versions this build does
// not know (ErrSchemaTooNew).
//
//go:embed migrations
var migrationFiles embed.FS

// migration is one schema version.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the migrations of a driver and checks their
// numbering.
func loadMigrations(drv string) ([]migration, error) {
	dir := path.Join("migrations", drv)
	ents, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations of %s: %w", drv, err)
	}
	var ms []migration
	for _, e := range ents { // sorted by name
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration %s/%s: want NNNN_name.sql (lower case, digits, underscores)", dir, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s/%s: version %d where %d belongs (versions start at 1, without gaps)", dir, e.Name(), v, len(ms)+1)
		}
		b, err := migrationFiles.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: m[2], sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations of %s: none", drv)
	}
	return ms, nil
}

// querier is what migrations run on: a connection or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// createMigrationsTable is the same on every driver.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at BIGINT  NOT NULL
)`

// appliedMigrations reads schema_migrations and returns how many of ms the
// database has. It fails with ErrSchemaTooNew when the database has more,
// and when what it has is not ms's prefix (migrated by another build).
func appliedMigrations(ctx context.Context, q querier, ms []migration) (int, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	type applied struct {
		version int
		name    string
	}
	var have []applied
	for rows.Next() {
		var a applied
		if err := rows.Scan(&a.version, &a.name); err != nil {
			return 0, fmt.Errorf("read schema_migrations: %w", err)
		}
		have = append(have, a)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	if len(have) > 0 {
		if last := have[len(have)-1]; last.version > len(ms) {
			return 0, tooNew(last.version, last.name, ms)
		}
	}
	for i, a := range have {
		switch {
		case a.version != i+1:
			return 0, fmt.Errorf("schema_migrations lacks version %d (the next it has is %d): the table was changed by hand; restore it", i+1, a.version)
		case a.name != ms[i].name:
			return 0, fmt.Errorf("schema version %d of the database is %q where this agentbox has %q: another build of agentbox migrated it; use that build or another database", a.version, a.name, ms[i].name)
		}
	}
	return len(have), nil
}

func tooNew(version int, name string, ms []migration) error {
	if name != "" {
		name = " (" + name + ")"
	}
	return fmt.Errorf("%w: the database is at schema version %d%s and this agentbox knows versions up to %d (%s): upgrade agentbox, or point the store at another database",
		ErrSchemaTooNew, version, name, len(ms), ms[len(ms)-1].name)
}

// applyMigration runs m and records it; rebind adapts the record's
// placeholders to the driver.
func applyMigration(ctx context.Context, q querier, m migration, rebind func(string) string) error {
	if _, err := q.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migrate schema to version %d (%s): %w", m.version, m.name, err)
	}
	if _, err := q.ExecContext(ctx, rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("record schema version %d: %w", m.version, err)
	}
	return nil
}

// SchemaVersion returns the newest schema version the database has.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion is the schema version this build migrates databases to
// (its number of migrations, the same for every driver).
func SchemaVersion() int {
	ms, err := drivers["sqlite"].migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}
