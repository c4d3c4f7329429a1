package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// initialConnector is the connector a turn starts with: the request's
// choice when the assistant's connector_options allow it, else the
// assistant's ("$ENV.NAME" resolved now when it was not set at load).
func (t *turn) initialConnector(app *assistant.App, a *assistant.Assistant) (string, error) {
	if c := t.req.Connector; c != "" {
		if err := allowedConnector(app, a, c); err != nil {
			return "", badRequest("connector: %v", err)
		}
		return c, nil
	}
	if a.ConnectorEnv != "" {
		id := os.Getenv(a.ConnectorEnv)
		if id == "" {
			return "", chat.Errorf(chat.ErrInternal, "assistant %q: its connector is $ENV.%s, which is not set", a.ID, a.ConnectorEnv)
		}
		if _, ok := app.Connectors[id]; !ok {
			return "", chat.Errorf(chat.ErrInternal, "assistant %q: $ENV.%s names connector %q, which is not defined", a.ID, a.ConnectorEnv, id)
		}
		return id, nil
	}
	return a.Connector, nil
}

// allowedConnector checks a request's choice of connector against the
// assistant's connector_options.
func allowedConnector(app *assistant.App, a *assistant.Assistant, id string) error {
	if id == a.Connector {
		return nil
	}
	c := a.ConnectorOptions
	if c == nil || (c.Optional != nil && !*c.Optional) {
		return fmt.Errorf("assistant %q does not let a request choose its connector (package.yao connector_options)", a.ID)
	}
	conn, ok := app.Connectors[id]
	if !ok {
		return fmt.Errorf("unknown connector %q", id)
	}
	if len(c.Connectors) > 0 {
		if !slices.Contains(c.Connectors, id) {
			return fmt.Errorf("assistant %q lets a request choose among %s, not %q", a.ID, strings.Join(c.Connectors, ", "), id)
		}
		return nil
	}
	for _, f := range c.Filters {
		v, declared := conn.Options.Capabilities[f]
		if b, isBool := v.(bool); !declared || (isBool && !b) {
			return fmt.Errorf("connector %q does not declare the capability %s that assistant %q requires", id, f, a.ID)
		}
	}
	return nil
}

// withMCPServers returns the assistant the executor runs: a itself, or a
// copy whose MCP servers are the ones a Create hook chose (mcp_servers),
// with $ENV references in server urls, commands and arguments resolved.
func (t *turn) withMCPServers(app *assistant.App, a *assistant.Assistant, chosen []chat.MCPServerOption) (*assistant.Assistant, error) {
	refs := a.MCP
	defs := a.MCPServers
	if chosen != nil {
		refs, defs = nil, map[string]*assistant.MCPServer{}
		for _, o := range chosen {
			def, ok := app.MCPServer(a, o.ServerID)
			if !ok {
				return nil, chat.Errorf(chat.ErrHook, "Create hook chose MCP server %q, which is not defined", o.ServerID)
			}
			if def.Transport == "process" {
				return nil, chat.Errorf(chat.ErrHook, "Create hook chose MCP server %q, which runs Yao processes (%s): agentbox cannot run it", o.ServerID, def.File)
			}
			refs = append(refs, assistant.MCPRef{ServerID: o.ServerID, Tools: o.Tools, Resources: o.Resources})
			defs[o.ServerID] = def
		}
	}
	changed := chosen != nil
	resolved := make(map[string]*assistant.MCPServer, len(defs))
	for id, def := range defs {
		r, err := resolveMCPServer(def)
		if err != nil {
			return nil, chat.Errorf(chat.ErrInternal, "mcp server %s (%s): %v", id, def.File, err)
		}
		changed = changed || r != def
		resolved[id] = r
	}
	if !changed {
		return a, nil
	}
	cp := *a
	cp.MCP, cp.MCPServers = refs, resolved
	return &cp, nil
}

