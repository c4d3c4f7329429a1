package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(lockHelperEnv) != "" {
		lockHelper() // a second server, in a process of its own
		return
	}
	goleak.VerifyTestMain(m)
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"empty", "", ErrInvalid},
		{"memory", ":memory:", ErrInvalid},
		{"uri", "file:x.db", ErrInvalid},
		{"query", filepath.Join(dir, "x.db?mode=ro"), ErrInvalid},
		{"new nested", filepath.Join(dir, "a", "b", "c.db"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.path)
			t.Cleanup(func() {
				if s != nil {
					s.Close()
				}
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open(%q) error = %v, want %v", tt.path, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("database file mode = %o, want 600", perm)
			}
			var mode string
			if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if mode != "wal" {
				t.Errorf("journal_mode = %q, want wal", mode)
			}
		})
	}
}

func TestOpenConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown driver", Config{Driver: "mysql", DSN: "x"}, `unknown driver "mysql" (known: postgres, sqlite)`},
		{"sqlite with dsn", Config{Driver: "sqlite", DSN: "postgres://x"}, "takes a path, not a dsn"},
		{"postgres without dsn", Config{Driver: "postgres"}, "needs a dsn"},
		{"postgres with path", Config{Driver: "postgres", Path: "/x.db"}, "takes a dsn, not a path"},
		{"postgres bad dsn", Config{Driver: "postgres", DSN: "postgres://alice:s3cret@host:notaport/db"}, "postgres dsn"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenConfig(ctx, tt.cfg)
			if s != nil {
				s.Close()
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("OpenConfig = %v, want ErrInvalid saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	if got := fmt.Sprint(Drivers()); got != "[postgres sqlite]" {
		t.Errorf("Drivers = %s", got)
	}
}

// TestPostgresUnreachable: a server that does not answer is a quick,
// clear error that names where, not the password.
func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t0 := time.Now()
	s, err := OpenConfig(context.Background(), Config{Driver: "postgres", DSN: "postgres://alice:s3cret@" + addr + "/db"})
	if s != nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "open store postgres "+addr+"/db") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("OpenConfig = %v", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("took %s", d)
	}
}
