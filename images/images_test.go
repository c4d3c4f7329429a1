package images_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/images"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// buildList is what `scripts/build-image.sh --list` prints for prefix.
func buildList(t *testing.T, prefix string) []string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "scripts", "build-image.sh"), "--list")
	cmd.Env = append(os.Environ(), "AGENTBOX_IMAGE_PREFIX="+prefix)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build-image.sh --list: %v", err)
	}
	return strings.Fields(string(out))
}

// The Go names and the build script's names agree.
func TestNamesMatchTheBuild(t *testing.T) {
	pins := testenv.Pins(t)
	want := []string{images.Base, images.BaseFull, images.Claude, images.Name("", "claude", pins["CLAUDE_VERSION"])}
	if pins["CLAUDE_LATEST_VERSION"] != pins["CLAUDE_VERSION"] {
		want = append(want, images.Name("", "claude", pins["CLAUDE_LATEST_VERSION"]))
	}
	want = append(want, images.ClaudeFull, images.Codex, images.Gemini, images.Opencode, images.Desktop)
	if got := buildList(t, images.Prefix); !slices.Equal(got, want) {
		t.Errorf("build-image.sh --list = %q, want %q", got, want)
	}
	for _, cmd := range []string{"claude", "codex", "cursor", "gemini", "opencode"} {
		if got, want := images.ForCommand(cmd), images.Name("", cmd, ""); got != want {
			t.Errorf("ForCommand(%q) = %q, want %q", cmd, got, want)
		}
	}
	if got := images.ForCommand("bash"); got != "" {
		t.Errorf("ForCommand(bash) = %q, want none", got)
	}
	if got := images.Name("agentbox-dev", "claude", "2.1.330"); got != "agentbox-dev/sandbox-claude:2.1.330" {
		t.Errorf("Name = %q", got)
	}
}

var argLine = regexp.MustCompile(`(?m)^ARG ([A-Z0-9_]+)=(\S+)`)

