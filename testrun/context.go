package testrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
)

// ContextConfig is a context file (--ctx): Yao's fields (who the tests run
// as, metadata, locale) and agentbox's scripted memory and sandbox for
// script tests.
type ContextConfig struct {
	ChatID     string            `json:"chat_id,omitempty"`
	Authorized *AuthorizedConfig `json:"authorized,omitempty"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
	Client     *ClientConfig     `json:"client,omitempty"`
	Locale     string            `json:"locale,omitempty"`
	Referer    string            `json:"referer,omitempty"`
	// Memory, when set, is what script tests' ctx.memory starts with, in
	// a store of their own: {"user": {key: value}, "chat": {key: value}}.
	// Without it they use the app's memory store, as hooks do.
	Memory map[string]map[string]any `json:"memory,omitempty"`
	// Sandbox, when set, is script tests' ctx.sandbox: a workspace folder
	// of their own holding Files, whose Exec answers from Exec. Without
	// it a sandboxed assistant's script tests get its real sandbox.
	Sandbox *ScriptedSandbox `json:"sandbox,omitempty"`
}

// AuthorizedConfig is Yao's authorized info; user_id and team_id (or
// tenant_id) choose who the tests run as.
type AuthorizedConfig struct {
	Sub         string         `json:"sub,omitempty"`
	ClientID    string         `json:"client_id,omitempty"`
	Scope       string         `json:"scope,omitempty"`
	SessionID   string         `json:"session_id,omitempty"`
	UserID      string         `json:"user_id,omitempty"`
	TeamID      string         `json:"team_id,omitempty"`
	TenantID    string         `json:"tenant_id,omitempty"`
	RememberMe  bool           `json:"remember_me,omitempty"`
	Constraints map[string]any `json:"constraints,omitempty"`
}

// ClientConfig is Yao's client info.
type ClientConfig struct {
	Type      string `json:"type,omitempty"`
	UserAgent string `json:"user_agent,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// ScriptedSandbox is a sandbox played from a script.
type ScriptedSandbox struct {
	// Files are the workspace's files at the start of each test, by path.
	Files map[string]string `json:"files,omitempty"`
	// Exec are the answers to commands, the first that matches wins.
	Exec []ScriptedExec `json:"exec,omitempty"`
}

// ScriptedExec answers the commands it matches.
type ScriptedExec struct {
	// Argv matches a command exactly; Match is a regular expression on
	// the command line (argv joined by spaces). One of them is set.
	Argv  []string `json:"argv,omitempty"`
	Match string   `json:"match,omitempty"`

	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`

	re *regexp.Regexp
}

// LoadContext reads a context file; unknown fields are errors.
func LoadContext(path string) (*ContextConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("context file: %w", err)
	}
	var c ContextConfig
	if err := strictUnmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("context file %s: %w", path, err)
	}
	for ns := range c.Memory {
		if ns != string(jsapi.NamespaceUser) && ns != string(jsapi.NamespaceChat) {
			return nil, fmt.Errorf("context file %s: memory.%s: want \"user\" or \"chat\"", path, ns)
		}
	}
	if s := c.Sandbox; s != nil {
		for i := range s.Exec {
			e := &s.Exec[i]
			switch {
			case len(e.Argv) == 0 && e.Match == "":
				return nil, fmt.Errorf("context file %s: sandbox.exec[%d]: set argv or match", path, i)
			case e.Match != "":
				re, err := regexp.Compile(e.Match)
				if err != nil {
					return nil, fmt.Errorf("context file %s: sandbox.exec[%d].match: %v", path, i, err)
				}
				e.re = re
			}
		}
		for p := range s.Files {
			if _, err := sandbox.Rel(p); err != nil {
				return nil, fmt.Errorf("context file %s: sandbox.files: %v", path, err)
			}
		}
	}
	return &c, nil
}

// memory returns the store script tests use and the owner's seed.
func (c *ContextConfig) memory(user, chatID string, app jsapi.MemoryStore) (jsapi.MemoryStore, error) {
	if c == nil || c.Memory == nil {
		if app == nil {
			return jsapi.NewMemStore(), nil
		}
		return app, nil
	}
	m := jsapi.NewMemStore()
	for ns, vals := range c.Memory {
		owner := user
		if ns == string(jsapi.NamespaceChat) {
			owner = jsapi.ChatOwner(user, chatID)
		}
		for k, v := range vals {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			if err := m.Set(context.Background(), jsapi.Namespace(ns), owner, k, b); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// scriptedBox is a ScriptedSandbox for one test: a temporary workspace and
// scripted answers.
type scriptedBox struct {
	cfg *ScriptedSandbox
	dir string
	ws  *sandbox.Workspace
}

var _ sandbox.Sandbox = (*scriptedBox)(nil)

func newScriptedBox(cfg *ScriptedSandbox) (*scriptedBox, error) {
	dir, err := os.MkdirTemp("", "agentbox-test-ws-")
	if err != nil {
		return nil, fmt.Errorf("scripted sandbox: %w", err)
	}
	ws, err := sandbox.OpenWorkspace(dir, -1, -1)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("scripted sandbox: %w", err)
	}
	b := &scriptedBox{cfg: cfg, dir: dir, ws: ws}
	for p, content := range cfg.Files {
		if err := ws.WriteFile(context.Background(), p, []byte(content), 0o644); err != nil {
			b.Remove(context.Background())
			return nil, fmt.Errorf("scripted sandbox: file %s: %w", p, err)
		}
	}
	return b, nil
}

func (b *scriptedBox) ID() string                    { return "scripted" }
func (b *scriptedBox) Workspace() *sandbox.Workspace { return b.ws }

// Exec answers from the first rule that matches; a command no rule
// matches exits 127 with a message on stderr.
func (b *scriptedBox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	line := strings.Join(req.Argv, " ")
	for _, e := range b.cfg.Exec {
		if e.re != nil && e.re.MatchString(line) || e.re == nil && slices.Equal(e.Argv, req.Argv) {
			return &sandbox.ExecResult{ExitCode: e.ExitCode, Stdout: e.Stdout, Stderr: e.Stderr, Cwd: sandbox.Workdir}, nil
		}
	}
	return &sandbox.ExecResult{ExitCode: 127, Cwd: sandbox.Workdir,
		Stderr: fmt.Sprintf("scripted sandbox: no answer for %q (add one to the context file's sandbox.exec)", line)}, nil
}

// Start is not scripted.
func (b *scriptedBox) Start(context.Context, sandbox.ExecRequest) (sandbox.Process, error) {
	return nil, errors.New("scripted sandbox: Start is not scripted; use Exec")
}

// Remove deletes the workspace folder.
func (b *scriptedBox) Remove(context.Context) error {
	return errors.Join(b.ws.Close(), os.RemoveAll(b.dir))
}

// lazyBox is an assistant's real sandbox for a script test, opened (as a
// terminal of the test's chat) the first time the test touches it.
type lazyBox struct {
	ctx  context.Context
	open func(context.Context) (sandbox.Sandbox, func() error, error)

	mu    sync.Mutex
	tried bool
	sb    sandbox.Sandbox
	close func() error
	err   error
}

var _ sandbox.Sandbox = (*lazyBox)(nil)

func (l *lazyBox) get() (sandbox.Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tried {
		l.tried = true
		l.sb, l.close, l.err = l.open(l.ctx)
	}
	return l.sb, l.err
}

func (l *lazyBox) ID() string {
	if sb, err := l.get(); err == nil {
		return sb.ID()
	}
	return ""
}

func (l *lazyBox) Workspace() *sandbox.Workspace {
	sb, err := l.get()
	if err != nil {
		return nil
	}
	return sb.Workspace()
}

func (l *lazyBox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	sb, err := l.get()
	if err != nil {
		return nil, err
	}
	return sb.Exec(ctx, req)
}

func (l *lazyBox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	sb, err := l.get()
	if err != nil {
		return nil, err
	}
	return sb.Start(ctx, req)
}

// Remove closes the terminal (removing the sandbox) if it was opened.
func (l *lazyBox) Remove(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = true
	if l.close == nil {
		return nil
	}
	err := l.close()
	l.close = nil
	return err
}

// state reports whether the test opened the sandbox, and the error if it
// did not start.
func (l *lazyBox) state() (opened bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb != nil, l.err
}

// logSink collects the lines a test logs, from t.log and console.*.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) add(line string) {
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
}

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// handler makes a slog handler that writes console.* lines to the sink.
func (s *logSink) handler() slog.Handler { return sinkHandler{s} }

type sinkHandler struct{ s *logSink }

func (h sinkHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h sinkHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	if r.Level >= slog.LevelWarn {
		line = "[" + strings.ToLower(r.Level.String()) + "] " + line
	}
	h.s.add(line)
	return nil
}

func (h sinkHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h sinkHandler) WithGroup(string) slog.Handler      { return h }
