package jsapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/agentbox/agentbox/desktop"
	"github.com/agentbox/agentbox/sandbox"
)

// Yao's sandbox v2 hook API (agent/context/jsapi_workspace.go and
// jsapi_computer.go at YaoApp/yao): ctx.workspace is the chat's workspace
// as a file system, ctx.computer the sandbox it is mounted in. Both exist
// exactly when ctx.sandbox does (a sandboxed assistant), so Yao hooks that
// test `if (ctx.computer)` run unchanged; they go through the same confined
// Workspace and the same Exec as ctx.sandbox, with the same bounds.
var (
	workspaceMembers = []string{"ReadFile", "WriteFile", "ReadDir", "MkdirAll", "Remove", "RemoveAll", "Rename", "Copy", "Stat", "Exists"}
	computerMembers  = []string{"id", "Exec", "Info", "VNC", "Proxy", "Screenshot"}
)

// ComputerInfo is what ctx.computer.Info reports of the request's sandbox
// beside what the sandbox itself answers (its system): the pipeline fills
// it when it gives the Context a sandbox.
type ComputerInfo struct {
	// Runtime names the sandbox runtime (docker, local, kubernetes); it
	// is Info's node_id.
	Runtime string
	// Image is the sandbox's image ("" on runtimes without one).
	Image string
	// Policy is the sandbox's lifecycle: "oneshot" for a sandbox of one
	// turn, "session" for one kept for the chat.
	Policy string
	// Desktop is set when the sandbox has a desktop (sandbox.desktop,
	// computer.vnc), whose screen Screenshot takes.
	Desktop bool
	// Preview gives the preview URL of a declared port at path (Proxy);
	// nil when the server serves no previews.
	Preview func(port int, path string) (string, error)
}

// workspaceObject builds ctx.workspace over the sandbox's Workspace.
func (c *call) workspaceObject() *goja.Object {
	return c.newLazy(workspaceMembers, func(key string) goja.Value {
		fn := "workspace." + key
		switch key {
		case "ReadFile":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value { return c.readFrom(fn, fc) }))
		case "WriteFile":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				c.writeTo(fn, fc)
				return goja.Undefined()
			}))
		case "ReadDir":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				p := c.pathArg(fn, fc.Argument(0), true)
				infos, err := c.workspace(fn).ListDir(c.ctx, p)
				if err != nil {
					c.throw(err, CodeIO)
				}
				items := make([]any, len(infos))
				for i, fi := range infos {
					o := c.vm.NewObject()
					_ = o.Set("name", fi.Name)
					_ = o.Set("is_dir", fi.IsDir)
					_ = o.Set("size", fi.Size)
					items[i] = o
				}
				return c.vm.NewArray(items...)
			}))
		case "MkdirAll", "Remove", "RemoveAll":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				p := c.pathArg(fn, fc.Argument(0), false)
				ws := c.workspace(fn)
				var err error
				switch key {
				case "MkdirAll":
					err = ws.MkdirAll(c.ctx, p)
				case "Remove":
					err = ws.Remove(c.ctx, p)
				default:
					err = ws.RemoveAll(c.ctx, p)
				}
				if err != nil {
					c.throw(err, CodeIO)
				}
				return goja.Undefined()
			}))
		case "Rename", "Copy":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				from := c.pathArg(fn, fc.Argument(0), false)
				to := c.pathArg(fn, fc.Argument(1), false)
				ws := c.workspace(fn)
				var err error
				if key == "Rename" {
					err = ws.Rename(c.ctx, from, to)
				} else {
					_, err = ws.Copy(c.ctx, from, to)
				}
				if err != nil {
					c.throw(err, CodeIO)
				}
				return goja.Undefined()
			}))
		case "Stat":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				p := c.pathArg(fn, fc.Argument(0), false)
				fi, err := c.workspace(fn).Stat(c.ctx, p)
				if err != nil {
					c.throw(err, CodeIO)
				}
				o := c.vm.NewObject()
				_ = o.Set("name", fi.Name)
				_ = o.Set("size", fi.Size)
				_ = o.Set("is_dir", fi.IsDir)
				_ = o.Set("mode", uint32(fi.Mode))
				_ = o.Set("mtime", fi.ModTime.UnixMilli())
				return o
			}))
		case "Exists":
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				p := c.pathArg(fn, fc.Argument(0), false)
				_, err := c.workspace(fn).Stat(c.ctx, p)
				switch {
				case errors.Is(err, sandbox.ErrNotFound):
					return c.vm.ToValue(false)
				case err != nil:
					// A path outside the workspace is an error, not "no".
					c.throw(err, CodeIO)
				}
				return c.vm.ToValue(true)
			}))
		}
		return goja.Undefined()
	})
}

// writeTo is WriteFile(path, content) for fn: content is a string or an
// ArrayBuffer.
func (c *call) writeTo(fn string, fc goja.FunctionCall) {
	p := c.pathArg(fn, fc.Argument(0), false)
	var data []byte
	switch x := fc.Argument(1).Export().(type) {
	case string:
		data = []byte(x)
	case goja.ArrayBuffer:
		data = x.Bytes()
	case []byte:
		data = x
	default:
		c.throw(argErr("%s(%q): want content as a string, got %s", fn, p, typeName(fc.Argument(1))), "")
	}
	if err := c.workspace(fn).WriteFile(c.ctx, p, data, 0o644); err != nil {
		c.throw(err, CodeIO)
	}
}

