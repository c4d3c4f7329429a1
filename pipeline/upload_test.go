package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// uploadEnv is a pipeline whose workspaces have measured disk limits
// (DiskWatch, as without root) of 4 MiB, with small per-user bounds.
func uploadEnv(t *testing.T, lim assistant.Limits) (*Pipeline, *sandbox.Workspaces) {
	t.Helper()
	wss, err := sandbox.NewWorkspacesWith(t.TempDir(), sandbox.WorkspacesOptions{UID: -1, GID: -1, Disk: sandbox.DiskWatch})
	if err != nil {
		t.Fatal(err)
	}
	app := &assistant.App{Root: t.TempDir(), Config: &assistant.AppConfig{Limits: lim, Sandbox: assistant.SandboxDefaults{DiskBytes: 4 << 20}},
		Assistants: map[string]*assistant.Assistant{"qa": {ID: "qa", Connector: "c"}}}
	p, err := New(Config{App: Static{App: app}, Workspaces: wss, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, wss
}

func upload(p *Pipeline, user, chatID, path string, size int, known bool) (*Uploaded, error) {
	n := int64(-1)
	if known {
		n = int64(size)
	}
	return p.Upload(context.Background(), UploadRequest{UserID: user, ChatID: chatID, Path: path,
		Body: bytes.NewReader(bytes.Repeat([]byte("x"), size)), Size: n, Limit: 64 << 20})
}

// quotaCode asserts err is quota_exceeded and says want.
func quotaCode(t *testing.T, what string, err error, code, want string) {
	t.Helper()
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != code || !strings.Contains(ce.Message, want) {
		t.Errorf("%s: %v; want %s saying %q", what, err, code, want)
	}
}

// TestUploadBounds: uploads stream into workspaces made with the app's
// disk limit, within the workspace's room and the user's bounds on
// workspaces and bytes, whether or not the file says its size, and leave
// nothing when refused.
func TestUploadBounds(t *testing.T) {
	t.Parallel()
	p, wss := uploadEnv(t, assistant.Limits{WorkspacesPerUser: 2, DiskPerUser: 3 << 20, UploadsPerUser: 1}.WithDefaults())
	const mib = 1 << 20
	up, err := upload(p, "alice", "c1", "a/f.bin", mib, true)
	if err != nil || !up.Created || up.Size != mib || up.Path != "a/f.bin" {
		t.Fatalf("first upload: %+v, %v", up, err)
	}
	if up, err := upload(p, "alice", "c1", "/workspace/a/f.bin", mib, false); err != nil || up.Created {
		t.Fatalf("replace: %+v, %v", up, err)
	}
	_, err = upload(p, "alice", "c1", "a", 10, true)
	if !errors.Is(err, ErrIsFolder) {
		t.Errorf("a folder's path: %v", err)
	}
	// The workspace holds 1 MiB of the app's 4 (sandbox.max_disk, which
	// a new chat's workspace gets): 3.5 more do not fit.
	_, err = upload(p, "alice", "c1", "b.bin", 3*mib+mib/2, true)
	quotaCode(t, "over the workspace's room", err, chat.ErrQuota, "does not fit in the chat's workspace")
	_, err = upload(p, "alice", "c1", "b.bin", 3*mib+mib/2, false)
	quotaCode(t, "over the workspace's room, size unknown", err, chat.ErrQuota, "")
	// The user has 1 of 3 MiB: a second chat's 1 MiB fits, 1.5 more do not.
	if _, err := upload(p, "alice", "c2", "f.bin", mib, true); err != nil {
		t.Fatal(err)
	}
	_, err = upload(p, "alice", "c2", "g.bin", mib+mib/2, true)
	quotaCode(t, "over the user's bytes", err, chat.ErrQuota, "limits.disk_per_user")
	_, err = upload(p, "alice", "c2", "g.bin", mib+mib/2, false)
	quotaCode(t, "over the user's bytes, size unknown", err, chat.ErrQuota, "limits.disk_per_user")
	_, err = upload(p, "alice", "c3", "f.bin", 10, true)
	quotaCode(t, "a third workspace", err, chat.ErrQuota, "limits.workspaces_per_user")
	if wss.Exists("alice", "c3") {
		t.Error("the refused upload made a workspace")
	}
	for _, c := range []string{"c1", "c2"} {
		dir, _ := wss.Path("alice", c)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() == "b.bin" || e.Name() == "g.bin" || strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("%s keeps %s", c, e.Name())
			}
		}
	}
	if _, err := upload(p, "bob", "c3", "f.bin", mib, true); err != nil {
		t.Errorf("bob: %v", err)
	}

	// One upload of alice's at once (uploads_per_user 1).
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := p.Upload(context.Background(), UploadRequest{UserID: "alice", ChatID: "c1", Path: "slow.bin", Body: pr, Size: -1, Limit: mib})
		done <- err
	}()
	if _, err := pw.Write([]byte("first bytes")); err != nil { // the upload holds its slot now
		t.Fatal(err)
	}
	_, err = upload(p, "alice", "c1", "x.bin", 10, true)
	quotaCode(t, "a second upload at once", err, chat.ErrTooManyUploads, "limits.uploads_per_user")
	pw.Close()
	if err := <-done; err != nil {
		t.Errorf("the slow upload: %v", err)
	}
	if _, err := upload(p, "alice", "c1", "x.bin", 10, true); err != nil {
		t.Errorf("after the slow upload: %v", err)
	}
	if _, err := upload(p, "alice", "c1", "../x", 10, true); !errors.Is(err, sandbox.ErrPathOutside) {
		t.Errorf("outside: %v", err)
	}
}
