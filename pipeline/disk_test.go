package pipeline

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// diskHog is an executor whose agent writes 2 MiB into the workspace and
// keeps going until the turn is stopped.
type diskHog struct{ limit int64 }

func (diskHog) Name() string { return "claude" }

func (h diskHog) Run(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	ws := req.Sandbox.Workspace()
	if ws.Disk().Bytes != h.limit {
		return nil, chat.Errorf(chat.ErrInternal, "workspace acquired without the assistant's max_disk")
	}
	if err := os.WriteFile(filepath.Join(ws.Dir(), "big"), make([]byte, 2<<20), 0o644); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestDiskWatchedStopsTurn: where limits are measured (no root, or a
// shared claim), a turn whose workspace grows past sandbox.max_disk is
// stopped, its sandbox removed and what it wrote deleted, with a
// disk_full notice saying so.
func TestDiskWatchedStopsTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const limit = 1 << 20
	a := &assistant.Assistant{ID: "hog", Dir: filepath.Join(dir, "hog"), Connector: "c",
		Sandbox: &assistant.Sandbox{Command: "claude", Image: "img", Timeout: time.Minute, DiskBytes: limit}}
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{"c": {ID: "c", Type: "anthropic", Options: assistant.ConnectorOptions{Host: "http://127.0.0.1:1", Key: "k", Model: "m"}}},
		Assistants: map[string]*assistant.Assistant{"hog": a}}
	ws, err := sandbox.NewWorkspacesWith(filepath.Join(dir, "data"), sandbox.WorkspacesOptions{UID: -1, GID: -1, Disk: sandbox.DiskWatch})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{App: Static{App: app}, Workspaces: ws, DefaultRuntime: "fake",
		Runtimes:  map[string]sandbox.Runtime{"fake": &sandboxtest.Runtime{Handler: sandboxtest.Echo}},
		Executors: map[string]executor.Executor{"claude": diskHog{limit: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var notices []chat.Event
	start := time.Now()
	_, err = p.Chat(ctx, &Request{UserID: "u", ChatID: "c", AssistantID: "hog",
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "fill it"}}}, func(e chat.Event) {
		if e.Event == chat.Start && e.Type == chat.TypeNotice {
			mu.Lock()
			notices = append(notices, e)
			mu.Unlock()
		}
	})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("turn = %v after %s; want it stopped by the watcher", err, time.Since(start))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) != 1 || notices[0].Props["code"] != sandbox.NoticeCode || !strings.Contains(notices[0].Text, "the sandbox was stopped") ||
		!strings.Contains(notices[0].Text, "big") {
		t.Errorf("notices %+v", notices)
	}
	wdir, _ := ws.Path("u", "c")
	if _, err := os.Stat(filepath.Join(wdir, "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the file written past the limit: %v, want it deleted", err)
	}
}
