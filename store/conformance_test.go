package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/store"
	"github.com/agentbox/agentbox/store/storetest"
)

// opener opens stores of one driver and remembers the database of each,
// for Reopen.
type opener struct {
	mu  sync.Mutex
	cfg map[*store.Store]store.Config
}

func (o *opener) open(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	s, err := store.OpenConfig(context.Background(), cfg)
	t.Cleanup(func() {
		if s != nil {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cfg == nil {
		o.cfg = map[*store.Store]store.Config{}
	}
	o.cfg[s] = cfg
	return s
}

func (o *opener) suite(newDB func(t testing.TB) store.Config) storetest.Opener {
	return storetest.Opener{
		Open: func(t testing.TB) *store.Store { return o.open(t, newDB(t)) },
		Reopen: func(t testing.TB, s *store.Store) *store.Store {
			o.mu.Lock()
			cfg := o.cfg[s]
			o.mu.Unlock()
			return o.open(t, cfg)
		},
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	var o opener
	storetest.Run(t, o.suite(func(t testing.TB) store.Config {
		return store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "data", "agentbox.db")}
	}))
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	var o opener
	storetest.Run(t, o.suite(func(t testing.TB) store.Config {
		return store.Config{Driver: "postgres", DSN: pg.NewDatabase(t)}
	}))
}
