package agentcli

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// A CLI reads its configuration from its home, which the executors keep in
// the chat's workspace (the only place that outlives a container) and so
// within the agent's reach: an MCP server, plugin, extension, hook or
// instruction file the agent writes there would configure the next run.
// ResetHome is how every executor prevents that: before each run it
// empties the home but for the files the CLI's sessions are in, and the
// executor then writes the run's configuration from the assistant's
// definition.

// ResetHome empties the CLI home dir (a workspace path, created when
// missing) but for what matches keep, so that only the assistant's
// definition configures the run. keep are slash-separated paths relative
// to dir whose elements are path.Match patterns: a pattern matching a
// file keeps it, one matching a folder keeps the folder and everything
// in it, and a last element "**" keeps everything below the folders
// before it ("sessions/**"). Only regular files and folders are kept:
// symlinks, FIFOs and other special files go wherever they are, and a
// kept file is never opened. A symlink or file in the place of dir or of
// a folder above it is removed. A malformed pattern is an error before
// anything is removed.
func ResetHome(ctx context.Context, ws *sandbox.Workspace, dir string, keep ...string) error {
	rules := make([][]string, 0, len(keep))
	for _, k := range keep {
		r := strings.Split(k, "/")
		for _, e := range r {
			if _, err := path.Match(e, ""); err != nil || e == ".." || e == "." || e == "" {
				return fmt.Errorf("reset home %s: bad keep pattern %q", dir, k)
			}
		}
		rules = append(rules, r)
	}
	// The home and the folders above it must be real folders: through a
	// symlink the agent left, emptying the home would empty another
	// folder of the workspace.
	parts := strings.Split(path.Clean(dir), "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		st, err := ws.Lstat(ctx, sub)
		if err != nil || st.Mode.IsDir() {
			continue
		}
		if err := ws.RemoveAll(ctx, sub); err != nil {
			return fmt.Errorf("reset home: %w", err)
		}
	}
	if err := ws.MkdirAll(ctx, dir); err != nil {
		return fmt.Errorf("reset home: %w", err)
	}
	return resetDir(ctx, ws, dir, nil, rules)
}

// resetDir applies rules to the entries of dir/rel (rel as elements).
func resetDir(ctx context.Context, ws *sandbox.Workspace, dir string, rel []string, rules [][]string) error {
	p := path.Join(append([]string{dir}, rel...)...)
	entries, err := ws.ListDir(ctx, p)
	if err != nil {
		return fmt.Errorf("reset home: %w", err)
	}
	for _, e := range entries {
		elems := append(append([]string(nil), rel...), e.Name)
		keep, descend := verdict(rules, elems)
		q := path.Join(p, e.Name)
		switch {
		case e.Mode.IsRegular() && keep:
		case e.Mode.IsDir() && keep:
			err = sanitize(ctx, ws, q)
		case e.Mode.IsDir() && descend:
			err = resetDir(ctx, ws, dir, elems, rules)
		default:
			err = ws.RemoveAll(ctx, q)
		}
		if err != nil {
			return fmt.Errorf("reset home: %w", err)
		}
	}
	return nil
}

// verdict says whether the entry at elems is kept whole (keep) or may
// hold kept entries (descend).
func verdict(rules [][]string, elems []string) (keep, descend bool) {
	for _, r := range rules {
		k, d := match(r, elems)
		keep, descend = keep || k, descend || d
	}
	return keep, descend
}

func match(rule, elems []string) (keep, descend bool) {
	for i, e := range elems {
		if i >= len(rule) {
			return false, false
		}
		if rule[i] == "**" {
			return true, false
		}
		if ok, _ := path.Match(rule[i], e); !ok {
			return false, false
		}
	}
	switch {
	case len(rule) == len(elems):
		return true, false
	case len(rule) == len(elems)+1 && rule[len(elems)] == "**":
		return true, false
	}
	return false, true
}

// sanitize removes every entry below the kept folder p that is neither a
// regular file nor a folder.
func sanitize(ctx context.Context, ws *sandbox.Workspace, p string) error {
	entries, err := ws.ListDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		q := path.Join(p, e.Name)
		switch {
		case e.Mode.IsDir():
			err = sanitize(ctx, ws, q)
		case e.Mode.Type()&fs.ModeType != 0:
			err = ws.RemoveAll(ctx, q)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// GitEnv is the environment every CLI runs with, so that the git
// configuration of the workspace (.git/config, which the agent can write)
// runs nothing when the CLI runs git itself, as at its start (git status):
// no fsmonitor command, no hooks. Git's command-line configuration
// (GIT_CONFIG_COUNT) overrides the repository's. The agent's commands
// inherit it: a repository's hooks do not run for its git commands
// either.
func GitEnv() map[string]string {
	return map[string]string{
		"GIT_CONFIG_COUNT":   "2",
		"GIT_CONFIG_KEY_0":   "core.fsmonitor",
		"GIT_CONFIG_VALUE_0": "false",
		"GIT_CONFIG_KEY_1":   "core.hooksPath",
		"GIT_CONFIG_VALUE_1": "/dev/null",
	}
}
