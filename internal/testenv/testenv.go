// Package testenv finds the real parts integration tests need (a Docker
// engine, the sandbox image, the Claude Code CLI, bubblewrap) and decides
// what happens when one is missing: a skip on a developer machine, a
// failure under CI=true, where an integration test must never skip.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// ClaudeImage is the sandbox image with the Claude Code CLI, built by
// `make image`. AGENTBOX_CLAUDE_IMAGE overrides it.
const ClaudeImage = "agentbox/sandbox-claude:latest"

// CI reports whether tests run under CI (CI=true), where missing parts fail.
func CI() bool { return os.Getenv("CI") == "true" || os.Getenv("CI") == "1" }

// Missing skips t, or fails it under CI, because what is missing.
func Missing(t testing.TB, what string) {
	t.Helper()
	if CI() {
		t.Fatalf("integration test needs %s (CI=true: missing parts are failures; run `make test` to set them up)", what)
	}
	t.Skipf("needs %s (run `make test` to set it up)", what)
}

// RepoRoot returns the module root (the folder holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	dockerOnce sync.Once
	dockerErr  error
)

// Docker requires a Docker engine that answers.
func Docker(t testing.TB) {
	t.Helper()
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dockerErr = exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.APIVersion}}").Run()
	})
	if dockerErr != nil {
		Missing(t, "a running Docker engine ("+dockerErr.Error()+")")
	}
}

// Image requires the Claude sandbox image and returns its name.
func Image(t testing.TB) string {
	t.Helper()
	Docker(t)
	img := os.Getenv("AGENTBOX_CLAUDE_IMAGE")
	if img == "" {
		img = ClaudeImage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, "docker", "image", "inspect", img).Run(); err != nil {
		Missing(t, "the sandbox image "+img+" (make image)")
	}
	return img
}

// ClaudeBin requires the Claude Code CLI on the host and returns its path:
// AGENTBOX_CLAUDE_BIN, then .cache/bin/claude under the repository, then
// PATH.
func ClaudeBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENTBOX_CLAUDE_BIN"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p := filepath.Join(RepoRoot(), ".cache", "bin", "claude"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	Missing(t, "the Claude Code CLI (make cli)")
	return ""
}

// Bwrap requires bubblewrap and returns its path.
func Bwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		Missing(t, "bubblewrap (apt-get install bubblewrap)")
	}
	return p
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

var (
	agentboxOnce sync.Once
	agentboxBin  string
	agentboxErr  error
)

// Agentbox builds the static agentbox binary (CGO_ENABLED=0, as `make
// build` does) once per test binary and returns its path. Sandboxes run it
// as the bridge.
func Agentbox(t testing.TB) string {
	t.Helper()
	agentboxOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentbox-bin-")
		if err != nil {
			agentboxErr = err
			return
		}
		agentboxBin = filepath.Join(dir, "agentbox")
		cmd := exec.Command("go", "build", "-o", agentboxBin, "./cmd/agentbox")
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentboxErr = fmt.Errorf("go build ./cmd/agentbox: %v\n%s", err, out)
		}
	})
	if agentboxErr != nil {
		t.Fatal(agentboxErr)
	}
	return agentboxBin
}
