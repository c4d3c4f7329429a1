package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilesSpecialKinds: the files API answers a FIFO, a socket or a
// symlink to a FIFO with a 400 that names what is there, at once.
func TestFilesSpecialKinds(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	ws := filepath.Join(fb.root, "alice", "c1")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ path, kind string }{
		{"notes.txt", "named pipe (FIFO)"},
		{"link", "named pipe (FIFO)"},
		{"sock", "socket"},
	} {
		resp, out := do(t, ts, "GET", "/api/chats/c1/files?path="+tc.path, tokenAlice, "")
		if resp.StatusCode != 400 || !strings.Contains(out, tc.kind) || !strings.Contains(out, "not a regular file or folder") {
			t.Errorf("%s = %d %s", tc.path, resp.StatusCode, out)
		}
	}
	// The folder holding them still lists.
	resp, out := do(t, ts, "GET", "/api/chats/c1/files", tokenAlice, "")
	if resp.StatusCode != 200 || !strings.Contains(out, `"notes.txt"`) {
		t.Errorf("listing = %d %s", resp.StatusCode, out)
	}
}
