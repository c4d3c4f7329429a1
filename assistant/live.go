package assistant

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Live serves the current version of an app folder and reloads it when
// its files change. It loads with Open: an assistant with errors does not
// keep the others from serving. A reload whose app settings have errors
// keeps the last good App serving and reports the error; one in which an
// assistant has errors serves that assistant's last good version, if it
// had one (Failed.LastGood). The next good edit replaces them. Current is
// lock-free and safe for concurrent use with reloads.
type Live struct {
	dir    string
	logger *slog.Logger
	check  func(*App, *Assistant) []Problem
	notify func(*App)

	cur     atomic.Pointer[App]
	lastErr atomic.Pointer[error]

	mu    sync.Mutex // serializes reloads and guards print, watching
	print uint64     // fingerprint of the files at the last (attempted) load

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	watching bool
}

// LiveOption configures a Live.
type LiveOption func(*Live)

// WithCheck adds a check of every assistant of a newly loaded App before
// it is served (compiling its hooks, for instance), as App.Vet runs it:
// warnings join the app's, and an assistant with errors fails like one
// whose files have errors.
func WithCheck(check func(*App, *Assistant) []Problem) LiveOption {
	return func(l *Live) { l.check = check }
}

// WithNotify calls fn with each newly served App after a reload (not for
// the initial load). fn runs on the reloading goroutine and must be quick.
func WithNotify(fn func(*App)) LiveOption {
	return func(l *Live) { l.notify = fn }
}

// NewLive loads the app folder dir; the initial load must succeed. Call
// Watch to follow changes, or Reload on demand.
func NewLive(dir string, logger *slog.Logger, opts ...LiveOption) (*Live, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Live{dir: dir, logger: logger, ctx: ctx, cancel: cancel}
	for _, o := range opts {
		o(l)
	}
	l.print = fingerprint(dir)
	app, err := l.load(nil)
	if err != nil {
		cancel()
		return nil, err
	}
	l.cur.Store(app)
	return l, nil
}

// Current returns the App being served. It never returns nil.
func (l *Live) Current() *App { return l.cur.Load() }

// LastError returns the error of the most recent reload, nil when it
// succeeded.
func (l *Live) LastError() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// load opens the app folder and checks its assistants; prev, the app
// being served (nil at first), lends its versions of the assistants that
// now fail.
func (l *Live) load(prev *App) (*App, error) {
	app, err := Open(l.dir)
	if err != nil {
		return nil, err
	}
	if l.check != nil {
		app.Vet(l.check)
	}
	app.KeepLastGood(prev)
	for _, id := range slices.Sorted(maps.Keys(app.Failed)) {
		f := app.Failed[id]
		msg := "assistant does not run: its definition has errors (agentbox check lists them)"
		if f.Serving() {
			msg = "assistant has errors: its last good version keeps serving until they are fixed (agentbox check lists them)"
		}
		l.logger.Error(msg, "assistant", id, "errors", len(f.Problems), "first", f.Problems[0].String())
	}
	if n := len(app.Warnings); n > 0 {
		// Each warning once, at debug; the count where operators look.
		for _, w := range app.Warnings {
			l.logger.Debug("app warning", "problem", w.String())
		}
		l.logger.Warn("app loaded with warnings: what it asks for is not all honoured (agentbox check lists them)", "app", app.Root, "warnings", n)
	}
	return app, nil
}

// Reload loads the app folder now. On success the new App is served; on
// failure the last good App keeps serving and the error is returned,
// logged and kept for LastError.
func (l *Live) Reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.print = fingerprint(l.dir)
	return l.reloadLocked()
}

func (l *Live) reloadLocked() error {
	app, err := l.load(l.cur.Load())
	if err != nil {
		l.lastErr.Store(&err)
		l.logger.Error("app reload failed; still serving the last good version", "dir", l.dir, "error", err)
		return fmt.Errorf("reload: %w", err)
	}
	l.cur.Store(app)
	l.lastErr.Store(nil)
	l.logger.Info("app reloaded", "dir", l.dir, "assistants", len(app.Assistants), "failed", len(app.Failed), "connectors", len(app.Connectors))
	if l.notify != nil {
		l.notify(app)
	}
	return nil
}

// Watch starts a goroutine that checks the app's files every interval (a
// stat walk of app.jsonc, tsconfig.json, connectors/, assistants/, mcps/,
// agent/, scripts/ and services/: sizes, times and names) and reloads when
// they changed. It stops when ctx is done or Close is called. Calling
// Watch again while watching does nothing.
func (l *Live) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watching || l.ctx.Err() != nil {
		return
	}
	l.watching = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-l.ctx.Done():
				return
			case <-t.C:
				l.poll()
			}
		}
	}()
}

// poll reloads when the fingerprint changed since the last attempt, so a
// broken edit is reported once, not on every tick.
func (l *Live) poll() {
	p := fingerprint(l.dir)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p == l.print {
		return
	}
	l.print = p
	_ = l.reloadLocked() // logged and kept for LastError
}

// Close stops watching and waits for the watcher to finish, or for ctx.
// It is idempotent.
func (l *Live) Close(ctx context.Context) error {
	l.cancel()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("live close: %w", ctx.Err())
	}
}

// fingerprint hashes the names, sizes, modes and modification times of
// the files an app is loaded from. It reads no file content. Hidden
// entries and node_modules folders are skipped.
func fingerprint(dir string) uint64 {
	h := fnv.New64a()
	add := func(p string, st fs.FileInfo) {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%o\n", p, st.Size(), st.ModTime().UnixNano(), st.Mode())
	}
	// tsconfig.json's paths, scripts/ and services/ are the hooks' imports
	// and the processes they call.
	for _, f := range []string{AppFile, "tsconfig.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			add(f, st)
		}
	}
	for _, sub := range []string{ConnectorsDir, AssistantsDir, MCPsDir, AgentDir, "scripts", "services"} {
		root := filepath.Join(dir, sub)
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				fmt.Fprintf(h, "%s\x00error\n", p)
				return nil
			}
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			st, err := d.Info()
			if err != nil {
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				if t, err := os.Stat(p); err == nil {
					st = t
				}
			}
			add(p, st)
			return nil
		})
	}
	return h.Sum64()
}
