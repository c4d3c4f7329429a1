// Package hostile plays a hostile agent against a real `agentbox serve`:
// the real Claude Code CLI in Docker sandboxes, driven by a scripted model
// (package scripted), makes the workspace attack the host. Each test checks that
// the turn ends promptly with a clear message, that nothing is left
// behind, and that the server still shuts down normally.
package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// app is the test app: a scripted model per attack and assistants that
// run Claude Code with Bash allowed.
var app = map[string]string{
	"app.jsonc": `{"data_root": "./data"}`,

	"connectors/scripted/fifo.conn.yao": `{"type": "scripted", "options": {"script": "fifo.yaml", "model": "claude-sonnet-4-5"}}`,
	"connectors/scripted/fifo.yaml": `turns:
  - tool_calls:
      - name: Bash
        input: {command: "mkfifo /workspace/notes.txt && echo planted", description: Plant a FIFO}
  - when: {after_tool_result: Bash}
    text: I left you a note.
`,
	"assistants/fifo/package.yao": `{"connector": "scripted.fifo", "hooks": {"timeout": "3s"},
  "sandbox": {"command": "claude", "timeout": "60s",
    "arguments": {"max_turns": 5, "permission_mode": "acceptEdits", "allowed_tools": ["Bash"]}}}`,
	// The Next hook reads what the agent left: a FIFO, which used to block
	// the host past every timeout.
	"assistants/fifo/src/index.js": `function Next(ctx, payload) {
  return {data: ctx.sandbox.ReadFile("notes.txt")};
}
`,

	"connectors/scripted/disk.conn.yao": `{"type": "scripted", "options": {"script": "disk.yaml", "model": "claude-sonnet-4-5"}}`,
	"connectors/scripted/disk.yaml": `turns:
  - when: {contains: fill}
    tool_calls:
      - name: Bash
        input: {command: "dd if=/dev/zero of=/workspace/big bs=1M count=200 2>&1; echo dd-exit=$?", description: Fill the disk}
  - when: {contains: clean}
    tool_calls:
      - name: Bash
        input: {command: "rm /workspace/big && echo fine > /workspace/after.txt && cat /workspace/after.txt", description: Clean up}
  - when: {after_tool_result: Bash}
    text: Done.
`,
	"assistants/disk/package.yao": `{"connector": "scripted.disk",
  "sandbox": {"command": "claude", "timeout": "60s", "max_disk": "64m",
    "arguments": {"max_turns": 5, "permission_mode": "acceptEdits", "allowed_tools": ["Bash"]}}}`,
}

// server is a running agentbox serve on the test app.
type server struct {
	*e2etest.Server
	dir string
}

func startServer(t *testing.T) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Image(t)
	testenv.ClaudeBin(t)
	dir := t.TempDir()
	for p, c := range app {
		e2etest.Write(t, filepath.Join(dir, p), c)
	}
	// The sandbox user must reach the data root (t.TempDir is 0700).
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	return &server{dir: dir, Server: e2etest.Serve(t, dir, e2etest.Options{Args: []string{"--runtime", "docker"}})}
}

// event is one native stream event, loosely typed.
type event struct {
	Event string         `json:"event"`
	ID    string         `json:"id"`
	Type  string         `json:"type"`
	Text  string         `json:"text"`
	Props map[string]any `json:"props"`
	Done  map[string]any `json:"done"`
}

// chat runs one turn over the native SSE endpoint and returns its events.
func (s *server) chat(t *testing.T, ctx context.Context, assistant, chatID, message string) []event {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": message})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/assistants/"+assistant+"/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-ID", "mallory")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("turn %q: %v", message, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("turn %q: status %d", message, resp.StatusCode)
	}
	var events []event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("turn %q: reading the stream: %v", message, err)
	}
	if len(events) == 0 || events[len(events)-1].Event != "done" {
		t.Fatalf("turn %q: the stream did not end with done: %+v", message, events)
	}
	return events
}

// notice returns the notice event with code, if any.
func notice(events []event, code string) (event, bool) {
	for _, e := range events {
		if e.Type == "notice" && e.Event == "start" && e.Props["code"] == code {
			return e, true
		}
	}
	return event{}, false
}

// toolResults joins the tool results' contents.
func toolResults(events []event) string {
	var sb strings.Builder
	for _, e := range events {
		if e.Type == "tool_result" && e.Event == "start" {
			fmt.Fprintf(&sb, "%v\n", e.Props["content"])
		}
	}
	return sb.String()
}

