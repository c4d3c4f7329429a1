// Package resources runs the agentbox binary the way a person trying it
// does — a turn, a follow-up, a turn that fails, Ctrl-C, a kill -9 — on a
// copy of the example app, with the real Claude Code CLI in Docker, and
// checks after each that everything is given back: no mount or loop
// device of the app's data root is left (the host's mount table and
// `losetup -a`), no sandbox container, and the app folder can be deleted.
package resources

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// newApp copies the example app (its coder on the scripted connector
// demo.yaml, in Docker sandboxes of the test's image) into a temporary
// folder; script, when set, replaces demo.yaml.
func newApp(t *testing.T, script string) string {
	t.Helper()
	testenv.Docker(t)
	testenv.LoopDisks(t)
	app := filepath.Join(t.TempDir(), "app")
	testenv.CopyExampleApp(t, app)
	cfg, _ := json.Marshal(map[string]any{"data_root": "./data", "sandbox": map[string]any{
		"runtime": "docker", "images": map[string]string{"claude": testenv.Image(t)}}})
	write(t, filepath.Join(app, "app.jsonc"), string(cfg))
	if script != "" {
		write(t, filepath.Join(app, "connectors", "scripted", "demo.yaml"), script)
	}
	return app
}

// uniq makes a chat id of this test run: other tests on the same Docker
// engine label their containers with chat ids too.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// agentbox runs the binary with args (in app's folder) and returns its
// exit status and output.
func agentbox(t *testing.T, app string, args ...string) (int, string, string) {
	t.Helper()
	cmd := command(t, app, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agentbox %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func command(t *testing.T, app string, args ...string) *exec.Cmd {
	t.Helper()
	testenv.ClaudeBin(t)
	cmd := exec.Command(testenv.Agentbox(t), args...)
	cmd.Dir = app
	return cmd
}

// mountsUnder lists the host's mount points under dir (/proc/mounts).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			out = append(out, f[1])
		}
	}
	return out
}

// loopsUnder lists the loop devices backed by files under dir (losetup -a).
func loopsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := exec.Command("losetup", "-a").Output()
	if err != nil {
		t.Fatalf("losetup -a: %v", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "("+dir+"/") {
			out = append(out, line)
		}
	}
	return out
}

