// Package testenv finds the real parts integration tests need (a Docker
// engine, the sandbox image, the Claude Code CLI, bubblewrap) and decides
// what happens when one is missing: a skip on a developer machine, a
// failure under CI=true, where an integration test must never skip.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/images"
)

// ClaudeImage is the sandbox image with the Claude Code CLI, built by
// `make image`. AGENTBOX_CLAUDE_IMAGE overrides it.
const ClaudeImage = images.Claude

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

var (
	gvisorOnce sync.Once
	gvisorErr  error
)

// GVisor requires a Docker engine with gVisor registered as its runsc and
// runsc-hostnet runtimes (scripts/ensure-docker.sh, part of `make setup`).
func GVisor(t testing.TB) {
	t.Helper()
	Docker(t)
	gvisorOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}").Output()
		switch have := strings.Fields(string(out)); {
		case err != nil:
			gvisorErr = err
		case !slices.Contains(have, "runsc") || !slices.Contains(have, "runsc-hostnet"):
			gvisorErr = fmt.Errorf("the engine's runtimes are %v", have)
		}
	})
	if gvisorErr != nil {
		Missing(t, "gVisor registered with the Docker engine as runsc and runsc-hostnet ("+gvisorErr.Error()+"; scripts/ensure-docker.sh)")
	}
}

// Image requires the Claude sandbox image (the pinned version) and returns
// its name: AGENTBOX_CLAUDE_IMAGE, else the image of CLIImage.
func Image(t testing.TB) string {
	t.Helper()
	return CLIImage(t, "claude")
}

// ImagePrefix is the prefix of the images `make image` built for the tests:
// AGENTBOX_IMAGE_PREFIX, else the product's (images.Prefix).
func ImagePrefix() string {
	if p := os.Getenv("AGENTBOX_IMAGE_PREFIX"); p != "" {
		return p
	}
	return images.Prefix
}

// CLIImage requires the sandbox image of a coding-agent CLI ("claude",
// "codex", "gemini", "opencode", "cursor") and returns its name:
// AGENTBOX_<CLI>_IMAGE, else ImagePrefix()/sandbox-<cli>:latest.
func CLIImage(t testing.TB, cli string) string {
	t.Helper()
	img := os.Getenv("AGENTBOX_" + strings.ToUpper(cli) + "_IMAGE")
	if img == "" {
		img = images.Name(ImagePrefix(), cli, "")
	}
	return RequireImage(t, img)
}

// RequireImage requires a Docker image by name and returns the name.
func RequireImage(t testing.TB, img string) string {
	t.Helper()
	Docker(t)
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
	return CLIBin(t, "claude")
}

// CLIBin requires a CLI installed by `make cli` ("claude" for the pinned
// Claude Code, "claude-VERSION", "codex", "gemini", "opencode", "node") and
// returns its path: AGENTBOX_<CLI>_BIN, then .cache/bin/<cli> under the
// repository, then PATH.
func CLIBin(t testing.TB, cli string) string {
	t.Helper()
	env := "AGENTBOX_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(cli)) + "_BIN"
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p := filepath.Join(RepoRoot(), ".cache", "bin", cli); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath(cli); err == nil {
		return p
	}
	Missing(t, "the CLI "+cli+" (make cli)")
	return ""
}

// ClaudeCLI is one supported Claude Code version: its CLI on the host and
// its sandbox image.
type ClaudeCLI struct {
	Version string
	Bin     string // the host's CLI (make cli)
	Image   string // PREFIX/sandbox-claude:VERSION (make image)
}

