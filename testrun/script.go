package testrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

// scripts compiles the app's script files once per run, with the hook
// engine: test files, and the files before/after functions and script
// assertions name.
type scripts struct {
	app     *assistant.App
	timeout time.Duration

	mu    sync.Mutex
	files map[string]*compiled
}

type compiled struct {
	hooks *jsapi.Hooks
	err   error
	// owner is the assistant whose src/ holds the file ("" for scripts/).
	owner string
}

func newScripts(app *assistant.App, timeout time.Duration) *scripts {
	return &scripts{app: app, timeout: timeout, files: map[string]*compiled{}}
}

// load compiles the file at path (absolute), which lies under root (an
// assistant's folder, or the app's).
func (s *scripts) load(path, root, owner string) (*jsapi.Hooks, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.files[path]; ok {
		return c.hooks, c.err
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = path
	}
	h, err := jsapi.Load(&assistant.Assistant{ID: owner, Dir: root, Hooks: rel, HookTimeout: s.timeout})
	if err == nil && h == nil {
		err = fmt.Errorf("%s: nothing to run", rel)
	}
	s.files[path] = &compiled{hooks: h, err: err, owner: owner}
	return h, err
}

// fn is a function of a compiled file.
type fn struct {
	hooks *jsapi.Hooks
	name  string
	// owner is the assistant the file belongs to ("" for the app's).
	owner string
	file  string
}

// function resolves a Yao process name to a script function:
// "scripts.<path>.<Fn>" is Fn of the app's scripts/<path>.ts,
// "agents.<assistant>.<path>.<Fn>" (or "assistants.") Fn of the
// assistant's src/<path>.ts.
func (s *scripts) function(name string) (*fn, error) {
	parts := strings.Split(name, ".")
	if len(parts) < 3 {
		return nil, fmt.Errorf("script %q: want scripts.<file>.<Function> or agents.<assistant>.<file>.<Function>", name)
	}
	fname := parts[len(parts)-1]
	switch parts[0] {
	case "scripts":
		base := filepath.Join(append([]string{s.app.Root, "scripts"}, parts[1:len(parts)-1]...)...)
		path, err := scriptFile(base)
		if err != nil {
			return nil, fmt.Errorf("script %q: %w", name, err)
		}
		h, err := s.load(path, s.app.Root, "")
		if err != nil {
			return nil, err
		}
		return checkFn(&fn{hooks: h, name: fname, file: path}, name)
	case "agents", "assistants":
		a, rest := longestAssistant(s.app, parts[1:len(parts)-1])
		if a == nil || len(rest) == 0 {
			return nil, fmt.Errorf("script %q: no assistant and file in %s", name, strings.Join(parts[1:len(parts)-1], "."))
		}
		base := filepath.Join(append([]string{a.Dir, "src"}, rest...)...)
		path, err := scriptFile(base)
		if err != nil {
			return nil, fmt.Errorf("script %q: %w", name, err)
		}
		h, err := s.load(path, a.Dir, a.ID)
		if err != nil {
			return nil, err
		}
		return checkFn(&fn{hooks: h, name: fname, owner: a.ID, file: path}, name)
	}
	return nil, fmt.Errorf("script %q: want scripts.<file>.<Function> or agents.<assistant>.<file>.<Function>", name)
}

func checkFn(f *fn, name string) (*fn, error) {
	if !f.hooks.Has(f.name) {
		return nil, fmt.Errorf("script %q: %s defines no function %s (it has: %s)", name, f.hooks.File(), f.name, strings.Join(f.hooks.Exports(), ", "))
	}
	return f, nil
}

// scriptFile finds base.ts or base.js.
func scriptFile(base string) (string, error) {
	for _, ext := range []string{".ts", ".js"} {
		if st, err := os.Stat(base + ext); err == nil && !st.IsDir() {
			return base + ext, nil
		}
	}
	return "", fmt.Errorf("%s.ts does not exist", base)
}

// longestAssistant finds the assistant whose id is the longest prefix of
// parts, and the parts after it.
func longestAssistant(app *assistant.App, parts []string) (*assistant.Assistant, []string) {
	for i := len(parts); i >= 1; i-- {
		if a := app.Assistants[strings.Join(parts[:i], ".")]; a != nil {
			return a, parts[i:]
		}
	}
	return nil, nil
}

