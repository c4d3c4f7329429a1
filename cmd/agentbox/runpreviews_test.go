package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/preview"
)

// previewScript: Claude Code starts a Python HTTP server on the declared
// port 8000, in the background, and answers.
const previewScript = `turns:
  - when: {contains: serve}
    tool_calls:
      - name: Bash
        input:
          command: "cd /workspace && printf '<h1>run-preview-4711</h1>' > index.html && (nohup python3 -m http.server 8000 --bind 127.0.0.1 > http.log 2>&1 &) && sleep 1 && echo started"
          description: Start the site
  - when: {after_tool_result: Bash}
    text: The site is up.
`

// lines collects a stream's lines as they come, for a test to wait on.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
	done chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// wait returns the first submatch of re in a line, once one has come.
func (l *lines) wait(t *testing.T, ctx context.Context, re *regexp.Regexp) string {
	t.Helper()
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if m := re.FindStringSubmatch(s); m != nil {
				l.mu.Unlock()
				return m[1]
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-l.done:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no line matches %s; the stream ended:\n%s", re, strings.Join(l.all, "\n"))
		case <-ctx.Done():
			t.Fatalf("no line matches %s: %v", re, ctx.Err())
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// previewBrowser is an HTTP client with a cookie jar that reaches
// *.preview.localhost on loopback, as browsers resolve it.
func previewBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	}}
}

// TestRunServesPreviews runs the agentbox binary: a Docker sandbox's
// agent (Claude Code, its Bash call scripted) starts a server on the
// declared port; run prints the port's preview URL as it opens, and with
// --previews wait keeps serving it after the answer; a real HTTP client
// gets the page through it (the ticket becomes a cookie), is refused
// without it, and Ctrl-C ends the run, its listener and its sandbox.
func TestRunServesPreviews(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Docker(t)
	bin := testenv.Agentbox(t)
	image := testenv.Image(t)
	app := t.TempDir()
	t.Cleanup(func() { e2etest.UnmountUnder(t, app) })
	files := map[string]string{
		"app.jsonc":             `{"data_root": "./data", "sandbox": {"runtime": "docker"}}`,
		"connectors/s.conn.yao": `{"label": "S", "type": "scripted", "options": {"script": "s.yaml", "model": "claude-sonnet-4-5"}}`,
		"connectors/s.yaml":     previewScript,
		"assistants/web/package.yao": `{"name": "Web", "connector": "s", "sandbox": {"command": "claude", "image": "` + image + `",
			"keep_alive": "5m", "ports": [{"port": 8000, "label": "site"}],
			"arguments": {"permission_mode": "bypassPermissions", "max_turns": 5}}}`,
		"assistants/web/prompts.yml": "- role: system\n  content: You build web sites.\n",
	}
	for name, body := range files {
		e2etest.Write(t, filepath.Join(app, name), body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	chatID := fmt.Sprintf("run-preview-%d", time.Now().UnixNano())
	cmd := exec.CommandContext(ctx, bin, "run", "--app", app, "--chat", chatID, "--previews", "wait", "web", "serve the site")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		e2etest.NoContainers(t, chatID, time.Minute)
	})
	out, errOut := readLines(stdout), readLines(stderr)

	// While the turn runs: the port's URL as it opens.
	during := out.wait(t, ctx, regexp.MustCompile(`↗ site \(port 8000\) is open: (\S+)`))
	out.wait(t, ctx, regexp.MustCompile(`(The site is up\.)`))
	// After the answer: run waits, serving the preview.
	addr := errOut.wait(t, ctx, regexp.MustCompile(`serving the previews on (\S+) until Ctrl-C`))
	after := errOut.wait(t, ctx, regexp.MustCompile(`^  site \(port 8000\): (\S+)$`))

	for _, u := range []string{during, after} {
		pu, err := url.Parse(u)
		if err != nil || !strings.HasSuffix(pu.Hostname(), ".preview.localhost") || !strings.HasSuffix(addr, ":"+pu.Port()) {
			t.Fatalf("URL %q: want a preview.localhost host on run's listener %s", u, addr)
		}
		resp, err := previewBrowser().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "run-preview-4711") {
			t.Fatalf("GET %s: %d %q\nstderr:\n%s", u, resp.StatusCode, body, errOut)
		}
	}
	// Without the ticket (or its cookie): refused.
	pu, _ := url.Parse(after)
	resp, err := previewBrowser().Get(pu.Scheme + "://" + pu.Host + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the preview without its ticket: %d, want 403", resp.StatusCode)
	}

	// Ctrl-C: the run ends, and its sandbox with it.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-out.done
	<-errOut.done
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("run after Ctrl-C: %v\nstderr:\n%s", err, errOut)
	}
	if !strings.Contains(errOut.String(), "stopped: the sandbox is removed") {
		t.Errorf("stderr does not say the run stopped:\n%s", errOut)
	}
	e2etest.NoContainers(t, chatID, time.Minute)
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Errorf("run's preview listener %s still answers after it exited", addr)
	}
}