// ClaudeVersions returns the supported Claude Code versions, the pinned one
// first (AGENTBOX_CLAUDE_VERSIONS, else scripts/versions.sh). It requires
// each one's CLI on the host; the images are not checked (RequireImage).
func ClaudeVersions(t testing.TB) []ClaudeCLI {
	t.Helper()
	versions := strings.Fields(os.Getenv("AGENTBOX_CLAUDE_VERSIONS"))
	if len(versions) == 0 {
		pins := Pins(t)
		versions = []string{pins["CLAUDE_VERSION"]}
		if l := pins["CLAUDE_LATEST_VERSION"]; l != versions[0] {
			versions = append(versions, l)
		}
	}
	var out []ClaudeCLI
	for _, v := range versions {
		out = append(out, ClaudeCLI{
			Version: v,
			Bin:     CLIBin(t, "claude-"+v),
			Image:   images.Name(ImagePrefix(), "claude", v),
		})
	}
	return out
}

// ClaudeSDK requires the Claude Agent SDK's type declarations (make cli)
// and returns the path of its sdk.d.ts: AGENTBOX_CLAUDE_SDK, else the one
// under .cache/cli/sdk.
func ClaudeSDK(t testing.TB) string {
	t.Helper()
	p := os.Getenv("AGENTBOX_CLAUDE_SDK")
	if p == "" {
		p = filepath.Join(RepoRoot(), ".cache", "cli", "sdk", "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.d.ts")
	}
	if !fileExists(p) {
		Missing(t, "the Claude Agent SDK's sdk.d.ts at "+p+" (make cli)")
	}
	return p
}

var pinLine = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(\S+)$`)

// Pins returns the pinned versions of scripts/versions.sh (NAME=value
// lines), failing t when the file cannot be read or a line is neither a
// pin, a comment nor blank.
func Pins(t testing.TB) map[string]string {
	t.Helper()
	path := filepath.Join(RepoRoot(), "scripts", "versions.sh")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("pinned versions: %v", err)
	}
	defer f.Close()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := pinLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s:%d: want NAME=value, a comment or a blank line, got %q", path, n, line)
		}
		pins[m[1]] = m[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("pinned versions: %v", err)
	}
	return pins
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

// Tool requires a command on PATH (curl, git) and returns its path.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" (make tools)")
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
// build` does, with the web app bundled when its npm packages are there)
// once per test binary and returns its path. Sandboxes run it as the
// bridge.
func Agentbox(t testing.TB) string {
	t.Helper()
	agentboxOnce.Do(func() {
		removeDeadBuilds()
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid()))
		if err != nil {
			agentboxErr = err
			return
		}
		agentboxBin = filepath.Join(dir, "agentbox")
		if err := bundleWeb(); err != nil {
			agentboxErr = fmt.Errorf("bundle the web app: %w", err)
			return
		}
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

// buildPrefix names the folders Agentbox builds into: the test binary's
// pid follows. Nothing runs after a package's last test to remove its
// folder, so the next build removes those of test processes that are gone.
const buildPrefix = "agentbox-testbin-"

func removeDeadBuilds() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), buildPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
	}
}

// LoopDisks requires what loop-mounted workspace disks need: root, loop
// devices and e2fsprogs (sandbox.DiskLoop). Without root the product runs
// its degraded mode, which tests check on their own.
func LoopDisks(t testing.TB) {
	t.Helper()
	Root(t, "to loop-mount workspace disk images")
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		Missing(t, "loop devices (/dev/loop-control)")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil && !fileExists("/usr/sbin/"+tool) && !fileExists("/sbin/"+tool) {
			Missing(t, tool+" (apt-get install e2fsprogs)")
		}
	}
}

// Root requires the test to run as root, why says what for: it skips
// without, or fails under CI (which runs as root).
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root, "+why+" (CI runs as root)")
	}
}

// CopyExampleApp copies the repository's examples/app into dst, without
// its data folder: `make demo` leaves workspace images there (sparse files
// of 10 GiB each that a plain copy would write out in full).
func CopyExampleApp(t testing.TB, dst string) {
	t.Helper()
	src := os.DirFS(filepath.Join(RepoRoot(), "examples", "app"))
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == "data" && d.IsDir():
			return fs.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, p), 0o755)
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, p), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the example app: %v", err)
	}
}
