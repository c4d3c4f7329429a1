// Package desktop is a sandbox's live desktop: an X display with a window
// manager and Chromium, served as VNC and noVNC, which the user watches and
// drives in the web app (through a preview URL of NoVNCPort) while the
// agent drives the same Chromium through its DevTools protocol on the
// sandbox's loopback (CDPPort).
//
// The desktop image (images.Desktop, built by scripts/build-image.sh) holds
// the parts and their supervisor, /usr/local/bin/agentbox-desktop
// (images/desktop/agentbox-desktop): Start runs it in a new sandbox, which
// then restarts any part that exits until the sandbox is removed. Every
// part runs as the sandbox's user inside the sandbox's confinement and
// listens on loopback only; nothing of it reaches the host but what the
// preview proxy carries.
package desktop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// The desktop's fixed places inside its sandbox.
const (
	// Display is the X display, also the image's DISPLAY.
	Display = ":1"
	// VNCPort is x11vnc's port (loopback).
	VNCPort = 5900
	// NoVNCPort serves the noVNC client (NoVNCPath) and its WebSocket
	// (NoVNCSocket) to VNCPort, on loopback: the port a desktop's preview
	// URL leads to.
	NoVNCPort = 6080
	// NoVNCPath is the noVNC client's page on NoVNCPort.
	NoVNCPath = "/vnc.html"
	// NoVNCSocket is the path of the WebSocket the client connects to.
	NoVNCSocket = "websockify"
	// ViewPath is the page a user opens on the desktop's preview: noVNC
	// connecting at once, scaled to the window, reconnecting after a
	// drop (the web app's desktopURL makes the same).
	ViewPath = NoVNCPath + "?autoconnect=1&resize=scale&reconnect=1&path=" + NoVNCSocket
	// CDPPort is Chromium's DevTools protocol (loopback).
	CDPPort = 9222
	// Supervisor is the program that starts and keeps the parts.
	Supervisor = "/usr/local/bin/agentbox-desktop"
	// DefaultResolution is the screen's size unless the assistant sets one.
	DefaultResolution = "1280x800"
	// StartTimeout bounds how long Start waits for every part to answer
	// (Chromium's first start on a loaded host takes the longest).
	StartTimeout = 90 * time.Second
)

// ErrNoDesktop is returned for a sandbox whose image has no desktop.
var ErrNoDesktop = errors.New("the sandbox has no desktop")

// Options configures a desktop.
type Options struct {
	// Resolution is WIDTHxHEIGHT ("" = DefaultResolution).
	Resolution string
	// ViewOnly makes the user's view watch only: the VNC server takes no
	// keyboard or pointer input (the agent's CDP is unaffected).
	ViewOnly bool
}

var resolutionRE = regexp.MustCompile(`^(\d{3,4})x(\d{3,4})$`)

// ParseResolution checks a WIDTHxHEIGHT screen size, between 320x240 and
// 7680x4320.
func ParseResolution(s string) (width, height int, err error) {
	m := resolutionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("resolution %q: want WIDTHxHEIGHT, like %s", s, DefaultResolution)
	}
	width, _ = strconv.Atoi(m[1])
	height, _ = strconv.Atoi(m[2])
	if width < 320 || height < 240 || width > 7680 || height > 4320 {
		return 0, 0, fmt.Errorf("resolution %q is out of range: want 320x240 to 7680x4320", s)
	}
	return width, height, nil
}

// Status is what the supervisor reports of a running desktop.
type Status struct {
	Ready      bool   `json:"ready"`
	Display    string `json:"display"`
	Resolution string `json:"resolution"`
	ViewOnly   bool   `json:"view_only"`
	VNCPort    int    `json:"vnc_port"`
	NoVNCPort  int    `json:"novnc_port"`
	NoVNCPath  string `json:"novnc_path"`
	CDPPort    int    `json:"cdp_port"`
	CDPURL     string `json:"cdp_url"`
}

