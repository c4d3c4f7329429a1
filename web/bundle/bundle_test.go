package bundle_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/web/bundle"
)

func src() string { return filepath.Join(testenv.RepoRoot(), "web", "src") }

// TestBuild bundles the app: a page loading one script and one stylesheet
// of this server, nothing from anywhere else, the same bytes every time
// and from every working directory.
func TestBuild(t *testing.T) {
	mods := testenv.WebModules(t)
	files, err := bundle.Build(bundle.Options{Src: src(), NodeModules: mods})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]byte{}
	var total int
	for _, f := range files {
		byPath[f.Path] = f.Data
		total += len(f.Data)
	}
	page := string(byPath["index.html"])
	js := regexp.MustCompile(`<script type="module" src="/(assets/app-[A-Z0-9]+\.js)"></script>`).FindStringSubmatch(page)
	css := regexp.MustCompile(`<link rel="stylesheet" href="/(assets/app-[A-Z0-9]+\.css)">`).FindStringSubmatch(page)
	if js == nil || css == nil || byPath[js[1]] == nil || byPath[css[1]] == nil || len(files) != 3 {
		t.Fatalf("page:\n%s\nfiles: %d", page, len(files))
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("the page loads something from elsewhere:\n%s", page)
	}
	if !regexp.MustCompile(`<link rel="icon" type="image/svg\+xml" href="data:image/svg\+xml;base64,[A-Za-z0-9+/=]+">`).MatchString(page) {
		t.Errorf("the page has no icon of its own:\n%s", page)
	}
	// The app connects to its own server only (the library code holds
	// documentation links, never a fetch or import of another origin).
	if m := regexp.MustCompile(`(import\(|fetch\(|src=)["']https?://`).Find(byPath[js[1]]); m != nil {
		t.Errorf("the script loads from another origin: %s", m)
	}
	t.Logf("bundle: %d bytes (script %d, stylesheet %d)", total, len(byPath[js[1]]), len(byPath[css[1]]))
	// The same bytes from another working directory (make runs it from
	// the repository, tests from their package).
	t.Chdir(t.TempDir())
	again, err := bundle.Build(bundle.Options{Src: src(), NodeModules: mods})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range again {
		if f.Path != files[i].Path || !bytes.Equal(f.Data, files[i].Data) {
			t.Errorf("a second build differs at %s", f.Path)
		}
	}

	out := filepath.Join(t.TempDir(), "dist")
	if err := os.MkdirAll(filepath.Join(out, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "assets", "app-OLD.js")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.Write(files, out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a stale asset of an older bundle is left")
	}
	if b, err := os.ReadFile(filepath.Join(out, "index.html")); err != nil || string(b) != page {
		t.Errorf("index.html written: %v", err)
	}
}

// TestBuildErrors: a missing package folder or a broken source says
// what and where.
func TestBuildErrors(t *testing.T) {
	if _, err := bundle.Build(bundle.Options{Src: src(), NodeModules: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "make cli") {
		t.Errorf("no packages: %v", err)
	}
	mods := testenv.WebModules(t)
	bad := t.TempDir()
	must(t, os.WriteFile(filepath.Join(bad, "index.html"), []byte("<html>"+bundle.Marker+"</html>"), 0o644))
	must(t, os.WriteFile(filepath.Join(bad, "main.tsx"), []byte("import x from './nope';\nconst = ;\n"), 0o644))
	_, err := bundle.Build(bundle.Options{Src: bad, NodeModules: mods})
	if err == nil || !strings.Contains(err.Error(), "main.tsx:2:") {
		t.Errorf("broken source: %v", err)
	}
}

// TestTypes type-checks the app with the pinned TypeScript (esbuild only
// strips the types).
func TestTypes(t *testing.T) {
	testenv.WebModules(t)
	tsc := os.Getenv("AGENTBOX_TSC")
	if tsc == "" {
		tsc = filepath.Join(testenv.RepoRoot(), ".cache", "npm", "node_modules", ".bin", "tsc")
	}
	if _, err := os.Stat(tsc); err != nil {
		testenv.Missing(t, "a TypeScript compiler (make cli installs one; or set AGENTBOX_TSC)")
	}
	cmd := exec.Command(tsc, "-p", filepath.Join(testenv.RepoRoot(), "web", "tsconfig.json"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
