package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestWorkspacesList(t *testing.T) {
	root := t.TempDir()
	staleData(t, root)
	code, out, errs := runCLI("workspaces", "list", "--data", root)
	if code != 0 {
		t.Fatalf("list: %d\n%s\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "USER") || !strings.Contains(lines[0], "LIMIT") {
		t.Fatalf("list:\n%s", out)
	}
	if !strings.HasPrefix(lines[1], "alice") || !strings.Contains(lines[1], "new") || !strings.Contains(lines[3], "busy") || !strings.Contains(lines[3], "in use") {
		t.Errorf("rows:\n%s", out)
	}
	if !strings.Contains(lines[4], "3 workspace(s)") || !strings.Contains(lines[4], "data root "+root) || !strings.Contains(lines[4], "free of") {
		t.Errorf("total: %s", lines[4])
	}
	code, out, _ = runCLI("workspaces", "list", "--data", root, "--json")
	var got workspacesList
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Workspaces) != 3 || got.Usage.Workspaces != 3 || got.Usage.Bytes == 0 {
		t.Fatalf("json %d %v:\n%s", code, err, out)
	}
	if code, _, errs := runCLI("workspaces", "list"); code != 1 || !strings.Contains(errs, "not an app folder (it has no assistants/ folder): name one with --app DIR") {
		t.Errorf("no root: %d %s", code, errs)
	}
}

// TestWorkspacesListLimits: a workspace that is a disk image shows its
// limit, and whether it is mounted.
func TestWorkspacesListLimits(t *testing.T) {
	testenv.LoopDisks(t)
	root := t.TempDir()
	w, err := sandbox.NewWorkspacesWith(root, sandbox.WorkspacesOptions{UID: -1, GID: -1, Disk: sandbox.DiskLoop})
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := w.AcquireWith(context.Background(), "alice", "c1", sandbox.AcquireOptions{MaxDisk: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := ws.WriteFile(context.Background(), "f", make([]byte, 3<<20), 0); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("workspaces", "list", "--data", root)
	if code != 0 || !strings.Contains(out, "64.0 MB") || !strings.Contains(out, "in use, mounted") || !strings.Contains(out, "(1 mounted, 1 loop device)") {
		t.Fatalf("list: %d\n%s\n%s", code, out, errs)
	}
	if _, err := filepath.Abs(root); err != nil {
		t.Fatal(err)
	}
}
