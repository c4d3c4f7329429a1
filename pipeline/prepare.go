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
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

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
