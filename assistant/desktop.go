package assistant

import (
	"strings"

	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/images"
)

// Desktop is a sandbox's live desktop (sandbox.desktop, Yao v2's
// computer.vnc): the sandbox runs the desktop image, whose desktop starts
// with it, and its screen is a preview the chat's user watches and drives.
type Desktop struct {
	// Resolution is the screen's WIDTHxHEIGHT (desktop.DefaultResolution
	// when not set).
	Resolution string
	// ViewOnly lets the user watch without keyboard or pointer input.
	ViewOnly bool
}

// DesktopLabel labels the desktop's port among the sandbox's previews.
const DesktopLabel = "Desktop"

// parseDesktop reads sandbox.desktop or computer.vnc at path: true, false,
// or an object of resolution and view_only (Yao's computer.vnc also has
// enabled, and a password, which the preview's ticket replaces).
func parseDesktop(d *doc, path string, v any) *Desktop {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		if !x {
			return nil
		}
		return &Desktop{}
	case map[string]any:
		out := &Desktop{}
		enabled := true
		for _, k := range sortedAnyKeys(x) {
			kp := path + "." + k
			switch k {
			case "enabled", "view_only":
				b, ok := x[k].(bool)
				if !ok {
					d.errPath(kp, "%s: want true or false", kp)
				} else if k == "enabled" {
					enabled = b
				} else {
					out.ViewOnly = b
				}
			case "resolution":
				s, ok := x[k].(string)
				if !ok {
					d.errPath(kp, "%s: want a string like %q", kp, desktop.DefaultResolution)
				} else if _, _, err := desktop.ParseResolution(s); err != nil {
					d.errPath(kp, "%s: %v", kp, err)
				} else {
					out.Resolution = s
				}
			case "password":
				d.warnPath(kp, "%s is not applied: the desktop is reached only through its preview URL, which is bound to the chat's user", kp)
			default:
				d.errPath(kp, "unknown field %q in %s (known: enabled, resolution, view_only, password)", k, path)
			}
		}
		if !enabled {
			return nil
		}
		return out
	}
	d.errPath(path, "%s: want true, false or {\"resolution\": \"WIDTHxHEIGHT\", \"view_only\": BOOL}", path)
	return nil
}

// desktopImage is the image of a sandbox with a desktop: the one written
// at path (which must be built on the desktop image), else the desktop
// image, which runs Claude Code (and serves the yao runner's hooks).
func desktopImage(d *doc, path, written, command string) string {
	if written != "" && !strings.HasPrefix(written, "yaoapp/") {
		return written
	}
	if command != "claude" && command != CommandYao {
		d.errPath(path, "%s: the desktop image (%s) runs Claude Code; a %s sandbox with a desktop needs an image of its own built on it: set %s", path, images.Desktop, command, path)
		return ""
	}
	return images.Desktop
}

// applyDesktop gives a sandbox with a desktop its image, its screen as a
// preview (the noVNC port, labelled Desktop), and keeps it between turns
// (DefaultSessionKeepAlive unless keep_alive says otherwise), so that the
// user sees the screen after the turn too.
func applyDesktop(d *doc, s *Sandbox, imagePath, written string, keepAliveSet bool) {
	if s.Desktop == nil {
		return
	}
	if s.Runtime == "local" {
		d.errPath(imagePath, "a desktop needs the desktop image, and the local runtime runs the host's programs, not an image: use the docker or kubernetes runtime")
	}
	s.Image = desktopImage(d, imagePath, written, s.Command)
	for _, p := range s.Ports {
		switch p.Port {
		case desktop.VNCPort, desktop.NoVNCPort, desktop.CDPPort:
			d.errPath(imagePath, "port %d is the desktop's own (VNC %d, noVNC %d, Chromium's DevTools %d): the desktop is a preview already; declare another port", p.Port, desktop.VNCPort, desktop.NoVNCPort, desktop.CDPPort)
		}
	}
	s.Ports = append(s.Ports, Port{Port: desktop.NoVNCPort, Label: DesktopLabel})
	if !keepAliveSet && s.KeepAlive == 0 {
		s.KeepAlive = DefaultSessionKeepAlive
	}
}
