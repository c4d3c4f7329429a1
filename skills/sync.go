package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// maxSkillBytes bounds what one skill folder may copy into a workspace, so a
// stray large file in a skill cannot fill every chat's workspace.
const maxSkillBytes = 64 << 20

// Sync makes the workspace folder dest (".claude/skills") contain exactly
// the skills in list: each skill folder is copied recursively (scripts/,
// references/, assets/, executable bits kept), a skill held in memory
// (Draft.Build) is written out, and everything else under
// dest, including whatever the agent left there, is removed first. All
// writes go through the confined workspace; a symlink the agent planted on
// the way to dest is removed rather than followed.
//
// On the host side, symlinks inside a skill folder are followed only to
// regular files inside that same folder; others are skipped. On the
// workspace side nothing the agent planted is opened or followed: a FIFO
// or symlink where a skill goes is removed, and every write is a new file
// renamed into place (sandbox.Workspace.WriteFile), so Sync cannot block
// on it or escape through it. ctx bounds the whole copy. Sync is not safe
// to call concurrently for the same workspace.
func Sync(ctx context.Context, ws *sandbox.Workspace, dest string, list []*Skill) error {
	rel, err := sandbox.Rel(dest)
	if err != nil {
		return fmt.Errorf("skills sync: %w", err)
	}
	if rel == "." {
		return fmt.Errorf("skills sync: destination %q is the workspace root", dest)
	}
	seen := map[string]bool{}
	for _, s := range list {
		if !namePattern.MatchString(s.Name) {
			return fmt.Errorf("skills sync: invalid skill name %q", s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("skills sync: skill %q listed twice", s.Name)
		}
		seen[s.Name] = true
	}
	if err := clearPath(ctx, ws, rel); err != nil {
		return fmt.Errorf("skills sync: %w", err)
	}
	if err := ws.MkdirAll(ctx, rel); err != nil {
		return fmt.Errorf("skills sync: %w", err)
	}
	for _, s := range list {
		if err := copySkill(ctx, ws, path.Join(rel, s.Name), s); err != nil {
			return fmt.Errorf("skills sync: skill %s: %w", s.Name, err)
		}
	}
	return nil
}

// clearPath removes rel and replaces any parent of it that is not a real
// folder (a symlink or a file the agent created) so the copy lands where
// the CLI will look.
func clearPath(ctx context.Context, ws *sandbox.Workspace, rel string) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		st, err := ws.Lstat(ctx, p)
		if errors.Is(err, sandbox.ErrNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("inspect %s: %w", p, err)
		}
		if st.IsDir {
			continue
		}
		// A file, FIFO or symlink the agent put in the way: removed (a
		// symlink's target is never touched).
		if err := ws.RemoveAll(ctx, p); err != nil {
			return fmt.Errorf("replace %s: %w", p, err)
		}
		break
	}
	// RemoveAll on a symlink removes the link, not its target.
	return ws.RemoveAll(ctx, rel)
}

// copySkill copies the skill folder into the workspace at dst.
func copySkill(ctx context.Context, ws *sandbox.Workspace, dst string, s *Skill) error {
	if s.files != nil {
		return writeFiles(ctx, ws, dst, s.files)
	}
	src, err := os.OpenRoot(s.Dir)
	if err != nil {
		return fmt.Errorf("open: %w", unwrapPath(err))
	}
	defer src.Close()
	if err := ws.MkdirAll(ctx, dst); err != nil {
		return err
	}
	var total int64
	return fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read %s: %w", p, unwrapPath(err))
		}
		if p == "." {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		target := path.Join(dst, p)
		var info fs.FileInfo
		switch {
		case d.IsDir():
			return ws.MkdirAll(ctx, target)
		case d.Type()&fs.ModeSymlink != 0:
			// os.Root refuses a link that leaves the skill folder; a link to
			// a folder is skipped so that link cycles cannot loop.
			info, err = src.Stat(p)
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
		case d.Type().IsRegular():
			if info, err = d.Info(); err != nil {
				return fmt.Errorf("stat %s: %w", p, unwrapPath(err))
			}
		default:
			return nil // devices, sockets, pipes: never read
		}
		total += info.Size()
		if total > maxSkillBytes {
			return fmt.Errorf("folder is larger than %d MiB", maxSkillBytes>>20)
		}
		data, err := src.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, unwrapPath(err))
		}
		// Keep the executable bit; the sandbox user must read everything.
		perm := fs.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			perm = 0o755
		}
		return ws.WriteFile(ctx, target, data, perm)
	})
}

// writeFiles writes the files of a skill held in memory (validated by
// Draft.Build: relative, clean, bounded) into the workspace at dst; those
// under scripts/ are executable.
func writeFiles(ctx context.Context, ws *sandbox.Workspace, dst string, files []File) error {
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		target := path.Join(dst, f.Path)
		if err := ws.MkdirAll(ctx, path.Dir(target)); err != nil {
			return err
		}
		perm := fs.FileMode(0o644)
		if strings.HasPrefix(f.Path, "scripts/") {
			perm = 0o755
		}
		if err := ws.WriteFile(ctx, target, []byte(f.Content), perm); err != nil {
			return err
		}
	}
	return nil
}
