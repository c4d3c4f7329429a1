package assistant

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/store"
)

func TestStoreConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, jsonc string
		want        func(app string) StoreConfig
	}{
		{"default", `{}`, func(app string) StoreConfig {
			return StoreConfig{Driver: "sqlite", Path: filepath.Join(app, "data", "agentbox.db")}
		}},
		{"default under data_root", `{"data_root": "/srv/agentbox"}`, func(string) StoreConfig {
			return StoreConfig{Driver: "sqlite", Path: "/srv/agentbox/agentbox.db"}
		}},
		{"sqlite path", `{"store": {"driver": "sqlite", "path": "db/chats.db"}}`, func(app string) StoreConfig {
			return StoreConfig{Driver: "sqlite", Path: filepath.Join(app, "db", "chats.db")}
		}},
		{"postgres env", `{"store": {"driver": "postgres", "dsn": "$ENV.DATABASE_URL"}}`, func(string) StoreConfig {
			return StoreConfig{Driver: "postgres", DSN: "$ENV.DATABASE_URL"}
		}},
		{"postgres literal", `{"store": {"driver": "postgres", "dsn": "host=db user=agentbox dbname=agentbox"}}`, func(string) StoreConfig {
			return StoreConfig{Driver: "postgres", DSN: "host=db user=agentbox dbname=agentbox"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := appWith(t, tt.jsonc)
			app, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := app.Config.Store, tt.want(dir); got != want {
				t.Errorf("store = %+v, want %+v", got, want)
			}
		})
	}
	// Without app.jsonc: the default.
	app, err := Load(filepath.Join(appsDir, "minimal"))
	if err != nil {
		t.Fatal(err)
	}
	if app.Config.Store.Driver != "sqlite" || app.Config.Store.Path != filepath.Join(app.Config.DataRoot, "agentbox.db") {
		t.Errorf("store without app.jsonc = %+v", app.Config.Store)
	}
	if cfg, err := (&AppConfig{DataRoot: "/d"}).ResolveStore(); err != nil || cfg != (store.Config{Driver: "sqlite", Path: "/d/agentbox.db"}) {
		t.Errorf("ResolveStore of a hand-made config = %+v, %v", cfg, err)
	}
}

func TestResolveStore(t *testing.T) {
	app, err := Load(appWith(t, `{"store": {"driver": "postgres", "dsn": "$ENV.AGENTBOX_TEST_DSN"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Config.ResolveStore(); !errors.Is(err, ErrEnvNotSet) || !strings.Contains(err.Error(), "store.dsn: AGENTBOX_TEST_DSN") {
		t.Errorf("unset dsn: %v", err)
	}
	t.Setenv("AGENTBOX_TEST_DSN", "postgres://agentbox:s3cret@db:notaport/agentbox")
	if _, err := app.Config.ResolveStore(); err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "store.dsn") {
		t.Errorf("a bad dsn: %v", err)
	}
	t.Setenv("AGENTBOX_TEST_DSN", "postgres://agentbox:s3cret@db:5432/agentbox")
	cfg, err := app.Config.ResolveStore()
	if err != nil || cfg != (store.Config{Driver: "postgres", DSN: "postgres://agentbox:s3cret@db:5432/agentbox"}) {
		t.Errorf("ResolveStore = %+v, %v", cfg, err)
	}
}

// TestStoreProblems: every mistake in "store" is a problem at its
// position, and a DSN's password never shows.
func TestStoreProblems(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ jsonc, want string }{
		{`{"store": {"driver": "mysql"}}`, `app.jsonc:1:22: store.driver: want postgres or sqlite, got "mysql"`},
		{`{"store": {"driver": "postgres"}}`, `app.jsonc:1:11: store.dsn is required for the postgres driver (use "$ENV.DATABASE_URL")`},
		{`{"store": {"driver": "postgres", "dsn": ""}}`, `store.dsn is required for the postgres driver`},
		{`{"store": {"driver": "postgres", "dsn": "$ENV.bad-name"}}`, `app.jsonc:1:41: store.dsn: invalid environment reference "$ENV.bad-name"`},
		{`{"store": {"driver": "postgres", "dsn": "postgres://u:s3cret@h:port/db"}}`, `app.jsonc:1:41: store.dsn: invalid argument: postgres dsn`},
		{`{"store": {"driver": "postgres", "dsn": "$ENV.X", "path": "a.db"}}`, `app.jsonc:1:59: store.path is for the sqlite driver; postgres takes store.dsn`},
		{`{"store": {"dsn": "$ENV.X"}}`, `app.jsonc:1:19: store.dsn is for the postgres driver`},
		{`{"store": {"path": ""}}`, `app.jsonc:1:20: store.path is empty`},
		{`{"store": {"driver": "sqlite", "file": "a.db"}}`, `unknown field "file"`},
		{`{"store": "postgres"}`, `store: want an object`},
	} {
		_, err := Load(appWith(t, tt.jsonc))
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.jsonc, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the password shows: %v", tt.jsonc, err)
		}
	}
}