// containers lists the sandbox containers of chat, running or not.
func containers(t *testing.T, chat string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=dev.agentbox.product=agentbox",
		"--filter", "label=dev.agentbox.chat="+chat, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// givenBack checks that nothing of app's data root is held: no mount, no
// loop device (the kernel may detach one a moment after its last
// unmount), no container of the chats.
func givenBack(t *testing.T, app string, chats ...string) {
	t.Helper()
	data := filepath.Join(app, "data")
	if m := mountsUnder(t, data); len(m) > 0 {
		t.Errorf("mounts left under the data root: %v", m)
	}
	// A loop device is detached when its last holder lets go: a removed
	// container's mount namespace is torn down after the engine answers,
	// later still on a loaded host.
	var loops []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if loops = loopsUnder(t, data); len(loops) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(loops) > 0 {
		t.Errorf("loop devices left: %v", loops)
	}
	for _, c := range chats {
		if left := containers(t, c); len(left) > 0 {
			t.Errorf("containers of chat %s left: %v", c, left)
		}
	}
}

// removable checks that the app folder can be deleted, as `rm -rf` would.
func removable(t *testing.T, app string) {
	t.Helper()
	if out, err := exec.Command("rm", "-rf", app).CombinedOutput(); err != nil {
		t.Errorf("rm -rf %s: %v: %s", app, err, out)
	}
}

// TestRunGivesBack: a turn, a follow-up in the same chat, and a turn that
// fails before any sandbox (the connector's key is not set) leave nothing
// mounted; the files are there for `workspaces mount` and the next turn;
// the failed turn made no workspace image; the app folder can be deleted.
func TestRunGivesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	app := newApp(t, "")
	c1, nokey := uniq("c1"), uniq("nokey")
	code, out, errs := agentbox(t, app, "run", "coder", "Write a greeting script and run it.", "--chat", c1)
	if code != 0 || !strings.Contains(out, "Hello from agentbox") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "see its files:      agentbox workspaces mount --chat "+c1+" -- ls -la") {
		t.Errorf("run does not say how to see the files:\n%s", errs)
	}
	givenBack(t, app, c1)
	if _, err := os.Stat(filepath.Join(app, "data", "workspaces", "cli", "."+c1+".disk")); err != nil {
		t.Fatalf("the workspace is not a disk image (the test proves nothing): %v", err)
	}

	// The files, on the host, while `workspaces mount` holds them.
	code, out, errs = agentbox(t, app, "workspaces", "mount", "--chat", c1, "--", "cat", "hello.sh")
	if code != 0 || !strings.Contains(out, `echo "Hello from agentbox"`) {
		t.Fatalf("workspaces mount: exit %d\n%s\n%s", code, out, errs)
	}
	givenBack(t, app, c1)
	code, out, errs = agentbox(t, app, "workspaces", "list", "--json")
	var list struct {
		Workspaces []struct {
			Chat    string `json:"chat"`
			Mounted bool   `json:"mounted"`
		} `json:"workspaces"`
		Usage struct {
			Mounted     int `json:"mounted"`
			LoopDevices int `json:"loop_devices"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Workspaces) != 1 || list.Workspaces[0].Mounted || list.Usage.Mounted != 0 || list.Usage.LoopDevices != 0 {
		t.Errorf("workspaces list: exit %d %v\n%s\n%s", code, err, out, errs)
	}

	// A follow-up finds the files the first turn made.
	code, out, errs = agentbox(t, app, "run", "--chat", c1, "coder", "Run it again.")
	if code != 0 {
		t.Fatalf("follow-up: exit %d\n%s\n%s", code, out, errs)
	}
	givenBack(t, app, c1)

	// A key that is not set: the turn fails before any sandbox, says
	// what to do, and makes no workspace image.
	pkg := filepath.Join(app, "assistants", "coder", "package.yao")
	b, err := os.ReadFile(pkg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, pkg, strings.Replace(string(b), `"connector": "scripted.demo"`, `"connector": "anthropic.sonnet"`, 1))
	cmd := command(t, app, "run", "--chat", nokey, "coder", "hi")
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stdout.String()+stderr.String(), "ANTHROPIC_API_KEY: environment variable is not set (set it in agentbox's environment") {
		t.Fatalf("run without a key: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(filepath.Join(app, "data", "workspaces", "cli", "."+nokey+".disk")); !os.IsNotExist(err) {
		t.Errorf("a turn that failed before its sandbox made a workspace image: %v", err)
	}
	givenBack(t, app, c1, nokey)
	removable(t, app)
}

// sleepScript has the coder run `sleep 300`: the turn is mid-way, its
// sandbox up and workspace mounted, until it is stopped.
const sleepScript = `turns:
  - text: Waiting.
    tool_calls:
      - name: Bash
        input:
          command: sleep 300
          description: Wait
  - when:
      after_tool_result: Bash
    text: Done.
`

// startTurn starts `agentbox run --json` of the coder in chat and returns
// once its agent runs the sleep (a Bash tool call event).
func startTurn(t *testing.T, app, chat string) *exec.Cmd {
	t.Helper()
	cmd := command(t, app, "run", "--json", "--chat", chat, "coder", "Wait.")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	started := make(chan struct{})
	var seen bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		signaled := false
		for sc.Scan() {
			if !signaled {
				seen.WriteString(sc.Text() + "\n")
			}
			if !signaled && strings.Contains(sc.Text(), `"type":"tool_call"`) && strings.Contains(sc.Text(), `"Bash"`) {
				signaled = true
				close(started)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-started:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the turn never reached its Bash call\nstdout:\n%s\nstderr:\n%s", seen.String(), stderr.String())
	}
	return cmd
}

// wait waits for cmd to exit and returns its status.
func wait(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("agentbox run did not exit within %s", within)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// TestSignalMidTurn: Ctrl-C (SIGINT) or SIGTERM while the agent works
// ends the turn and gives everything back before agentbox exits. While
// the turn runs, `workspaces list` counts its mount and loop device.
func TestSignalMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			app := newApp(t, sleepScript)
			chat := uniq(fmt.Sprintf("sig%d", sig))
			cmd := startTurn(t, app, chat)
			code, out, errs := agentbox(t, app, "workspaces", "list")
			if code != 0 || !strings.Contains(out, "in use, mounted") || !strings.Contains(out, "(1 mounted, 1 loop device)") {
				t.Errorf("workspaces list mid-turn: exit %d\n%s\n%s", code, out, errs)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := wait(t, cmd, 2*time.Minute); code != 1 {
				t.Errorf("exit status %d after %s, want 1 (the turn was canceled)", code, sig)
			}
			givenBack(t, app, chat)
			removable(t, app)
		})
	}
}

// TestKillThenRecover: agentbox run killed with SIGKILL mid-turn leaves
// its sandbox, mount and loop device; the next agentbox run on the app
// (another chat) removes the dead run's container and unmounts its
// workspace, which frees the loop device, and the app folder can be
// deleted. The killed chat's files are kept.
func TestKillThenRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	app := newApp(t, sleepScript)
	killed, next := uniq("killed"), uniq("next")
	cmd := startTurn(t, app, killed)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, cmd, time.Minute)
	data := filepath.Join(app, "data")
	if len(mountsUnder(t, data)) == 0 || len(containers(t, killed)) == 0 {
		t.Fatalf("SIGKILL left no mount or container: the test proves nothing (mounts %v)", mountsUnder(t, data))
	}
	code, out, errs := agentbox(t, app, "workspaces", "list")
	if code != 0 || !strings.Contains(out, "(1 mounted, 1 loop device)") || strings.Contains(out, "in use") {
		t.Errorf("workspaces list after the kill: exit %d\n%s\n%s", code, out, errs)
	}

	// The next start: a turn of another chat, which finishes at once.
	write(t, filepath.Join(app, "connectors", "scripted", "demo.yaml"), "turns:\n  - text: Hi.\n")
	code, out, errs = agentbox(t, app, "run", "--chat", next, "coder", "Hi.")
	if code != 0 {
		t.Fatalf("next run: exit %d\n%s\n%s", code, out, errs)
	}
	givenBack(t, app, killed, next)
	if _, err := os.Stat(filepath.Join(data, "workspaces", "cli", "."+killed+".disk")); err != nil {
		t.Errorf("the killed chat's workspace image: %v", err)
	}
	removable(t, app)
}
