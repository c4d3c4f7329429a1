package e2etest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// CopyExampleApp copies the example app (examples/app, without its data)
// to dir/app and returns that folder.
func CopyExampleApp(t testing.TB, dir string) string {
	t.Helper()
	app := filepath.Join(dir, "app")
	testenv.CopyExampleApp(t, app)
	return app
}

// Write writes content to path, making its folder when missing; it fails
// the test on an error.
func Write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ShortDir is a new temporary folder, removed when the test ends, whose
// path is short enough for the bridge's socket paths (a server's TMPDIR).
func ShortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "abt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// NewID is prefix, a dash and 8 random hex digits: ids (chats, users) that
// parallel runs and the leftovers of earlier runs never share.
func NewID(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// UnmountUnder unmounts every mount point under dir, deepest first:
// `agentbox run` leaves its chat's workspace mounted for a look at it.
func UnmountUnder(t testing.TB, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], 0); err != nil {
			t.Errorf("unmount %s: %v", points[i], err)
		}
	}
}

// Run runs `agentbox run --app APP --json ARGS...` with env added to the
// test's environment and returns its events; it fails the test when the
// command fails.
func Run(t testing.TB, app string, env []string, args ...string) []chat.Event {
	t.Helper()
	cmd := exec.Command(testenv.Agentbox(t), append([]string{"run", "--app", app, "--json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentbox run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return DecodeEvents(t, &stdout, "")
}

// DecodeEvents reads JSON events, one a line after prefix (lines without
// it are skipped).
func DecodeEvents(t testing.TB, r io.Reader, prefix string) []chat.Event {
	t.Helper()
	var events []chat.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok || line == "" {
			continue
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not an event: %q", line)
		}
		events = append(events, e)
	}
	return events
}
