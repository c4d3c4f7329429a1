package egresstest

import (
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitServer serves the bare repositories under Root over git's smart HTTP
// protocol (git http-backend, run by net/http/cgi) behind HTTPS. With a
// Token it answers 401 unless a request carries the token as a Bearer
// token or as the password of Basic credentials.
type GitServer struct {
	*Server
	// Root holds the bare repositories (NAME.git).
	Root  string
	token string
}

// NewGitServer starts a git server for names; git must be installed.
func NewGitServer(tb testing.TB, pki *PKI, token string, names ...string) *GitServer {
	tb.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		tb.Fatalf("git --exec-path: %v (is git installed?)", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	g := &GitServer{Root: tb.TempDir(), token: token}
	h := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + g.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	g.Server = NewServer(tb, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), names...)
	return g
}

func (g *GitServer) authorized(r *http.Request) bool {
	if g.token == "" {
		return true
	}
	got := ""
	a := r.Header.Get("Authorization")
	if b, ok := strings.CutPrefix(a, "Bearer "); ok {
		got = b
	} else if c, ok := strings.CutPrefix(a, "Basic "); ok {
		raw, _ := base64.StdEncoding.DecodeString(c)
		_, got, _ = strings.Cut(string(raw), ":")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) == 1
}

// CreateRepo creates Root/NAME.git with one commit holding files.
func (g *GitServer) CreateRepo(tb testing.TB, name string, files map[string]string) {
	tb.Helper()
	work := tb.TempDir()
	for p, c := range files {
		abs := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	bare := filepath.Join(g.Root, name+".git")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "add", "-A"},
		{"-C", work, "-c", "user.name=test", "-c", "user.email=test@example.test", "commit", "-q", "-m", "initial"},
		{"clone", "-q", "--bare", work, bare},
		{"-C", bare, "config", "http.receivepack", "true"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
