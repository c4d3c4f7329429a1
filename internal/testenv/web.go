package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/web/bundle"
)

// WebModules requires the web app's npm packages (make cli, or make web)
// and returns their folder: AGENTBOX_WEB_MODULES, else .cache/web/node_modules
// under the repository.
func WebModules(t testing.TB) string {
	t.Helper()
	p, ok := webModules()
	if !ok {
		Missing(t, "the web app's npm packages in "+p+" (make web)")
	}
	return p
}

func webModules() (string, bool) {
	p := os.Getenv("AGENTBOX_WEB_MODULES")
	if p == "" {
		p = filepath.Join(RepoRoot(), ".cache", "web", "node_modules")
	}
	_, err := os.Stat(filepath.Join(p, "preact", "package.json"))
	return p, err == nil
}

// bundleWeb writes the current web app into web/dist before the binary is
// built, so the binary serves what web/src holds now. Without the npm
// packages the binary is built as it is (WebApp then says what is
// missing).
func bundleWeb() error {
	mods, ok := webModules()
	if !ok {
		return nil
	}
	files, err := bundle.Build(bundle.Options{Src: filepath.Join(RepoRoot(), "web", "src"), NodeModules: mods})
	if err != nil {
		return err
	}
	return bundle.Write(files, filepath.Join(RepoRoot(), "web", "dist"))
}

// WebApp requires the binary of Agentbox with the web app bundled in, and
// returns its path.
func WebApp(t testing.TB) string {
	t.Helper()
	WebModules(t)
	return Agentbox(t)
}

// Chromium requires a Chromium (or Chrome) binary for browser tests and
// returns its path: AGENTBOX_CHROMIUM, else chromium on PATH (Debian's
// package, which make tools installs).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENTBOX_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		Missing(t, "the browser AGENTBOX_CHROMIUM="+p)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "a Chromium browser (apt-get install chromium; make tools installs it)")
	return ""
}