// Start starts the desktop in sb and returns once every part answers (at
// most StartTimeout). A desktop already running is left as it is. It fails
// with ErrNoDesktop when sb's image has no supervisor, and with the
// supervisor's log when a part does not come up.
func Start(ctx context.Context, sb sandbox.Sandbox, opts Options) (*Status, error) {
	res := opts.Resolution
	if res == "" {
		res = DefaultResolution
	}
	if _, _, err := ParseResolution(res); err != nil {
		return nil, err
	}
	argv := []string{Supervisor, "start", "--resolution", res, "--timeout", strconv.Itoa(int(StartTimeout / time.Second))}
	if opts.ViewOnly {
		argv = append(argv, "--view-only")
	}
	out, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: argv, Timeout: StartTimeout + 30*time.Second})
	if err != nil {
		return nil, fmt.Errorf("desktop start: %w", err)
	}
	if err := exitErr("start", out); err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.Stdout)), &st); err != nil {
		return nil, fmt.Errorf("desktop start: the supervisor's report is not JSON (%v): %q", err, firstLine(out.Stdout))
	}
	return &st, nil
}

// exitErr turns a failed run of the supervisor into an error: 126 or 127
// (not found) is ErrNoDesktop, any other its stderr.
func exitErr(op string, out *sandbox.ExecResult) error {
	switch out.ExitCode {
	case 0:
		return nil
	case 126, 127:
		return fmt.Errorf("desktop %s: %w: %s is not in its image (use the desktop image, %s, or an image built on it)",
			op, ErrNoDesktop, Supervisor, "PREFIX/sandbox-desktop")
	}
	return fmt.Errorf("desktop %s: exit code %d: %s", op, out.ExitCode, strings.TrimSpace(out.Stderr))
}

// Screenshot returns a PNG of the desktop's whole X display.
func Screenshot(ctx context.Context, sb sandbox.Sandbox) ([]byte, error) {
	// Base64 keeps the image intact through the exec's text output.
	out, err := sb.Exec(ctx, sandbox.ExecRequest{
		Argv:      []string{Supervisor, "screenshot", "--base64"},
		Timeout:   time.Minute,
		MaxOutput: 64 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("desktop screenshot: %w", err)
	}
	if err := exitErr("screenshot", out); err != nil {
		return nil, err
	}
	if out.Truncated {
		return nil, errors.New("desktop screenshot: the image is larger than 48 MiB")
	}
	png, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out.Stdout))
	if err != nil {
		return nil, fmt.Errorf("desktop screenshot: %w", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("desktop screenshot: not a PNG (%d bytes): %s", len(png), strings.TrimSpace(out.Stderr))
	}
	return png, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// AgentHint is what the agent is told of the desktop, after its system
// prompt: the screen the user watches, and how to drive its browser.
const AgentHint = `## Desktop

This sandbox has a desktop that the user watches (and may use) live in the web app: an X display (DISPLAY=:1) with a window manager and Chromium open on it. Drive that Chromium rather than starting another browser, so the user sees what you do:

- agentbox-desktop open URL: show URL in the desktop's Chromium and wait until it has loaded (a server you start in this sandbox is at http://127.0.0.1:PORT).
- agentbox-desktop screenshot FILE.png: a PNG of the whole screen; read the file to see it.
- agentbox-desktop cdp METHOD '{"param": ...}': one Chrome DevTools Protocol command to the current page, its result as JSON (for example Runtime.evaluate with {"expression": "document.title", "returnByValue": true}, Input.dispatchMouseEvent, Page.captureScreenshot).
- Chromium's DevTools protocol is at http://127.0.0.1:9222 (GET /json/list for its pages and their webSocketDebuggerUrl) for a client of your own, such as Playwright's or Puppeteer's connectOverCDP, or Node's built-in WebSocket.

The sandbox has no network beyond its own loopback.`
