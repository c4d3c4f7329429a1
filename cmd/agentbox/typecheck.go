package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/jsapi"
)

// check type-checks the assistants' TypeScript hooks against the
// declarations the product ships (jsapi.Declarations) with the TypeScript
// compiler, when one is at hand: each assistant's hook file (and what it
// imports) in a project of its own, since hooks written as scripts share
// the global scope. What tsc reports becomes problems at the hook
// source's file:line:col, warnings unless --strict makes them errors:
// the hook engine runs code tsc rejects, so a type error is a likely bug,
// not a certain one.

// tscTimeout bounds one assistant's type-check.
const tscTimeout = 2 * time.Minute

// yaoModules declares the modules Yao strips from hooks (its runtime's,
// whose names are globals in Yao: jsapi strips them too) as modules of
// any type, so their imports are no type errors.
// It names Yao's hook types too (its JSAPI.md's, and what its apps
// write), as the declarations' types of the same shapes, since agentbox
// runs Yao's hooks.
const yaoModules = `// The modules Yao's runtime provides, stripped from hooks before they run.
declare module "@yao/*";
declare module "@yaoapps/*";
declare module "@yaoapp/*";
declare module "@gou/*";

// Yao's names of the hook types.
type CreateResponse = CreateResult;
type HookCreateResponse = CreateResult;
type NextResponse = NextResult;
type NextHookResponse = NextResult;
type NextHookPayload = NextPayload;
type NextOptions = CreateOptions;
declare namespace YaoAgent {
` + yaoHookTypes + `}
declare namespace agent {
` + yaoHookTypes + `}
`

// yaoHookTypes are the hook types of Yao's agent and YaoAgent namespaces.
const yaoHookTypes = `  type Context = globalThis.Context;
  type Message = globalThis.Message;
  type CreateOptions = globalThis.CreateOptions;
  type HookCreateResponse = CreateResult;
  type CreateHookResponse = CreateResult;
  type NextHookPayload = NextPayload;
  type NextHookResponse = NextResult;
`

// findTSC returns the TypeScript compiler to run: $AGENTBOX_TSC, else tsc
// on PATH, else the app's node_modules/.bin/tsc; "" when there is none (a
// variable so that tests pin it).
var findTSC = func(root string) string {
	if p := os.Getenv("AGENTBOX_TSC"); p != "" {
		return p
	}
	if p, err := exec.LookPath("tsc"); err == nil {
		return p
	}
	if p := filepath.Join(root, "node_modules", ".bin", "tsc"); isExecutable(p) {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// tsHooks returns the TypeScript hook files of the app's assistants (those
// that failed to load too), sorted.
func tsHooks(app *assistant.App) []string {
	var out []string
	for _, a := range app.Assistants {
		if strings.HasSuffix(a.Hooks, ".ts") {
			out = append(out, a.Hooks)
		}
	}
	for _, f := range app.Failed {
		if p := filepath.Join(app.Root, filepath.FromSlash(f.Dir), "src", "index.ts"); isFile(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// typeCheck type-checks the TypeScript hooks of list with tsc, at most
// GOMAXPROCS at once, and returns what tsc reported as problems of the
// given severity, files relative to the app root.
func typeCheck(ctx context.Context, tsc string, app *assistant.App, hooks []string, severity assistant.Severity) []assistant.Problem {
	paths, perr := jsapi.TSConfigPaths(app.Root)
	var (
		mu   sync.Mutex
		out  []assistant.Problem
		wg   sync.WaitGroup
		slot = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	)
	if perr != nil {
		out = append(out, assistant.Problem{File: "tsconfig.json", Severity: assistant.SeverityWarning, Msg: perr.Error() + ": hooks are type-checked without its paths"})
	}
	for _, hook := range hooks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot <- struct{}{}
			defer func() { <-slot }()
			ps := typeCheckOne(ctx, tsc, app.Root, hook, paths, severity)
			mu.Lock()
			out = append(out, ps...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// typeCheckOne runs tsc on the hook file in a project of its own: the
// declarations, Yao's modules and the hook file (with what it imports).
func typeCheckOne(ctx context.Context, tsc, root, hook string, paths map[string][]string, severity assistant.Severity) []assistant.Problem {
	rel := relTo(root, hook)
	fail := func(err error) []assistant.Problem {
		return []assistant.Problem{{File: filepath.ToSlash(rel), Severity: assistant.SeverityWarning, Msg: "not type-checked: " + err.Error()}}
	}
	dir, err := os.MkdirTemp("", "agentbox-tsc-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	decls, yao := filepath.Join(dir, "agentbox.d.ts"), filepath.Join(dir, "yao-modules.d.ts")
	opts := map[string]any{
		// What the hook engine runs (ES2017 after transpiling, ES2020's
		// library), without DOM or Node.js types.
		"target": "ES2017", "lib": []string{"ES2020"}, "types": []string{},
		"module": "ESNext", "moduleResolution": "bundler", "allowImportingTsExtensions": true,
		"noEmit": true, "skipLibCheck": true, "pretty": false,
	}
	if len(paths) > 0 {
		opts["baseUrl"] = root
		opts["paths"] = paths
	}
	cfg, _ := json.Marshal(map[string]any{"compilerOptions": opts, "files": []string{decls, yao, hook}})
	for name, data := range map[string]string{decls: jsapi.Declarations, yao: yaoModules, filepath.Join(dir, "tsconfig.json"): string(cfg)} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, tscTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsc, "-p", filepath.Join(dir, "tsconfig.json"))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fail(fmt.Errorf("tsc took more than %s", tscTimeout))
	}
	probs := parseTSC(out, root, severity)
	if err != nil && len(probs) == 0 {
		// tsc failed without a diagnostic to show: say what it said.
		return fail(fmt.Errorf("%s: %v: %s", tsc, err, firstLine(out)))
	}
	return probs
}

// tscLine is one diagnostic of tsc --pretty false:
// file(line,col): error TS1234: message.
var tscLine = regexp.MustCompile(`^(.+)\((\d+),(\d+)\): (error|warning) (TS\d+): (.*)$`)

// parseTSC turns tsc's output into problems, files relative to root; the
// lines that continue a message (indented) are joined to it.
func parseTSC(out []byte, root string, severity assistant.Severity) []assistant.Problem {
	var probs []assistant.Problem
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := tscLine.FindStringSubmatch(line); m != nil {
			file := m[1]
			if !filepath.IsAbs(file) {
				file = filepath.Join(root, file)
			}
			ln, _ := strconv.Atoi(m[2])
			col, _ := strconv.Atoi(m[3])
			probs = append(probs, assistant.Problem{File: filepath.ToSlash(relTo(root, file)), Line: ln, Col: col, Severity: severity,
				Msg: m[6] + " (" + m[5] + ")"})
			continue
		}
		if strings.HasPrefix(line, " ") && len(probs) > 0 && strings.TrimSpace(line) != "" {
			probs[len(probs)-1].Msg += " " + strings.TrimSpace(line)
		}
	}
	return probs
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
