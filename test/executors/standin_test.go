package executors

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/images"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The Cursor CLI cannot be installed here (cursor.com is not reachable), so
// its executor runs a stand-in (testdata/cursor/standin): a package laid
// out as the CLI's own (the cursor-agent launcher, the package's Node.js
// and its program), built into an image by images/cursor/build.sh exactly
// as the real package is. What the stand-in does is in its script.

// standinTurn is what the stand-in does for an input that contains When:
// run Shell as its agent's shell call (when set), then answer.
type standinTurn struct {
	When   string `json:"when"`
	Shell  string `json:"shell,omitempty"`
	Answer string `json:"answer"`
}

// standinImage returns the image of the stand-in with script, built by
// images/cursor/build.sh from a package made here (kept in the cache, like
// the image, by its inputs).
func standinImage(t *testing.T, script []standinTurn) string {
	t.Helper()
	testenv.Docker(t)
	root := testenv.RepoRoot()
	node := testenv.CLIBin(t, "node")
	scriptJSON, _ := json.MarshalIndent(script, "", "  ")
	base := images.Name(testenv.ImagePrefix(), "base", "")
	baseID, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", base).Output()
	if err != nil {
		testenv.Missing(t, "the base image "+base+" (make image)")
	}
	h := sha256.New()
	h.Write(baseID)
	h.Write(scriptJSON)
	for _, f := range []string{"testdata/cursor/standin/cursor-agent", "testdata/cursor/standin/index.js", "images/cursor/build.sh", "scripts/common.sh"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	st, err := os.Stat(node)
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte(st.ModTime().String() + st.Name()))
	key := hex.EncodeToString(h.Sum(nil))[:16]
	img := testenv.ImagePrefix() + "-test/sandbox-cursor-standin:" + key
	if exec.Command("docker", "image", "inspect", img).Run() == nil {
		return img
	}

	cache := filepath.Join(cacheDir(t), "cursor-standin")
	tarball := filepath.Join(cache, key+".tar.gz")
	if _, err := os.Stat(tarball); err != nil {
		pkg := filepath.Join(t.TempDir(), "agent-cli-package")
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cursor-agent", "index.js"} {
			b, err := os.ReadFile(filepath.Join(root, "testdata/cursor/standin", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, f), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(pkg, "script.json"), scriptJSON, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", node, filepath.Join(pkg, "node")).CombinedOutput(); err != nil {
			t.Fatalf("copy node: %v %s", err, out)
		}
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := tarball + ".tmp"
		cmd := exec.Command("sh", "-c", `tar -C "$1" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c agent-cli-package | gzip -n -1 > "$2"`,
			"sh", filepath.Dir(pkg), tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pack the stand-in: %v %s", err, out)
		}
		if err := os.Rename(tmp, tarball); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "images/cursor/build.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CURSOR_AGENT_TARBALL="+tarball, "AGENTBOX_CURSOR_IMAGE="+img,
		"AGENTBOX_IMAGE_PREFIX="+testenv.ImagePrefix())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("images/cursor/build.sh with the stand-in: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), img) {
		t.Logf("build: %s", out.String())
	}
	return img
}

// cacheDir is the cache of what is slow to make: $AGENTBOX_CACHE, else
// $HOME/.cache/agentbox.
func cacheDir(t *testing.T) string {
	if d := os.Getenv("AGENTBOX_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache", "agentbox")
}
