package assistant

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/images"
)

// TestDesktop: sandbox.desktop (both forms) and Yao v2's computer.vnc
// (true or its object) give the sandbox a desktop, the desktop image and a
// kept sandbox unless keep_alive says otherwise; an image written for it
// is kept, Yao's desktop images become the desktop image.
func TestDesktop(t *testing.T) {
	t.Parallel()
	app, err := Load(writeApp(t, map[string]string{
		"connectors/claude.conn.yao":    claudeConn,
		"assistants/v1/package.yao":     `{"connector": "claude", "sandbox": {"command": "claude", "desktop": true}}`,
		"assistants/obj/package.yao":    `{"connector": "claude", "sandbox": {"command": "claude", "desktop": {"resolution": "1024x768", "view_only": true}, "keep_alive": "2m"}}`,
		"assistants/own/package.yao":    `{"connector": "claude", "sandbox": {"command": "claude", "image": "me/desktop:1", "desktop": true}}`,
		"assistants/off/package.yao":    `{"connector": "claude", "sandbox": {"command": "claude", "desktop": false}}`,
		"assistants/vnc/package.yao":    `{"connector": "claude", "sandbox": {"version": "2.0", "runner": {"name": "claude"}, "computer": {"image": "yaoapp/tai-sandbox-claude-desktop-lite:latest", "vnc": true}}}`,
		"assistants/vnco/sandbox.yao":   `{"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session", "idle_timeout": "1m", "computer": {"vnc": {"enabled": true, "resolution": "1920x1080", "password": "$ENV.VNC_PASSWORD"}}}`,
		"assistants/vnco/package.yao":   `{"connector": "claude"}`,
		"assistants/vncoff/sandbox.yao": `{"version": "2.0", "runner": {"name": "claude"}, "computer": {"vnc": {"enabled": false}}}`,
		"assistants/vncoff/package.yao": `{"connector": "claude"}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id        string
		desktop   *Desktop
		image     string
		keepAlive string
	}{
		{"v1", &Desktop{}, images.Desktop, "5m0s"},
		{"obj", &Desktop{Resolution: "1024x768", ViewOnly: true}, images.Desktop, "2m0s"},
		{"own", &Desktop{}, "me/desktop:1", "5m0s"},
		{"off", nil, images.Claude, "0s"},
		{"vnc", &Desktop{}, images.Desktop, "5m0s"},
		{"vnco", &Desktop{Resolution: "1920x1080"}, images.Desktop, "1m0s"},
		{"vncoff", nil, images.Claude, "0s"},
	} {
		s := app.Assistants[c.id].Sandbox
		switch {
		case (s.Desktop == nil) != (c.desktop == nil), s.Desktop != nil && *s.Desktop != *c.desktop:
			t.Errorf("%s: desktop %+v, want %+v", c.id, s.Desktop, c.desktop)
		case s.Image != c.image:
			t.Errorf("%s: image %q, want %q", c.id, s.Image, c.image)
		case s.KeepAlive.String() != c.keepAlive:
			t.Errorf("%s: keep_alive %s, want %s", c.id, s.KeepAlive, c.keepAlive)
		case c.desktop != nil && !slices.Contains(s.Ports, Port{Port: 6080, Label: "Desktop"}), c.desktop == nil && len(s.Ports) != 0:
			t.Errorf("%s: ports %v, want the desktop's (6080) exactly when it has one", c.id, s.Ports)
		}
	}
	var warned bool
	for _, w := range app.Warnings {
		if strings.Contains(w.String(), "computer.vnc.password is not applied") {
			warned = true
		}
		if strings.Contains(w.String(), "computer.vnc") && strings.Contains(w.String(), "not applied: computer.vnc") {
			t.Errorf("computer.vnc is applied, yet warned: %v", w)
		}
	}
	if !warned {
		t.Errorf("no warning for computer.vnc.password: %v", app.Warnings)
	}
}

// TestDesktopProblems: a wrong shape, field or resolution, both forms at
// once, and a desktop for a CLI the desktop image does not run are
// positioned load errors.
func TestDesktopProblems(t *testing.T) {
	t.Parallel()
	_, err := Load(writeApp(t, map[string]string{
		"connectors/claude.conn.yao":   claudeConn,
		"assistants/str/package.yao":   `{"connector": "claude", "sandbox": {"command": "claude", "desktop": "yes"}}`,
		"assistants/res/package.yao":   `{"connector": "claude", "sandbox": {"command": "claude", "desktop": {"resolution": "big"}}}`,
		"assistants/tiny/package.yao":  `{"connector": "claude", "sandbox": {"command": "claude", "desktop": {"resolution": "100x100"}}}`,
		"assistants/field/package.yao": `{"connector": "claude", "sandbox": {"command": "claude", "desktop": {"colour": "blue"}}}`,
		"assistants/codex/package.yao": `{"connector": "claude", "sandbox": {"command": "codex", "desktop": true}}`,
		"assistants/both/package.yao":  `{"connector": "claude", "sandbox": {"version": "2.0", "runner": {"name": "claude"}, "desktop": true, "computer": {"vnc": true}}}`,
		"assistants/local/package.yao": `{"connector": "claude", "sandbox": {"command": "claude", "runtime": "local", "desktop": true}}`,
		"assistants/port/package.yao":  `{"connector": "claude", "sandbox": {"command": "claude", "ports": [9222], "desktop": true}}`,
	}))
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`assistants/str/package.yao:1:69: sandbox.desktop: want true, false or {"resolution": "WIDTHxHEIGHT", "view_only": BOOL}`,
		`assistants/res/package.yao:1:84: sandbox.desktop.resolution: resolution "big": want WIDTHxHEIGHT, like 1280x800`,
		`sandbox.desktop.resolution: resolution "100x100" is out of range: want 320x240 to 7680x4320`,
		`unknown field "colour" in sandbox.desktop (known: enabled, resolution, view_only, password)`,
		`sandbox.image: the desktop image (agentbox/sandbox-desktop:latest) runs Claude Code; a codex sandbox with a desktop needs an image of its own built on it: set sandbox.image`,
		`sandbox.desktop and sandbox.computer.vnc both declare the desktop; keep one`,
		`port 9222 is the desktop's own (VNC 5900, noVNC 6080, Chromium's DevTools 9222): the desktop is a preview already; declare another port`,
		`a desktop needs the desktop image, and the local runtime runs the host's programs, not an image: use the docker or kubernetes runtime`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}
}
