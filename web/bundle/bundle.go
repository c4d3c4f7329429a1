// Package bundle builds the web app: esbuild's Go API bundles web/src
// (TypeScript with JSX, and CSS) with the npm packages of the web app
// (scripts/versions.sh, installed by `make cli` into .cache/web) into
// minified, content-hashed assets, and writes index.html to load them:
// the files package web embeds. `make build` runs it (go run
// ./web/bundle/cmd), and so does internal/testenv before it builds the
// binary the end-to-end tests run.
package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/evanw/esbuild/pkg/api"
)

// Marker is the comment in src/index.html that the asset tags replace.
const Marker = "<!-- assets -->"

// Options says where the sources and packages are.
type Options struct {
	// Src is the web app's source folder (web/src): main.tsx is its entry
	// point, index.html its page.
	Src string
	// NodeModules is the folder of its npm packages
	// (.cache/web/node_modules).
	NodeModules string
}

// File is one file of the bundle, its path relative to the output
// folder ("index.html", "assets/app-HASH.js").
type File struct {
	Path string
	Data []byte
}

// ErrNoPackages: the npm packages are not installed.
var ErrNoPackages = errors.New("the web app's npm packages are not installed (run make cli)")

// Build bundles the app. Errors name the file, line and column.
func Build(opts Options) ([]File, error) {
	for _, p := range []*string{&opts.Src, &opts.NodeModules} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("web bundle: %w", err)
		}
		*p = abs
	}
	if st, err := os.Stat(filepath.Join(opts.NodeModules, "preact", "package.json")); err != nil || st.IsDir() {
		return nil, fmt.Errorf("%w: no preact in %s", ErrNoPackages, opts.NodeModules)
	}
	page, err := os.ReadFile(filepath.Join(opts.Src, "index.html"))
	if err != nil {
		return nil, fmt.Errorf("web bundle: %w", err)
	}
	if !bytes.Contains(page, []byte(Marker)) {
		return nil, fmt.Errorf("web bundle: %s has no %q where the asset tags go", filepath.Join(opts.Src, "index.html"), Marker)
	}
	outdir := filepath.Join(opts.Src, "..", "dist", "assets")
	res := api.Build(api.BuildOptions{
		EntryPoints: []string{filepath.Join(opts.Src, "main.tsx")},
		// Paths in the output (the license notes' file names) are relative
		// to it: the same bundle from whatever folder Build runs in.
		AbsWorkingDir:     filepath.Dir(opts.Src),
		Bundle:            true,
		Write:             false,
		Outdir:            outdir,
		EntryNames:        "app-[hash]",
		AssetNames:        "[name]-[hash]",
		Format:            api.FormatESModule,
		Platform:          api.PlatformBrowser,
		Target:            api.ES2022,
		JSX:               api.JSXAutomatic,
		JSXImportSource:   "preact",
		NodePaths:         []string{opts.NodeModules},
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		Charset:           api.CharsetUTF8,
		LegalComments:     api.LegalCommentsEndOfFile,
		Define:            map[string]string{"process.env.NODE_ENV": `"production"`},
		Loader:            map[string]api.Loader{".css": api.LoaderCSS, ".png": api.LoaderFile, ".svg": api.LoaderFile, ".woff2": api.LoaderFile},
		LogLevel:          api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		return nil, fmt.Errorf("web bundle:\n%s", messages(res.Errors))
	}
	var files []File
	var tags []string
	for _, f := range res.OutputFiles {
		rel, err := filepath.Rel(filepath.Dir(outdir), f.Path)
		if err != nil {
			return nil, fmt.Errorf("web bundle: output %s: %w", f.Path, err)
		}
		rel = filepath.ToSlash(rel)
		files = append(files, File{Path: rel, Data: f.Contents})
		switch filepath.Ext(rel) {
		case ".js":
			tags = append(tags, `<script type="module" src="/`+rel+`"></script>`)
		case ".css":
			tags = append(tags, `<link rel="stylesheet" href="/`+rel+`">`)
		}
	}
	sort.Strings(tags) // the stylesheet's <link> before the <script>
	page = bytes.Replace(page, []byte(Marker), []byte(strings.Join(tags, "\n    ")), 1)
	files = append(files, File{Path: "index.html", Data: page})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func messages(msgs []api.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Location != nil {
			fmt.Fprintf(&b, "%s:%d:%d: %s\n", m.Location.File, m.Location.Line, m.Location.Column+1, m.Text)
		} else {
			fmt.Fprintf(&b, "%s\n", m.Text)
		}
	}
	return b.String()
}

// Write makes dir hold exactly files (and a .gitkeep): changed files are
// replaced atomically, unchanged ones left alone (their times too, so go
// build's cache holds), files of an older bundle removed. It takes an
// exclusive lock on dir.lock (beside dir) meanwhile, so two builds of the
// same tree (test binaries building the server in parallel) do not
// interleave.
func Write(files []File, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		return fmt.Errorf("web bundle: %w", err)
	}
	lock, err := os.OpenFile(filepath.Clean(dir)+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("web bundle: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("web bundle: lock: %w", err)
	}
	keep := map[string]bool{".gitkeep": true}
	for _, f := range files {
		keep[f.Path] = true
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("web bundle: %w", err)
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, f.Data, 0o644); err != nil {
			return fmt.Errorf("web bundle: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("web bundle: %w", err)
		}
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !keep[filepath.ToSlash(rel)] {
			return os.Remove(p)
		}
		return nil
	})
}