// onWrite passes writes to w and calls f once, at the first that holds
// s.
type onWrite struct {
	w    io.Writer
	s    string
	f    func()
	once sync.Once
}

func (o *onWrite) Write(p []byte) (int, error) {
	if strings.Contains(string(p), o.s) {
		defer o.once.Do(o.f)
	}
	return o.w.Write(p)
}

// TestRunPreviewsAfterAnswer: what run says of its previews after the
// answer, and how long it serves them: a desktop's URL opens noVNC; with
// wait it lists the ports and serves until Ctrl-C or until the sandbox
// stops; without, it says how to keep them; previews that ended with the
// turn are said to have.
func TestRunPreviewsAfterAnswer(t *testing.T) {
	pv, err := preview.New(*runPreviewConfig())
	if err != nil {
		t.Fatal(err)
	}
	a := &assistant.Assistant{Sandbox: &assistant.Sandbox{KeepAlive: 5 * time.Minute, Desktop: &assistant.Desktop{},
		Ports: []assistant.Port{{Port: 8000, Label: "site"}, {Port: desktop.NoVNCPort, Label: assistant.DesktopLabel}}}}
	ctx := context.Background()
	if rp, err := startRunPreviews(ctx, pv, &assistant.Assistant{Sandbox: &assistant.Sandbox{}}, "127.0.0.1:0", "cli", "c1"); rp != nil || err != nil {
		t.Fatalf("an assistant without ports: %v, %v", rp, err)
	}
	rp, err := startRunPreviews(ctx, pv, a, "127.0.0.1:0", "cli", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	ports := []preview.Port{{Port: 8000, Label: "site"}, {Port: desktop.NoVNCPort, Label: assistant.DesktopLabel}}
	sb := pv.Open(preview.Owner{User: "cli", Chat: "c1"}, nil, ports)
	sb.SetListening([]int{8000})

	e := rp.event(chat.Event{Event: chat.Start, ID: "port-1", Type: pipeline.TypePortOpened, Props: map[string]any{"port": desktop.NoVNCPort, "label": "Desktop"}})
	u, _ := e.Props["url"].(string)
	pu, err := url.Parse(u)
	if err != nil || !strings.HasSuffix(pu.Hostname(), ".preview.localhost") || !strings.HasSuffix(rp.addr, ":"+pu.Port()) ||
		pu.Path != desktop.NoVNCPath || pu.Query().Get("autoconnect") != "1" || pu.Query().Get(preview.TicketParam) == "" {
		t.Fatalf("the desktop's URL %q: want noVNC's page on run's listener %s, with a ticket", u, rp.addr)
	}
	plain := func(s string) string { return s }

	var out bytes.Buffer
	rp.afterAnswer(ctx, false, &out, plain)
	if !strings.Contains(out.String(), "--previews wait serves them until Ctrl-C") {
		t.Errorf("without wait: %q", out.String())
	}

	// Ctrl-C (ctx ended) while serving.
	out.Reset()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	rp.afterAnswer(cctx, true, &out, plain)
	for _, want := range []string{"serving the previews on " + rp.addr + " until Ctrl-C (the sandbox stops after 5m0s without a turn",
		"  site (port 8000): http://", "  Desktop (port 6080), nothing listens on it yet: http://", "stopped: the sandbox is removed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("wait, then Ctrl-C: no %q in\n%s", want, out.String())
		}
	}

	// The sandbox stops while run serves it.
	out.Reset()
	rp.afterAnswer(ctx, true, &onWrite{w: &out, s: "serving the previews", f: func() { sb.End("the chat's sandbox stopped") }}, plain)
	if !strings.Contains(out.String(), "the previews ended: the chat's sandbox stopped") {
		t.Errorf("wait, then the sandbox stops:\n%s", out.String())
	}

	// Previews that ended with the turn (a sandbox not kept).
	out.Reset()
	rp.afterAnswer(ctx, true, &out, plain)
	if !strings.Contains(out.String(), "the previews ended with the turn") {
		t.Errorf("after the sandbox ended: %q", out.String())
	}
}
