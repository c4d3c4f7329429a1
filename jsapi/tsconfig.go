package jsapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
	"github.com/tailscale/hujson"
)

// tsPaths are the import aliases of an app root's tsconfig.json
// (compilerOptions.paths), resolved the way Yao's runtime resolves them
// (gou runtime/v8/tsconfig.go): a pattern "@lib/*" matches an import that
// starts with "@lib/", and "@lib/x/y" is the file x/y.ts in the folder of
// each mapped path ("scripts/lib/*" or "./scripts/lib/*" alike), relative
// to the app root. Patterns without "/*" match nothing, as in Yao.
type tsPaths struct {
	root    string
	aliases []tsAlias
}

type tsAlias struct {
	prefix string   // "@lib/"
	dirs   []string // folders relative to the root ("scripts/lib")
}

// TSConfigPaths returns compilerOptions.paths of the app root's
// tsconfig.json, which Yao's runtime resolves imports by: nil without the
// file (or without paths), an error for one that is not JSON.
func TSConfigPaths(root string) (map[string][]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "tsconfig.json"))
	if err != nil {
		return nil, nil
	}
	// Yao reads it as JSON; comments and trailing commas, which editors
	// allow in a tsconfig.json, are accepted too.
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("tsconfig.json is not valid JSON: %v", err)
	}
	var cfg struct {
		CompilerOptions struct {
			Paths map[string][]string `json:"paths"`
		} `json:"compilerOptions"`
	}
	if err := json.Unmarshal(std, &cfg); err != nil {
		return nil, fmt.Errorf("tsconfig.json: compilerOptions.paths: %v", err)
	}
	return cfg.CompilerOptions.Paths, nil
}

// readTSPaths reads the app root's tsconfig.json paths (TSConfigPaths):
// nil without any.
func readTSPaths(root string) (*tsPaths, error) {
	paths, err := TSConfigPaths(root)
	if err != nil || len(paths) == 0 {
		return nil, err
	}
	t := &tsPaths{root: root}
	for pattern, targets := range paths {
		prefix, _, _ := strings.Cut(pattern, "/*")
		a := tsAlias{prefix: prefix + "/"}
		for _, p := range targets {
			a.dirs = append(a.dirs, filepath.ToSlash(filepath.Clean(filepath.Dir(filepath.FromSlash(p)))))
		}
		t.aliases = append(t.aliases, a)
	}
	if len(t.aliases) == 0 {
		return nil, nil
	}
	// The longest prefix first: "@lib/x/" before "@lib/" (Yao's order is
	// its map's, which varies).
	slices.SortFunc(t.aliases, func(a, b tsAlias) int {
		if d := len(b.prefix) - len(a.prefix); d != 0 {
			return d
		}
		return strings.Compare(a.prefix, b.prefix)
	})
	return t, nil
}

// filter is the esbuild filter matching the aliased imports.
func (t *tsPaths) filter() string {
	parts := make([]string, len(t.aliases))
	for i, a := range t.aliases {
		parts[i] = regexp.QuoteMeta(a.prefix)
	}
	return "^(" + strings.Join(parts, "|") + ")"
}

// resolve finds the file an aliased import names; ok is false when no
// alias maps it to an existing file (the bundler then resolves it as it
// would without the alias).
func (t *tsPaths) resolve(path string) (string, bool) {
	for _, a := range t.aliases {
		rest, ok := strings.CutPrefix(path, a.prefix)
		if !ok {
			continue
		}
		for _, dir := range a.dirs {
			base := filepath.Join(t.root, filepath.FromSlash(dir), filepath.FromSlash(rest))
			// Yao adds .ts; .js, and a folder's index, are found too.
			for _, cand := range []string{base, base + ".ts", base + ".js", filepath.Join(base, "index.ts"), filepath.Join(base, "index.js")} {
				if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() && within(t.root, cand) {
					return cand, true
				}
			}
		}
	}
	return "", false
}

// within reports whether p is inside root (an alias never reaches out of
// the app).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// plugin is the bundler plugin that resolves the aliases.
func (t *tsPaths) plugin() api.Plugin {
	return api.Plugin{
		Name: "agentbox-tsconfig-paths",
		Setup: func(b api.PluginBuild) {
			b.OnResolve(api.OnResolveOptions{Filter: t.filter()}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				if p, ok := t.resolve(args.Path); ok {
					return api.OnResolveResult{Path: p, Namespace: "file"}, nil
				}
				return api.OnResolveResult{}, nil
			})
		},
	}
}
