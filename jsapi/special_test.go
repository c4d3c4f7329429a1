package jsapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSandboxSpecialFiles: a FIFO or socket the agent planted is refused
// with SANDBOX_SPECIAL_FILE by ReadFile and ListDir, at once (it used to
// block the hook past every timeout), and WriteFile replaces it.
func TestSandboxSpecialFiles(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	if err := syscall.Mkfifo(filepath.Join(sb.dir, "notes.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.dir, "big"), make([]byte, MaxReadFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stmt, code, msg string
	}{
		{`ctx.sandbox.ReadFile("notes.txt")`, CodeSpecialFile, `read "notes.txt": is a named pipe (FIFO), not a regular file or folder`},
		{`ctx.sandbox.ReadFile("/workspace/notes.txt")`, CodeSpecialFile, "named pipe (FIFO)"},
		{`ctx.sandbox.ListDir("notes.txt")`, CodeSpecialFile, "named pipe (FIFO)"},
		{`ctx.sandbox.ReadFile("big")`, CodeFileTooLarge, "over the limit of 33554432"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			got := run(t, catchJS(tc.stmt), &Context{Sandbox: sb}, nil).(map[string]any)
			if got["code"] != tc.code || got["name"] != "SandboxError" || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %s %q", got, tc.code, tc.msg)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestSandboxWriteReplacesFIFO: WriteFile over a FIFO with no reader does
// not wait for one; the FIFO becomes a regular file.
func TestSandboxWriteReplacesFIFO(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	if err := syscall.Mkfifo(filepath.Join(sb.dir, ".mcp.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := run(t, `export function test(ctx: any) {
  ctx.sandbox.WriteFile(".mcp.json", "{}");
  return ctx.sandbox.ReadFile(".mcp.json");
}`, &Context{Sandbox: sb}, nil)
	if got != "{}" {
		t.Fatalf("got %v", got)
	}
}

// TestSandboxFileCallsEndWithHook: a hook whose context has ended gets
// its file calls refused with the context's code.
func TestSandboxFileCallsEndWithHook(t *testing.T) {
	t.Parallel()
	sb := newFakeSandbox(t)
	h := load(t, catchJS(`ctx.sandbox.ListDir(".")`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := h.Call(ctx, &Context{Sandbox: sb}, "test", nil)
	if err != nil {
		return // refused before the hook ran: as good
	}
	if m, ok := got.(map[string]any); !ok || m["code"] != CodeCanceled {
		t.Fatalf("ListDir after cancel = %v", got)
	}
}