// stop sends SIGTERM and requires a normal exit, promptly.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(45 * time.Second):
		t.Fatalf("the server did not exit within 45s of SIGTERM")
	}
	if code := s.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the server exited with %d after SIGTERM", code)
	}
	if strings.Contains(s.Logs.String(), "still running") {
		t.Errorf("the server reports handlers still running at shutdown")
	}
}

// TestFIFOInNextHook: the agent runs `mkfifo /workspace/notes.txt` with its
// Bash tool, then the Next hook reads notes.txt. The read is refused at
// once (SANDBOX_SPECIAL_FILE), so the turn finishes promptly with a notice
// saying why, the container is removed, and SIGTERM afterwards stops the
// server normally. (Before, the read blocked forever: past the hook's
// timeout, the sandbox's, the client's disconnect and SIGTERM.)
func TestFIFOInNextHook(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	chatID := e2etest.NewID("fifo")
	start := time.Now()
	events := s.chat(t, ctx, "fifo", chatID, "plant a fifo")
	took := time.Since(start)
	if !strings.Contains(toolResults(events), "planted") {
		t.Fatalf("the agent did not plant the FIFO: %q", toolResults(events))
	}
	n, ok := notice(events, "next_hook_failed")
	if !ok {
		t.Fatalf("no next_hook_failed notice: %+v", events)
	}
	msg, _ := n.Props["message"].(string)
	if !strings.Contains(msg, "SANDBOX_SPECIAL_FILE") && !strings.Contains(msg, "named pipe (FIFO)") {
		t.Errorf("notice %q does not say the file is a FIFO", msg)
	}
	if !strings.Contains(msg, "notes.txt") {
		t.Errorf("notice %q does not name the file", msg)
	}
	t.Logf("turn with the FIFO took %s; notice: %s", took.Round(time.Millisecond), msg)
	e2etest.NoContainers(t, chatID, 15*time.Second)
	// The FIFO is still there for the agent; the host never opened it.
	fifo := filepath.Join(s.dir, "data", "workspaces", "mallory", chatID, "notes.txt")
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("notes.txt: %v, %v", st, err)
	}
	// The files API refuses it too, with a 400.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/chats/"+chatID+"/files?path=notes.txt", nil)
	req.Header.Set("X-User-ID", "mallory")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(b.String(), "named pipe") {
		t.Errorf("files API on the FIFO: %d %s", resp.StatusCode, b)
	}
	s.stop(t)
}

// TestDiskFull: with sandbox.max_disk "64m", the agent's dd of 200 MiB
// fails with "No space left on device", the image on the host stays within
// the limit, and the turn ends with a disk_full notice; the chat's next
// turn, which deletes the file, works.
func TestDiskFull(t *testing.T) {
	testenv.LoopDisks(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	chatID := e2etest.NewID("disk")
	events := s.chat(t, ctx, "disk", chatID, "fill the disk")
	out := toolResults(events)
	if !strings.Contains(out, "No space left on device") || strings.Contains(out, "dd-exit=0") {
		t.Errorf("dd past the limit: %q", out)
	}
	n, ok := notice(events, "disk_full")
	if !ok {
		t.Fatalf("no disk_full notice: %+v", events)
	}
	t.Logf("notice: %s", n.Props["message"])
	img := filepath.Join(s.dir, "data", "workspaces", "mallory", "."+chatID+".disk")
	st, err := os.Stat(img)
	if err != nil {
		t.Fatalf("the workspace image: %v", err)
	}
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; st.Size() != 64<<20 || blocks > 64<<20 {
		t.Errorf("the image is %d bytes, %d on the host's disk; the limit is %d", st.Size(), blocks, 64<<20)
	}
	e2etest.NoContainers(t, chatID, 15*time.Second)

	events = s.chat(t, ctx, "disk", chatID, "clean up")
	if out := toolResults(events); !strings.Contains(out, "fine") {
		t.Errorf("the next turn: %q", out)
	}
	if _, ok := notice(events, "disk_full"); ok {
		t.Error("disk_full again after the file was deleted")
	}
	if final := events[len(events)-1].Done; final["error"] != nil {
		t.Errorf("the next turn failed: %v", final)
	}
	e2etest.NoContainers(t, chatID, 15*time.Second)
	s.stop(t)
	// Stopped: the image is unmounted and no loop device is left on it
	// (the kernel may detach it a moment after the unmount).
	dir := filepath.Join(s.dir, "data", "workspaces", "mallory", chatID)
	var dst, pst syscall.Stat_t
	if syscall.Stat(dir, &dst) == nil && syscall.Stat(filepath.Dir(dir), &pst) == nil && dst.Dev != pst.Dev {
		t.Errorf("the workspace is still mounted after the server stopped")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := exec.Command("losetup", "-j", img).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("loop device left on the image: %s", out)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}