// resolveMCPServer returns def, or a copy with the $ENV references of its
// url, command and arguments resolved (env and headers are credentials:
// mcpForSandbox keeps them out of the sandbox).
func resolveMCPServer(def *assistant.MCPServer) (*assistant.MCPServer, error) {
	has := strings.HasPrefix(def.URL, assistant.EnvPrefix) || strings.HasPrefix(def.Command, assistant.EnvPrefix)
	for _, a := range def.Args {
		has = has || strings.HasPrefix(a, assistant.EnvPrefix)
	}
	if !has {
		return def, nil
	}
	cp := *def
	var err error
	if cp.URL, err = assistant.ResolveValue(def.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if cp.Command, err = assistant.ResolveValue(def.Command); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	cp.Args = make([]string, len(def.Args))
	for i, a := range def.Args {
		if cp.Args[i], err = assistant.ResolveValue(a); err != nil {
			return nil, fmt.Errorf("arguments[%d]: %w", i, err)
		}
	}
	return &cp, nil
}

// sandboxEnv is the environment a Yao v2 sandbox sets (its
// "environment"); an unset $ENV variable fails the turn naming it.
// Secrets are not here: the sandbox holds only placeholders for them and
// the bridge's egress proxy puts the values into requests (egress.go).
func sandboxEnv(a *assistant.Assistant) (map[string]string, error) {
	sb := a.Sandbox
	if len(sb.Environment) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(sb.Environment))
	for k, v := range sb.Environment {
		r, err := assistant.ResolveValue(v)
		if err != nil {
			return nil, chat.Errorf(chat.ErrSandbox, "sandbox environment %s (%s): %v", k, sb.File, err)
		}
		env[k] = r
	}
	return env, nil
}

// prepareMarker holds, per assistant, the hash of the sandbox definition
// whose once-steps already ran in a workspace.
const prepareMarker = ".agentbox/prepare"

// prepare runs a v2 sandbox's prepare steps before the Create hook: exec
// steps with sh -c in the workspace (HOME is the workspace, as in Yao),
// copy steps from the assistant folder into the workspace. Once-steps run
// again only when the sandbox definition changed.
func (t *turn) prepare(ctx context.Context, a *assistant.Assistant, sb sandbox.Sandbox) error {
	steps := a.Sandbox.Prepare
	if len(steps) == 0 {
		return nil
	}
	ws := sb.Workspace()
	b, _ := json.Marshal(a.Sandbox)
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	marker := path.Join(prepareMarker, strings.ReplaceAll(a.ID, "/", "_"))
	done := false
	if old, err := ws.ReadFile(ctx, marker, 1<<10); err == nil && strings.TrimSpace(string(old)) == hash {
		done = true
	}
	id := t.nextID("loading")
	msg := "Preparing the sandbox…"
	t.emit(chat.Event{Event: chat.Start, ID: id, Type: chat.TypeLoading, Text: msg, Props: map[string]any{"message": msg}})
	defer t.emit(chat.Event{Event: chat.End, ID: id, Type: chat.TypeLoading})
	for i, st := range steps {
		if st.Once && done {
			continue
		}
		var err error
		switch st.Action {
		case "exec":
			script := st.Cmd
			if st.Background {
				script = "nohup sh -c '" + strings.ReplaceAll(st.Cmd, "'", `'\''`) + "' >/dev/null 2>&1 &"
			}
			var res *sandbox.ExecResult
			res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{script}, Shell: true, Env: map[string]string{"HOME": sandbox.Workdir}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit code %d: %s", res.ExitCode, strings.TrimSpace(lastLine(res.Stderr+res.Stdout)))
			}
		case "copy":
			err = copyIntoWorkspace(ctx, ws, filepath.Join(a.Dir, filepath.FromSlash(st.Src)), workspacePath(st.Dst))
		}
		if err != nil {
			if st.IgnoreError {
				t.p.log.Info("sandbox prepare step failed; ignored", "assistant", a.ID, "step", i, "error", err)
				continue
			}
			return chat.Errorf(chat.ErrSandbox, "sandbox prepare step %d (%s, %s): %v", i, st.Action, a.Sandbox.File, err)
		}
	}
	if err := ws.MkdirAll(ctx, path.Dir(marker)); err == nil {
		_ = ws.WriteFile(ctx, marker, []byte(hash+"\n"), 0o644)
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// workspacePath turns a prepare step's dst into a workspace path: "~/" and
// /workspace/ are the workspace's root (HOME is the workspace in Yao).
func workspacePath(dst string) string {
	dst = strings.TrimPrefix(dst, "~")
	dst = strings.TrimPrefix(dst, sandbox.Workdir)
	dst = strings.TrimPrefix(dst, "/")
	if dst == "" {
		return "."
	}
	return dst
}

// copyIntoWorkspace copies a host file or folder into the workspace at dst
// (a folder's content goes into dst). Symlinks are not followed.
func copyIntoWorkspace(ctx context.Context, ws *sandbox.Workspace, src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := ws.MkdirAll(ctx, path.Dir(dst)); err != nil {
			return err
		}
		return ws.WriteFile(ctx, dst, b, st.Mode().Perm())
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return ws.MkdirAll(ctx, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, _ := d.Info()
			return ws.WriteFile(ctx, target, b, info.Mode().Perm())
		}
		return nil
	})
}