// testFunc resolves a before/after reference of an assistant's tests
// (Yao's hook refs): "env_test.Before" is Before of src/env_test.ts
// ("env.Before" too: the _test is added), "Before" the one *_test file of
// src/ that defines it; "scripts..." and "agents..." are script names.
func (s *scripts) testFunc(a *assistant.Assistant, ref string) (*fn, error) {
	if strings.HasPrefix(ref, "scripts.") || strings.HasPrefix(ref, "agents.") || strings.HasPrefix(ref, "assistants.") {
		return s.function(ref)
	}
	if a == nil {
		return nil, fmt.Errorf("%s: no assistant to find its *_test.ts in", ref)
	}
	src := filepath.Join(a.Dir, "src")
	i := strings.LastIndex(ref, ".")
	if i < 0 {
		files, err := testFiles(src)
		if err != nil {
			return nil, err
		}
		var found []*fn
		for _, f := range files {
			h, err := s.load(f, a.Dir, a.ID)
			if err != nil {
				return nil, err
			}
			if h.Has(ref) {
				found = append(found, &fn{hooks: h, name: ref, owner: a.ID, file: f})
			}
		}
		switch len(found) {
		case 0:
			return nil, fmt.Errorf("%s: no *_test.ts file in %s defines it", ref, relOr(a.Dir, src))
		case 1:
			return found[0], nil
		}
		return nil, fmt.Errorf("%s: several *_test.ts files define it: name the file (\"env_test.%s\")", ref, ref)
	}
	file, name := strings.TrimPrefix(ref[:i], "src/"), ref[i+1:]
	if !strings.HasSuffix(file, "_test") {
		file += "_test"
	}
	path, err := scriptFile(filepath.Join(src, filepath.FromSlash(file)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	h, err := s.load(path, a.Dir, a.ID)
	if err != nil {
		return nil, err
	}
	return checkFn(&fn{hooks: h, name: name, owner: a.ID, file: path}, ref)
}

// testFiles lists the *_test.ts and *_test.js files under dir, sorted.
func testFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if isTestFile(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func isTestFile(name string) bool {
	return strings.HasSuffix(name, "_test.ts") || strings.HasSuffix(name, "_test.js")
}

func relOr(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return p
}

// testDecl finds test functions in source order.
var testDecl = regexp.MustCompile(`(?m)^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:function[ \t]*\*?[ \t]*|(?:const|let|var)[ \t]+)(Test[A-Za-z0-9_$]*)\b`)

// TestFunctions lists the Test... functions a test file defines, in the
// order the source declares them.
func TestFunctions(h *jsapi.Hooks, src []byte) []string {
	var out []string
	for _, m := range testDecl.FindAllSubmatch(src, -1) {
		name := string(m[1])
		if h.Has(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, name := range h.Exports() {
		if strings.HasPrefix(name, "Test") && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// testEnv is what one script function call runs with: its ctx, where its
// logs go, and the sandbox to release.
type testEnv struct {
	hc   *jsapi.Context
	x    *jsapi.TestCtx
	logs *logSink
	box  sandbox.Sandbox
	lazy *lazyBox
}

// env builds the ctx of a script function: who it runs as, the context
// file's metadata, memory (scripted or the app's), sandbox (scripted, the
// assistant's real one, or none) and the model calls.
func (r *runner) env(ctx context.Context, owner, chatID string) (*testEnv, error) {
	cfg := r.opts.Context
	mem, err := cfg.memory(r.opts.User, chatID, r.opts.Memory)
	if err != nil {
		return nil, err
	}
	logs := &logSink{}
	e := &testEnv{logs: logs}
	e.hc = &jsapi.Context{ChatID: chatID, AssistantID: owner, UserID: r.opts.User, Locale: r.opts.Locale,
		Memory: mem, Logger: slog.New(logs.handler())}
	fields := map[string]any{"team_id": r.opts.Team,
		"authorized": map[string]any{"user_id": r.opts.User, "team_id": r.opts.Team}}
	if cfg != nil {
		e.hc.Metadata = cfg.Metadata
		if cfg.Authorized != nil {
			fields["authorized"] = normalize(cfg.Authorized)
		}
	}
	e.x = &jsapi.TestCtx{Fields: fields, Agent: r.agentCall(chatID), LLM: r.backend}
	a := r.app.Assistants[owner]
	switch {
	case cfg != nil && cfg.Sandbox != nil:
		box, err := newScriptedBox(cfg.Sandbox)
		if err != nil {
			return nil, err
		}
		e.box, e.hc.Sandbox = box, box
	case a != nil && a.Sandbox != nil:
		e.lazy = &lazyBox{ctx: ctx, open: func(ctx context.Context) (sandbox.Sandbox, func() error, error) {
			t, err := r.backend.OpenTerminal(ctx, pipeline.TerminalRequest{UserID: r.opts.User, ChatID: chatID, AssistantID: owner})
			if err != nil {
				return nil, nil, fmt.Errorf("the assistant's sandbox did not start: %w", err)
			}
			return t.Sandbox(), t.Close, nil
		}}
		e.box, e.hc.Sandbox = e.lazy, e.lazy
	}
	return e, nil
}

// close releases the env's sandbox.
func (e *testEnv) close() error {
	if e.box == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.box.Remove(ctx)
}

// callTestFunc runs a before/after function of the suite's assistant with
// args (jsapi.CtxArg is its ctx) and returns its result and logs.
func (r *runner) callTestFunc(ctx context.Context, s *Suite, ref string, args ...any) (any, []string, error) {
	f, err := r.scripts.testFunc(r.app.Assistants[s.Assistant], ref)
	if err != nil {
		return nil, nil, err
	}
	return r.scripts.apply(ctx, r, f, nil, nil, args...)
}

// apply runs f with args in a ctx of its own (hc and x when given) and
// returns its result and what it logged.
func (s *scripts) apply(ctx context.Context, r *runner, f *fn, hc *jsapi.Context, x *jsapi.TestCtx, args ...any) (any, []string, error) {
	var e *testEnv
	if hc == nil {
		var err error
		e, err = r.env(ctx, f.owner, fmt.Sprintf("test-%s-script", r.opts.RunID))
		if err != nil {
			return nil, nil, err
		}
		defer e.close()
		hc, x = e.hc, e.x
	}
	v, yao, err := f.hooks.Apply(ctx, hc, x, f.name, args...)
	var logs []string
	if e != nil {
		logs = e.logs.all()
	}
	if err != nil && len(yao) > 0 {
		err = fmt.Errorf("%w (%s)", err, yaoOnlyReason(yao))
	}
	return v, logs, err
}

// yaoOnlyReason says which Yao-only globals a script used.
func yaoOnlyReason(used []string) string {
	seen := []string{}
	for _, u := range used {
		if !slices.Contains(seen, u) {
			seen = append(seen, u)
		}
	}
	return "YAO_ONLY: " + strings.Join(seen, ", ") + " is Yao-only: agentbox runs no Yao processes, models or tables"
}

// agentCall is ctx.agent.Call for script tests: the other assistant's
// whole turn, in a chat of its own.
func (r *runner) agentCall(chatID string) func(ctx context.Context, id string, msgs []chat.Message, opts map[string]any) map[string]any {
	return func(ctx context.Context, id string, msgs []chat.Message, opts map[string]any) map[string]any {
		conn, _ := opts["connector"].(string)
		if id == "" {
			return map[string]any{"agent_id": id, "error": "no assistant id"}
		}
		if _, ok := r.app.Assistants[id]; !ok {
			return map[string]any{"agent_id": id, "error": fmt.Sprintf("unknown assistant %q", id)}
		}
		call := fmt.Sprintf("%s-agent-%d", chatID, helperSeq.Add(1))
		if len(call) > sandbox.MaxIDLen {
			call = call[len(call)-sandbox.MaxIDLen:]
		}
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = r.backend.DeleteChat(dctx, r.opts.User, call)
		}()
		out, err := r.runTurn(ctx, turnRequest{Assistant: id, ChatID: call, Messages: msgs, Connector: cmpOr(conn, r.opts.Connector)}, nil)
		res := map[string]any{"agent_id": id, "content": out.Text,
			"response": map[string]any{"content": out.Text, "tool_calls": normalize(out.ToolCalls), "next": out.Data, "usage": normalize(out.Usage)}}
		if err != nil {
			res["error"] = err.Error()
		}
		return res
	}
}
