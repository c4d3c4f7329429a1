package desktop_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"image"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/desktop/desktoptest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// newSandbox starts a sandbox of img on the Docker runtime, confined as
// every sandbox is (the runtime's one configuration), with a fresh
// workspace.
func newSandbox(t *testing.T, img string) (*docker.Runtime, sandbox.Sandbox) {
	t.Helper()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	rt, err := docker.New(context.Background(), docker.Options{Instance: "desktop-test-" + hex.EncodeToString(suffix), Image: img})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u1", "c1")
	if release != nil {
		t.Cleanup(release)
	}
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(context.Background(), sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt, sb
}

func run(t *testing.T, sb sandbox.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{script}, Shell: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %+v", script, err, res)
	}
	return res.Stdout
}

// TestDesktop: in the desktop image on the Docker runtime (no network,
// read-only root, no capabilities, no new privileges), the desktop starts
// as the sandbox's user; a page the sandbox serves itself, opened in the
// desktop's Chromium through its DevTools protocol, is on the X display's
// screenshot (left half orange, right half blue, as the page draws it);
// noVNC's client is served on its port; a second start leaves the running
// desktop alone.
func TestDesktop(t *testing.T) {
	img := testenv.CLIImage(t, "desktop")
	rt, sb := newSandbox(t, img)
	ctx := context.Background()

	ins, err := rt.Client().ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc := ins.HostConfig
	if string(hc.NetworkMode) != "none" || !hc.ReadonlyRootfs || strings.Join(hc.CapDrop, ",") != "ALL" || strings.Join(hc.SecurityOpt, ",") != "no-new-privileges" {
		t.Fatalf("not confined as every sandbox: network %s, read-only %v, cap drop %v, security %v", hc.NetworkMode, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt)
	}

	st, err := desktop.Start(ctx, sb, desktop.Options{Resolution: "1024x768"})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.Resolution != "1024x768" || st.NoVNCPort != desktop.NoVNCPort || st.CDPPort != desktop.CDPPort || st.Display != desktop.Display {
		t.Fatalf("status %+v", st)
	}
	if got := run(t, sb, `ps -o user= -C Xvfb,x11vnc,chromium,openbox | sort -u | tr '\n' ' '`); strings.TrimSpace(got) != "agent" {
		t.Errorf("the desktop's processes run as %q, want agent only", got)
	}
	if got := run(t, sb, `curl -sf http://127.0.0.1:6080/vnc.html`); !strings.Contains(got, "noVNC") {
		t.Errorf("no noVNC client on port 6080: %.200q", got)
	}

	before := screenshot(t, sb)
	if b := before.Bounds(); b.Dx() != 1024 || b.Dy() != 768 {
		t.Fatalf("screenshot of %v, want 1024x768", b)
	}

	run(t, sb, desktoptest.ServeScript("8000"))
	run(t, sb, `agentbox-desktop open http://127.0.0.1:8000/`)
	if got := run(t, sb, `agentbox-desktop cdp Runtime.evaluate '{"expression": "document.title", "returnByValue": true}'`); !strings.Contains(got, desktoptest.Title) {
		t.Errorf("CDP's page title: %s", got)
	}
	// open returns once the page is painted: the screen shows it at once.
	after := screenshot(t, sb)
	desktoptest.ShowsPage(t, after)
	left, _ := desktoptest.Halves(before.Bounds())
	if s := desktoptest.Share(before, left, desktoptest.Orange); s > 0.1 {
		t.Errorf("before the page opened, the screen was already %.0f%% orange", s*100)
	}

	again, err := desktop.Start(ctx, sb, desktop.Options{Resolution: "1024x768"})
	if err != nil || !again.Ready {
		t.Fatalf("second start: %+v, %v", again, err)
	}
	if got := run(t, sb, `pgrep -c -x Xvfb`); strings.TrimSpace(got) != "1" {
		t.Errorf("%s X servers after a second start, want 1", strings.TrimSpace(got))
	}
}

// TestNoDesktop: an image without the desktop says so.
func TestNoDesktop(t *testing.T) {
	_, sb := newSandbox(t, testenv.Image(t))
	_, err := desktop.Start(context.Background(), sb, desktop.Options{})
	if !errors.Is(err, desktop.ErrNoDesktop) {
		t.Fatalf("start: %v, want ErrNoDesktop", err)
	}
	if _, err := desktop.Screenshot(context.Background(), sb); !errors.Is(err, desktop.ErrNoDesktop) {
		t.Fatalf("screenshot: %v, want ErrNoDesktop", err)
	}
}

func TestParseResolution(t *testing.T) {
	t.Parallel()
	for in, ok := range map[string]bool{"1280x800": true, "320x240": true, "7680x4320": true, "319x240": false, "1280": false, "1280X800": false, "x": false, "99999x1": false} {
		if _, _, err := desktop.ParseResolution(in); (err == nil) != ok {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func screenshot(t *testing.T, sb sandbox.Sandbox) image.Image {
	t.Helper()
	b, err := desktop.Screenshot(context.Background(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return desktoptest.Decode(t, b)
}
