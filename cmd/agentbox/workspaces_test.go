package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// staleData makes a data root with alice/old (10 days), alice/new (now) and
// bob/busy (10 days, held until cleanup).
func staleData(t *testing.T, root string) {
	t.Helper()
	w, err := sandbox.NewWorkspaces(root, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range [][2]string{{"alice", "old"}, {"alice", "new"}, {"bob", "busy"}} {
		ws, release, err := w.Acquire(ctx, c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteFile(context.Background(), "f.txt", []byte("hello"), 0); err != nil {
			t.Fatal(err)
		}
		if c[1] == "busy" {
			t.Cleanup(release) // a request still running
		} else {
			release()
		}
		if c[1] != "new" {
			if err := w.SetLastUse(c[0], c[1], time.Now().Add(-10*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestWorkspacesPrune(t *testing.T) {
	root := t.TempDir()
	staleData(t, root)
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, "workspaces", p)); return err == nil }

	code, out, errs := runCLI("workspaces", "prune", "--data", root, "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove alice/old (last used") || strings.Contains(out, "alice/new") ||
		!strings.Contains(out, "kept bob/busy: in use") || !strings.Contains(out, "would remove 1 workspace(s), 5 B; 1 in use, 1 used within 7d") {
		t.Fatalf("dry run: %d\n%s\n%s", code, out, errs)
	}
	if !exists("alice/old") {
		t.Fatal("dry run removed")
	}
	code, out, errs = runCLI("workspaces", "prune", "--data", root, "--older-than", "20d")
	if code != 0 || !strings.Contains(out, "removed 0 workspace(s)") {
		t.Fatalf("20d: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI("workspaces", "prune", "--data", root, "--json")
	if code != 0 {
		t.Fatalf("prune: %d %s", code, errs)
	}
	var rep sandbox.PruneReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Removed) != 1 || rep.Removed[0].Chat != "old" || rep.FreedBytes != 5 {
		t.Fatalf("json report %+v (%v):\n%s", rep, err, out)
	}
	if exists("alice/old") || !exists("alice/new") || !exists("bob/busy") {
		t.Fatal("wrong workspaces removed")
	}
}

func TestWorkspacesPruneApp(t *testing.T) {
	app := t.TempDir()
	data := filepath.Join(app, "mydata")
	if err := os.WriteFile(filepath.Join(app, "app.jsonc"), []byte(`{
  // where workspaces live
  "data_root": "mydata",
  "cleanup": {"retention": "3d"},
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The smallest valid app: one assistant and its connector.
	for name, body := range map[string]string{
		"assistants/hello/package.yao": `{"connector": "claude"}`,
		"connectors/claude.conn.yao":   `{"type": "anthropic", "options": {"key": "$ENV.ANTHROPIC_API_KEY", "model": "claude-sonnet-4-5"}}`,
	} {
		p := filepath.Join(app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	staleData(t, data)
	code, out, errs := runCLI("workspaces", "prune", "--app", app)
	if code != 0 || !strings.Contains(out, "removed alice/old") || !strings.Contains(out, "used within 3d") {
		t.Fatalf("%d\n%s\n%s", code, out, errs)
	}
}

func TestWorkspacesPruneUsage(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"workspaces"}, 0, "usage"},
		{[]string{"workspaces", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"workspaces", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"workspaces", "prun"}, 2, `(did you mean "prune"?)`},
		{[]string{"workspaces", "prune"}, 1, "the current folder is not an app folder"},
		{[]string{"workspaces", "prune", "--data", root, "--app", root}, 2, "not both"},
		{[]string{"workspaces", "prune", "--data", root, "--older-than", "soon"}, 2, "invalid duration"},
		{[]string{"workspaces", "prune", "--data", root, "--older-than", "0d"}, 2, "positive"},
		{[]string{"workspaces", "prune", "--data", filepath.Join(root, "missing")}, 1, "not a folder"},
		{[]string{"workspaces", "prune", "--data", root}, 0, "no workspaces"},
		{[]string{"workspaces", "prune", "--data", root, "extra"}, 2, "unexpected argument"},
	}
	for _, c := range cases {
		code, out, errs := runCLI(c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%v: %d, want %d with %q\n%s%s", c.args, code, c.code, c.want, out, errs)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "d", "-1h", "7days", "1.5d"} {
		if _, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q): no error", in)
		}
	}
}
