package assistant

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/hint"
)

// folderEntries are the names an assistant folder's own files and folders
// have (Yao's layout): anything else at its top is not read. Folders of
// nested assistants are not checked here (they load on their own).
var folderEntries = []string{
	PackageFile, "package.jsonc", "package.json", PromptsFile, SandboxFile,
	PromptsDir, AssetsDir, LocalesDir, SkillsDir, MCPsDir, "src", "tests",
}

// folderUse says what an assistant folder is read for.
const folderUse = PackageFile + ", " + PromptsFile + ", " + SandboxFile + ", " + PromptsDir + "/, " + AssetsDir + "/, " + LocalesDir + "/, " +
	SkillsDir + "/, " + MCPsDir + "/, tests/ and src/ (hooks in " + HooksTS + ")"

// folderExtras are names an assistant folder may hold for people and their
// tools rather than for the loader: they get no warning.
var folderExtras = []string{"node_modules", "tsconfig.json", "jsconfig.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "LICENSE"}

// checkFolder warns about what an assistant folder holds that nothing
// reads (a misnamed prompts file, a hook file outside src/index.ts; what a
// sandbox prepare step copies is read), with
// the name it was likely meant to have, and about an assistant that has no
// prompt at all. Silently ignored files are the commonest first mistake.
func (l *loader) checkFolder(a *Assistant, app *App, entries []os.DirEntry) {
	// What the sandbox's prepare steps copy into the workspace is used.
	var copied []string
	if a.Sandbox != nil {
		for _, st := range a.Sandbox.Prepare {
			if st.Action == "copy" {
				top, _, _ := strings.Cut(path.Clean(filepath.ToSlash(st.Src)), "/")
				copied = append(copied, top)
			}
		}
	}
	for _, e := range entries {
		name := e.Name()
		if slices.Contains(folderEntries, name) || strings.HasPrefix(name, ".") || slices.Contains(folderExtras, name) || slices.Contains(copied, name) ||
			strings.HasSuffix(strings.ToLower(name), ".md") || name == "prompts.yaml" { // prompts.yaml has its own warning
			continue
		}
		abs := filepath.Join(a.Dir, name)
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			st, err := os.Stat(abs)
			isDir = err == nil && st.IsDir()
		}
		if isDir && (holdsAssistant(abs) || holdsScriptTests(abs)) {
			continue // a nested assistant, or script tests for agentbox test -i
		}
		kind := "file"
		if isDir {
			kind = "folder"
		}
		msg := fmt.Sprintf("this %s is not used: an assistant folder is read for %s", kind, folderUse)
		if best := hint.Closest(name, folderEntries); best != "" {
			msg = fmt.Sprintf("this %s is not used (did you mean %s?)", kind, best)
		}
		l.warn(abs, "%s", msg)
	}
	if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == "src" }) && a.Hooks == "" {
		l.checkHookEntry(filepath.Join(a.Dir, "src"))
	}
	hasPrompts := slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == PromptsFile || e.Name() == PromptsDir })
	if len(a.Prompts) == 0 && len(a.PromptPresets) == 0 && a.Hooks == "" && !hasPrompts && // a broken prompts file has its own problems
		(a.DisableGlobalPrompts || app.Agent == nil || len(app.Agent.GlobalPrompts) == 0) {
		l.warn(a.Dir, "the assistant has no prompt (no %s, no prompts in %s, no global agent/%s): the model gets the user's messages and nothing of this assistant's role", PromptsFile, PackageFile, PromptsFile)
	}
}

// hookDecl finds a declaration of a hook function (Yao's Create and Next,
// the old Done) in a script: a function, a const/let/var, an export list,
// or CommonJS exports.
var hookDecl = regexp.MustCompile(`(?:\bfunction\s*\*?\s*|\b(?:const|let|var)\s+|\bexport\s*\{[^}]*?\b|\bexports\.|\bmodule\.exports\s*=\s*\{[^}]*?\b)(?:Create|Next|Done)\b`)

// maxHookScan bounds how much of a script checkHookEntry reads.
const maxHookScan = 1 << 20

// checkHookEntry warns when src/ holds no hook entry file but a script
// that declares a hook: hooks are read from src/index.ts or src/index.js
// only, so Create in src/hooks.ts never runs. Scripts without a hook are
// the assistant's processes (agents.<id>.<file>.<Fn>), called by name.
func (l *loader) checkHookEntry(src string) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return
	}
	var scripts []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "index.") {
			return // an entry of another extension, or both: findHooks says
		}
		if isScript(name) && !e.IsDir() && !strings.HasSuffix(name, ".d.ts") && !isScriptTest(name) && declaresHook(filepath.Join(src, name)) {
			scripts = append(scripts, name)
		}
	}
	if len(scripts) == 0 {
		return
	}
	l.warn(src, "no hooks run: they are read from %s or %s only, and %s is neither (rename the entry file to index.ts)", HooksTS, HooksJS, strings.Join(scripts, ", "))
}

// declaresHook reports whether the script at path declares a hook
// function (hookDecl); a file that cannot be read is taken as one that
// does not (its loading reports it).
func declaresHook(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHookScan))
	return err == nil && hookDecl.Match(b)
}

// holdsAssistant reports whether dir or a folder below it has a package
// file (as the assistant walk finds them, hidden folders and node_modules
// skipped), within the walk's depth.
func holdsAssistant(dir string) bool {
	var visit func(dir string, depth int) bool
	visit = func(dir string, depth int) bool {
		if depth > maxWalkDepth {
			return false
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if slices.Contains(packageFiles, e.Name()) {
				return true
			}
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") || name == "node_modules" {
				continue
			}
			if sub := filepath.Join(dir, name); e.IsDir() || e.Type()&os.ModeSymlink != 0 {
				if st, err := os.Stat(sub); err == nil && st.IsDir() && visit(sub, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return visit(dir, 0)
}

func isScript(name string) bool {
	switch filepath.Ext(name) {
	case ".ts", ".js", ".mts", ".mjs":
		return true
	}
	return false
}

// isScriptTest reports whether name is a script test (Yao's *_test.ts),
// which agentbox test runs and hooks never are.
func isScriptTest(name string) bool {
	return isScript(name) && strings.HasSuffix(strings.TrimSuffix(name, filepath.Ext(name)), "_test")
}

// holdsScriptTests reports whether dir holds script tests at its top.
func holdsScriptTests(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return !e.IsDir() && isScriptTest(e.Name()) })
}
