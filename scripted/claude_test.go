package scripted_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// TestClaudeCLIWritesFile runs the real Claude Code CLI against a scripted
// server: the first turn asks for a Write tool call, the CLI executes it and
// sends the tool_result back, the second turn answers in text.
func TestClaudeCLIWritesFile(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "hello.txt")
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Thinking: "The user wants a greeting file.", Text: "Writing the file.", ToolCalls: []scripted.ToolCall{{
			Name:  "Write",
			Input: map[string]any{"file_path": target, "content": "hello from llmtest\n"},
		}}},
		{When: &scripted.Match{AfterToolResult: "Write"}, Text: "Done: hello.txt is written."},
	}})
	t.Cleanup(srv.Close)

	out, stderr := runClaude(t, bin, srv.URL, dir, "Create hello.txt", "--allowedTools", "Write")
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range srv.Requests() {
				t.Logf("request %s %s side=%v turn=%d tools=%d", r.Method, r.Path, r.Side, r.Turn, len(r.ToolNames()))
			}
		}
	})

	got, err := os.ReadFile(target)
	if err != nil {
		t.Fatalf("hello.txt not written: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	if string(got) != "hello from llmtest\n" {
		t.Errorf("hello.txt = %q", got)
	}
	if n := srv.Remaining(); n != 0 {
		t.Errorf("Remaining() = %d, want 0", n)
	}
	turns := srv.TurnRequests()
	if len(turns) != 2 {
		t.Fatalf("got %d turn requests, want 2", len(turns))
	}
	if !strings.Contains(turns[0].LastUserText(), "Create hello.txt") {
		t.Errorf("first request's user text = %q", turns[0].LastUserText())
	}
	trs := turns[1].ToolResults()
	if len(trs) != 1 || trs[0].Tool != "Write" || trs[0].IsError {
		t.Fatalf("second request tool results = %+v, want one successful Write result", trs)
	}
	for _, r := range srv.Requests() {
		if k := r.Header.Get("X-Api-Key"); k != "" && k != "sk-llmtest" {
			t.Errorf("unexpected api key header %q", k)
		}
	}
	result := lastResult(t, out)
	if result["result"] != "Done: hello.txt is written." || result["num_turns"] != float64(2) {
		t.Errorf("result event = %v", result)
	}
}

// TestClaudeCLIRetriesServerError checks the documented behaviour of error
// turns with the real CLI: a 529 overloaded error is retried by the CLI,
// and the retry takes the next turn.
func TestClaudeCLIRetriesServerError(t *testing.T) {
	bin := testenv.ClaudeBin(t)
	t.Parallel()
	dir := t.TempDir()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Error: &scripted.HTTPError{Status: 529}},
		{Text: "recovered"},
	}})
	t.Cleanup(srv.Close)
	out, stderr := runClaude(t, bin, srv.URL, dir, "hi")
	result := lastResult(t, out)
	if result["result"] != "recovered" {
		t.Fatalf("result = %v\nstderr:\n%s", result, stderr)
	}
	if n := len(srv.TurnRequests()); n != 2 {
		t.Errorf("turn requests = %d, want 2", n)
	}
}

// runClaude runs the CLI in print mode with isolated HOME and config dirs.
func runClaude(t *testing.T, bin, url, dir, prompt string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"-p", prompt, "--output-format", "stream-json", "--verbose"}, args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + url,
		"ANTHROPIC_API_KEY=sk-llmtest",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("claude: %v\nstdout:\n%s\nstderr:\n%s", err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes(), errb.Bytes()
}

func lastResult(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var result map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["type"] == "result" {
			result = ev
		}
	}
	if result == nil {
		t.Fatalf("no result event in output:\n%s", out)
	}
	return result
}

// TestClaudeInSandboxImage runs the CLI inside the sandbox image (as the
// image's non-root user, host networking to reach the scripted server on
// 127.0.0.1) and checks that a Write lands in the mounted /workspace.
func TestClaudeInSandboxImage(t *testing.T) {
	img := testenv.Image(t)
	t.Parallel()
	ws := t.TempDir()
	if err := os.Chown(ws, 1000, 1000); err != nil {
		testenv.Missing(t, "permission to give the workspace to uid 1000 ("+err.Error()+")")
	}
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/workspace/hello.txt", "content": "from the sandbox\n"}}}},
		{When: &scripted.Match{AfterToolResult: "Write"}, Text: "written"},
	}})
	t.Cleanup(srv.Close)
	name := "llmtest-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, "docker", "rm", "-f", name).Run()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--name", name, "--network", "host",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", ws+":/workspace",
		"-e", "ANTHROPIC_BASE_URL="+srv.URL, "-e", "ANTHROPIC_API_KEY", "-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		img, "claude", "-p", "write hello", "--output-format", "stream-json", "--verbose", "--allowedTools", "Write")
	// The key is passed by name so it never appears in argv.
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=sk-llmtest")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(ws, "hello.txt"))
	if err != nil || string(got) != "from the sandbox\n" {
		t.Fatalf("hello.txt = %q, %v\n%s", got, err, out)
	}
	if r := lastResult(t, out); r["result"] != "written" {
		t.Errorf("result = %v", r)
	}
}
