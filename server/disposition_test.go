package server

import (
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestZipNameHostile: a folder the agent named is the zip's file name,
// encoded (RFC 6266 filename*) so that no name adds a parameter, breaks
// the header or changes what the browser saves.
func TestZipNameHostile(t *testing.T) {
	e := newChatsEnv(t, nil)
	if code, body := put(t, e.ts, tokenAlice, "c9", "seed.txt", []byte("x")); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	dir, _ := e.wss.Path("alice", "c9")
	for _, tc := range []struct{ folder, want string }{
		{`x"; filename="evil.exe`, `c9-x"; filename="evil.exe.zip`},
		{"x\"; filename*=UTF-8''evil.exe", "c9-x\"; filename*=UTF-8''evil.exe.zip"},
		{"a\r\nSet-Cookie: s=1", "c9-a__Set-Cookie: s=1.zip"},
		{"日本語 ü", "c9-日本語 ü.zip"},
		{`back\slash`, `c9-back\slash.zip`},
		{"tab\there", "c9-tab_here.zip"},
	} {
		if err := os.Mkdir(filepath.Join(dir, tc.folder), 0o755); err != nil {
			t.Fatal(err)
		}
		resp, _ := do(t, e.ts, "GET", "/api/chats/c9/files?format=zip&path="+url.QueryEscape(tc.folder), tokenAlice, "")
		cd := resp.Header.Get("Content-Disposition")
		if resp.StatusCode != 200 || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%q: %d %v", tc.folder, resp.StatusCode, resp.Header)
			continue
		}
		typ, params, err := mime.ParseMediaType(cd)
		if err != nil || typ != "attachment" || len(params) != 1 || params["filename"] != tc.want {
			t.Errorf("%q: Content-Disposition %q parses to %q %q (%v); want one filename %q", tc.folder, cd, typ, params, err, tc.want)
		}
	}
	// A plain name stays readable for clients that do not decode filename*.
	resp, _ := do(t, e.ts, "GET", "/api/chats/c9/files?format=zip&path=.", tokenAlice, "")
	if cd := resp.Header.Get("Content-Disposition"); cd != "attachment; filename=c9.zip" {
		t.Errorf("plain name: %q", cd)
	}
}