// images/*/Dockerfile, for users with a registry, pin what
// scripts/versions.sh pins.
func TestDockerfilesPinTheSameVersions(t *testing.T) {
	pins := testenv.Pins(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "images", "*", "Dockerfile"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no images/*/Dockerfile (%v)", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range argLine.FindAllStringSubmatch(string(b), -1) {
			name, val := m[1], m[2]
			pin, ok := pins[name]
			if !ok {
				continue
			}
			seen[name] = true
			if val != pin {
				t.Errorf("%s: ARG %s=%s, but scripts/versions.sh pins %s", filepath.Base(filepath.Dir(f))+"/Dockerfile", name, val, pin)
			}
		}
	}
	for _, name := range []string{"CLAUDE_VERSION", "CODEX_VERSION", "GEMINI_VERSION", "OPENCODE_VERSION",
		"NODE_VERSION", "NPM_VERSION", "GO_VERSION", "GO_SHA256_AMD64", "GO_SHA256_ARM64"} {
		if !seen[name] {
			t.Errorf("no Dockerfile has ARG %s", name)
		}
	}
}

// kind is what an image holds, from its name.
type kind struct {
	cli     string // "" for the base images
	version string // the CLI's pinned --version output ("" when not pinned)
	full    bool   // Go too
}

func kindOf(t *testing.T, image string, pins map[string]string) kind {
	t.Helper()
	repo, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	name, ok := strings.CutPrefix(repo, "sandbox-")
	if !ok {
		t.Fatalf("image %s: want a name PREFIX/sandbox-NAME:TAG", image)
	}
	var k kind
	name, k.full = strings.CutSuffix(name, "-full")
	switch name {
	case "base":
	case "desktop":
		// Claude Code on the desktop's root filesystem
		// (desktop/desktop_test.go checks its desktop).
		k.cli, k.version = "claude", pins["CLAUDE_VERSION"]+" (Claude Code)"
	case "claude":
		v := pins["CLAUDE_VERSION"]
		if tag != "latest" {
			v = tag
		}
		k.cli, k.version = "claude", v+" (Claude Code)"
	case "codex":
		k.cli, k.version = "codex", "codex-cli "+pins["CODEX_VERSION"]
	case "gemini":
		k.cli, k.version = "gemini", pins["GEMINI_VERSION"]
	case "opencode":
		k.cli, k.version = "opencode", pins["OPENCODE_VERSION"]
	case "cursor":
		k.cli = "cursor-agent"
	default:
		t.Fatalf("image %s: unknown image %q", image, name)
	}
	return k
}

// running is how each CLI is started so that it waits for its input (on
// stdin) or runs until stopped, for the dumpable check.
var running = map[string]string{
	"claude":   "claude -p --input-format stream-json --output-format stream-json --verbose",
	"codex":    "codex exec --json --skip-git-repo-check -",
	"gemini":   "gemini --output-format stream-json --prompt ' '",
	"opencode": "timeout 7 opencode serve --port 0 --hostname 127.0.0.1",
}

func randID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestImages runs the design's quick check, each CLI's --version and the
// tools list inside every image `make image` built (AGENTBOX_IMAGES, else
// build-image.sh --list), each in a sandbox created the way the product
// creates it (read-only root, tmpfs home and /tmp, no network, uid 1000).
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs containers")
	}
	testenv.Docker(t)
	pins := testenv.Pins(t)
	list := strings.Fields(os.Getenv("AGENTBOX_IMAGES"))
	if len(list) == 0 {
		list = buildList(t, testenv.ImagePrefix())
	}
	rt, err := docker.New(context.Background(), docker.Options{Instance: "test-images-" + randID()})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range list {
		t.Run(img, func(t *testing.T) {
			t.Parallel()
			testImage(t, rt, img, kindOf(t, img, pins), pins)
		})
	}
}

func testImage(t *testing.T, rt *docker.Runtime, img string, k kind, pins map[string]string) {
	testenv.RequireImage(t, img)
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	sb, err := rt.Create(context.Background(), sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws, Image: img})
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) []string {
		t.Helper()
		// Generous: a first `go run` compiles the standard library inside
		// a CPU-limited sandbox, which takes minutes on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{script}, Shell: true, Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
		}
		return strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n")
	}

	// The design's quick check (with the image's own CLI).
	quick := "node --version && python3 --version"
	if k.cli != "" {
		quick += " && " + k.cli + " --version"
	}
	out := run(quick)
	if len(out) < 2 || out[0] != "v"+pins["NODE_VERSION"] || !strings.HasPrefix(out[1], "Python 3.") {
		t.Errorf("%s: got %q, want v%s and Python 3", quick, out, pins["NODE_VERSION"])
	}
	if k.cli != "" {
		switch {
		case len(out) < 3 || strings.TrimSpace(out[len(out)-1]) == "":
			t.Errorf("%s --version printed nothing: %q", k.cli, out)
		case k.version != "" && out[len(out)-1] != k.version:
			t.Errorf("%s --version = %q, want %q", k.cli, out[len(out)-1], k.version)
		}
	}

	// The tools agents use.
	tools := []string{"curl --version", "vim --version", "zip -v", "unzip -v", "ps --version", "less --version",
		"tree --version", "git --version", "npm --version", "npx --version", "tini --version", "bash --version"}
	if k.full {
		tools = append(tools, "go version")
	}
	var script strings.Builder
	for _, c := range tools {
		fmt.Fprintf(&script, "%s >/dev/null 2>&1 || echo 'missing: %s'\n", c, c)
	}
	if got := run(script.String() + "true"); len(got) > 1 || got[0] != "" {
		t.Errorf("tools missing:\n%s", strings.Join(got, "\n"))
	}
	if got := run("npm --version")[0]; got != pins["NPM_VERSION"] {
		t.Errorf("npm --version = %q, want %s", got, pins["NPM_VERSION"])
	}

	// Who and where the agent is: uid/gid 1000 in /workspace, a commit
	// identity, a workspace it can commit in.
	got := run(`id -u; id -g; pwd; echo "$HOME"; git init -q && echo x >f && git add f && git commit -qm x && git log --format=%an`)
	if want := []string{"1000", "1000", "/workspace", "/home/agent", "agentbox"}; !slices.Equal(got, want) {
		t.Errorf("identity: got %q, want %q", got, want)
	}
	if got := run(`node -e 'console.log(6*7)' && python3 -c 'print(6*7)'`); !slices.Equal(got, []string{"42", "42"}) {
		t.Errorf("node and python3 run scripts: got %q", got)
	}

	// The CLI's processes are not dumpable: while it waits for its input,
	// no process of the sandbox but the shell's own may be opened (its
	// /proc/PID/fd), as the agent's processes, its children, would.
	if cmd := running[k.cli]; cmd != "" {
		got := run(`(sleep 8 | ` + cmd + ` >/dev/null 2>&1) & sleep 5
for p in /proc/[0-9]*; do
  [ $p = /proc/1 ] && continue
  ls $p/fd >/dev/null 2>&1 || continue
  c=$(tr '\0' ' ' < $p/cmdline); case "$c" in sh\ *|/bin/sh\ *|sleep\ *|timeout\ *|"") continue ;; esac
  echo "open: $c"
done
wait
echo checked`)
		if !slices.Equal(got, []string{"checked"}) {
			t.Errorf("%s's processes are open to the agent's:\n%s", k.cli, strings.Join(got, "\n"))
		}
	}

	if k.full {
		if got := run("go version")[0]; !strings.HasPrefix(got, "go version go"+pins["GO_VERSION"]+" ") {
			t.Errorf("go version = %q, want go%s", got, pins["GO_VERSION"])
		}
	}
	if k.full && k.cli == "" {
		// A program built and run offline (once: the CLI images with Go
		// have the same Go layer): the toolchain is complete, never
		// downloads another (GOTOOLCHAIN=local), and what it builds in /tmp
		// runs there (go run, go test).
		got := run(`mkdir -p /tmp/m && cd /tmp/m && printf 'module m\n\ngo 1.26\n' >go.mod &&
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n' >main.go &&
go run .`)
		if !slices.Equal(got, []string{"hello from go"}) {
			t.Errorf("go run: got %q", got)
		}
	}
}