// computerObject builds ctx.computer over the request's sandbox.
func (c *call) computerObject() *goja.Object {
	return c.newLazy(computerMembers, func(key string) goja.Value {
		switch key {
		case "id":
			return c.vm.ToValue(c.hc.Sandbox.ID())
		case "Exec":
			// Yao's shape: {stdout, stderr, exit_code} whatever the exit
			// code; only a failure to run (a timeout, a gone sandbox) throws.
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				req := c.execRequest("computer.Exec", fc, true)
				res := c.run("computer.Exec", req)
				o := c.vm.NewObject()
				_ = o.Set("stdout", res.Stdout)
				_ = o.Set("stderr", res.Stderr)
				_ = o.Set("exit_code", res.ExitCode)
				if res.Truncated {
					_ = o.Set("truncated", true)
				}
				return o
			}))
		case "Info":
			return c.vm.ToValue(nativeFn(func(goja.FunctionCall) goja.Value { return c.computerInfo() }))
		case "Screenshot":
			// agentbox's: a PNG of the desktop's screen.
			return c.vm.ToValue(nativeFn(func(goja.FunctionCall) goja.Value {
				if !c.hc.Computer.Desktop {
					c.throw(&hostError{code: CodeNoDesktop, msg: "computer.Screenshot: this sandbox has no desktop (set sandbox.desktop, or computer.vnc in a v2 sandbox)"}, "")
				}
				png, err := desktop.Screenshot(c.ctx, c.hc.Sandbox)
				if err != nil {
					c.throw(err, CodeIO)
				}
				return c.vm.ToValue(c.vm.NewArrayBuffer(png))
			}))
		case "Proxy":
			// Yao's: the URL its user opens to see what a port serves.
			return c.vm.ToValue(nativeFn(func(fc goja.FunctionCall) goja.Value {
				port := fc.Argument(0).ToInteger()
				path := ""
				if p := fc.Argument(1); !goja.IsUndefined(p) && !goja.IsNull(p) {
					path = p.String()
				}
				if c.hc.Computer.Preview == nil {
					c.throw(&hostError{code: CodeSandboxUnavailable, msg: "computer.Proxy: this server serves no previews of sandbox ports"}, "")
				}
				u, err := c.hc.Computer.Preview(int(port), path)
				if err != nil {
					c.throw(&hostError{code: CodeInvalidArgument, msg: "computer.Proxy: " + err.Error()}, "")
				}
				return c.vm.ToValue(u)
			}))
		case "VNC":
			// Yao's: the URL of the desktop's screen, noVNC on the
			// desktop's preview.
			return c.vm.ToValue(nativeFn(func(goja.FunctionCall) goja.Value {
				if !c.hc.Computer.Desktop {
					c.throw(&hostError{code: CodeNoDesktop, msg: "computer.VNC: this sandbox has no desktop (set sandbox.desktop, or computer.vnc in a v2 sandbox)"}, "")
				}
				if c.hc.Computer.Preview == nil {
					c.throw(&hostError{code: CodeSandboxUnavailable, msg: "computer.VNC: this server serves no previews of sandbox ports"}, "")
				}
				u, err := c.hc.Computer.Preview(desktop.NoVNCPort, desktop.NoVNCPath+"?autoconnect=1&resize=scale&reconnect=1&path="+desktop.NoVNCSocket)
				if err != nil {
					c.throw(&hostError{code: CodeIO, msg: "computer.VNC: " + err.Error()}, "")
				}
				return c.vm.ToValue(u)
			}))
		}
		return goja.Undefined()
	})
}

// computerInfo is Info(): Yao's ComputerInfo of a box. The system part is
// asked of the sandbox once per request (one short command).
func (c *call) computerInfo() goja.Value {
	hc := c.hc
	hc.mu.Lock()
	sys := hc.system
	hc.mu.Unlock()
	if sys == nil {
		res := c.run("computer.Info", sandbox.ExecRequest{Argv: []string{"uname -s; uname -m; uname -n; nproc 2>/dev/null || echo 0"}, Shell: true})
		if res.ExitCode != 0 {
			c.throw(&hostError{code: CodeIO, msg: fmt.Sprintf("computer.Info: asking the sandbox for its system exited with code %d: %s", res.ExitCode, firstLine(res.Stderr))}, "")
		}
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		for len(lines) < 4 {
			lines = append(lines, "")
		}
		ncpu, _ := strconv.Atoi(strings.TrimSpace(lines[3]))
		sys = map[string]any{
			"os":       strings.ToLower(strings.TrimSpace(lines[0])),
			"arch":     goArch(strings.TrimSpace(lines[1])),
			"hostname": strings.TrimSpace(lines[2]),
			"num_cpu":  ncpu,
			"shell":    "sh",
		}
		hc.mu.Lock()
		hc.system = sys
		hc.mu.Unlock()
	}
	id := hc.Sandbox.ID()
	info := map[string]any{
		"kind":         "box",
		"node_id":      hc.Computer.Runtime,
		"tai_id":       "",
		"status":       "online",
		"system":       sys,
		"box_id":       id,
		"container_id": id,
		"image":        hc.Computer.Image,
		"policy":       hc.Computer.Policy,
	}
	return c.toJS(info)
}

// goArch names a machine as Go does (Yao reports runtime.GOARCH).
func goArch(m string) string {
	switch m {
	case "x86_64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686":
		return "386"
	}
	return m
}
