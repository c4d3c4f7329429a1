package assistant

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/store"
)

// StoreConfig is app.jsonc's "store": the database of chats, hook memory,
// usage and chat locks.
type StoreConfig struct {
	// Driver is "sqlite" (the default: one server) or "postgres" (any
	// number of servers sharing the database).
	Driver string `json:"driver,omitempty"`
	// Path is SQLite's database file, relative to the app folder
	// (default: DATA_ROOT/agentbox.db).
	Path string `json:"path,omitempty"`
	// DSN is PostgreSQL's connection string, usually "$ENV.DATABASE_URL",
	// resolved when the server starts (ResolveStore).
	DSN string `json:"-"`
}

// rawStore is app.jsonc's "store" as written.
type rawStore struct {
	Driver string `json:"driver"`
	Path   string `json:"path"`
	DSN    string `json:"dsn"`
}

// store checks app.jsonc's "store" and returns it with its defaults.
func (d *doc) store(r rawStore, root, dataRoot string) StoreConfig {
	c := StoreConfig{Driver: "sqlite", Path: filepath.Join(dataRoot, "agentbox.db")}
	if d.has("store.driver") {
		if !slices.Contains(store.Drivers(), r.Driver) {
			d.errPath("store.driver", "store.driver: want %s, got %q", strings.Join(store.Drivers(), " or "), r.Driver)
			return c
		}
		c.Driver = r.Driver
	}
	switch c.Driver {
	case "sqlite":
		if d.has("store.dsn") {
			d.errPath("store.dsn", "store.dsn is for the postgres driver; sqlite keeps its database in a file (store.path)")
		}
		if d.has("store.path") {
			if strings.TrimSpace(r.Path) == "" {
				d.errPath("store.path", "store.path is empty (leave it out for DATA_ROOT/agentbox.db)")
				break
			}
			p := r.Path
			if !filepath.IsAbs(p) {
				p = filepath.Join(root, p)
			}
			c.Path = filepath.Clean(p)
		}
	case "postgres":
		c.Path = ""
		if d.has("store.path") {
			d.errPath("store.path", "store.path is for the sqlite driver; postgres takes store.dsn")
		}
		switch {
		case strings.TrimSpace(r.DSN) == "":
			d.errPath("store", `store.dsn is required for the postgres driver (use "$ENV.DATABASE_URL")`)
		case checkEnvRef(r.DSN) != "":
			d.errPath("store.dsn", "store.dsn: %s", checkEnvRef(r.DSN))
		case !strings.HasPrefix(r.DSN, EnvPrefix):
			if err := store.CheckDSN(r.DSN); err != nil {
				d.errPath("store.dsn", "store.dsn: %v", err)
			}
			c.DSN = r.DSN
		default:
			c.DSN = r.DSN
		}
	}
	return c
}

// ResolveStore returns the store's configuration with store.dsn's
// environment reference resolved. A missing variable is an error naming
// it; a DSN that does not parse is an error that does not show it.
func (c *AppConfig) ResolveStore() (store.Config, error) {
	s := c.Store
	if s.Driver == "" {
		s = StoreConfig{Driver: "sqlite", Path: filepath.Join(c.DataRoot, "agentbox.db")}
	}
	cfg := store.Config{Driver: s.Driver, Path: s.Path}
	if s.Driver == "postgres" {
		dsn, err := ResolveValue(s.DSN)
		if err != nil {
			return store.Config{}, fmt.Errorf("app.jsonc: store.dsn: %w", err)
		}
		if err := store.CheckDSN(dsn); err != nil {
			return store.Config{}, fmt.Errorf("app.jsonc: store.dsn: %w", err)
		}
		cfg.DSN = dsn
	}
	return cfg, nil
}
