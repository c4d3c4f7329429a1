package assistant

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// SandboxV2 is the version a Yao v2 sandbox declares.
const SandboxV2 = "2.0"

// rawSandbox is a sandbox definition as written: package.yao's sandbox
// block in Yao v1's (and agentbox's) form, or Yao v2's form there (with
// "version": "2.0") or in sandbox.yao. Both forms are one struct so that a
// field of the other form gets a clear message rather than "unknown".
type rawSandbox struct {
	Version string `json:"version"`
	// v1 and agentbox.
	Command   string `json:"command"`
	Image     string `json:"image"`
	Runtime   string `json:"runtime"`
	MaxMemory string `json:"max_memory"`
	// Isolation applies to both forms, like network.
	Isolation string          `json:"isolation"`
	MaxDisk   string          `json:"max_disk"`
	MaxCPU    *float64        `json:"max_cpu"`
	Timeout   string          `json:"timeout"`
	KeepAlive string          `json:"keep_alive"`
	Arguments *chat.Arguments `json:"arguments"`
	// Both forms: sandbox.pool.
	Pool *int `json:"pool"`
	// Both forms (agentbox's network: "none", "host" or an allow list;
	// secrets as strings, Yao v2's objects, or agentbox's {value, hosts}).
	Network any            `json:"network"`
	Secrets map[string]any `json:"secrets"`
	// Desktop (agentbox's; Yao v2's is computer.vnc) applies to both forms.
	Desktop any `json:"desktop"`
	// Both forms: the ports the sandbox serves as previews (agentbox's
	// ports, v1; Yao's services {name, port}, both).
	Ports    []any `json:"ports"`
	Services []any `json:"services"`
	// v2 (Y agent/sandbox/v2/types/config.go).
	Computer    *rawComputer      `json:"computer"`
	Runner      *rawRunner        `json:"runner"`
	Lifecycle   string            `json:"lifecycle"`
	IdleTimeout string            `json:"idle_timeout"`
	MaxLifetime string            `json:"max_lifetime"`
	StopTimeout string            `json:"stop_timeout"`
	Prepare     []rawPrepare      `json:"prepare"`
	Environment map[string]string `json:"environment"`
	Filter      map[string]any    `json:"filter"`
}

var (
	v1Fields = []string{"command", "image", "runtime", "max_memory", "max_disk", "max_cpu", "timeout", "keep_alive", "arguments", "ports"}
	v2Fields = []string{"computer", "runner", "lifecycle", "idle_timeout", "max_lifetime", "stop_timeout", "prepare", "environment", "filter"}
)

type rawComputer struct {
	Image     string   `json:"image"`
	Memory    string   `json:"memory"`
	CPUs      *float64 `json:"cpus"`
	User      string   `json:"user"`
	WorkDir   string   `json:"work_dir"`
	MountPath string   `json:"mount_path"`
	MountMode string   `json:"mount_mode"`
	VNC       any      `json:"vnc"`
	Ports     []any    `json:"ports"`
}

type rawRunner struct {
	Name       string          `json:"name"`
	Mode       string          `json:"mode"`
	Options    *chat.Arguments `json:"options"`
	Connectors map[string]any  `json:"connectors"`
	Supports   []string        `json:"supports"`
}

type rawPrepare struct {
	Action      string `json:"action"`
	Src         string `json:"src"`
	Dst         string `json:"dst"`
	Cmd         string `json:"cmd"`
	Background  bool   `json:"background"`
	Path        string `json:"path"`
	Once        bool   `json:"once"`
	IgnoreError bool   `json:"ignore_error"`
	Name        string `json:"name"`
	Args        []any  `json:"args"`
}

// runners are Yao v2's runner names: those agentbox runs map to its
// sandbox commands; the others are refused.
var runners = map[string]string{
	"claude": "claude",
	// Yao's own runner (yaocode, also named yao): no coding-agent CLI runs;
	// the hooks get the sandbox (ctx.computer, ctx.workspace) and the
	// assistant's model answers directly.
	"yao":     CommandYao,
	"yaocode": CommandYao,
	// agentbox's commands, runners of the same name.
	"codex":    "codex",
	"cursor":   "cursor",
	"gemini":   "gemini",
	"opencode": "opencode",
}

// loadSandbox gives the assistant its sandbox: Yao v2's sandbox.yao,
// package.yao's block in v2 form, or in v1 (agentbox) form. A sandbox
// definition is never ignored: what agentbox cannot honour is an error,
// what it honours differently a warning.
func (l *loader) loadSandbox(d *doc, a *Assistant, r *rawSandbox, app *App, file string) {
	if file != "" {
		abs := filepath.Join(a.Dir, file)
		if r != nil {
			d.errAt(d.keyOffset("sandbox"), "two sandbox definitions: this block and %s; keep one", file)
		}
		var raw rawSandbox
		fd := l.decode(abs, &raw)
		if fd == nil || fd.broken {
			l.done(fd)
			return
		}
		if raw.Version != SandboxV2 {
			fd.errPath("version", "version must be %q in %s (Yao refuses the file otherwise), got %q", SandboxV2, file, raw.Version)
		}
		sb := l.parseV2(fd, "", &raw, a, app)
		sb.File = fd.file
		if l.done(fd) {
			a.Sandbox = sb
		}
		return
	}
	if r == nil || d.bad["sandbox"] {
		return
	}
	switch r.Version {
	case SandboxV2:
		a.Sandbox = l.parseV2(d, "sandbox.", r, a, app)
	case "", "1.0":
		for _, f := range v2Fields {
			if d.has("sandbox." + f) {
				d.errAt(d.keyOffset("sandbox."+f), "sandbox.%s is a Yao v2 field: add \"version\": \"2.0\" (and name the CLI in runner.name), or use the v1 fields (%s)", f, strings.Join(v1Fields, ", "))
			}
		}
		a.Sandbox = parseV1(d, "sandbox.", r, app.Config)
	default:
		d.errPath("sandbox.version", "sandbox.version %q: want \"2.0\" for Yao's v2 sandbox, or leave it out for v1", r.Version)
		return
	}
	a.Sandbox.File = d.file
}

// parseV2 maps a Yao v2 sandbox at prefix p onto agentbox's sandbox.
func (l *loader) parseV2(d *doc, p string, r *rawSandbox, a *Assistant, app *App) *Sandbox {
	for _, f := range v1Fields {
		if d.has(p + f) {
			d.errAt(d.keyOffset(p+f), "%s%s is a Yao v1 field; a v2 sandbox (version 2.0) names the CLI in runner.name and the container in computer", p, f)
		}
	}
	s := &Sandbox{Version: SandboxV2, MemoryBytes: DefaultMemory, CPUs: DefaultCPUs, Timeout: DefaultTimeout,
		DiskBytes: cmp.Or(app.Config.Sandbox.DiskBytes, DefaultDisk), Runtime: app.Config.Sandbox.Runtime}
	// agentbox's network and isolation apply to both forms: Yao v2 has no
	// field for them.
	s.Network, s.Egress = parseNetwork(d, p+"network", r.Network)
	if s.Network == "" && !d.bad[p+"network"] {
		s.Network, s.Egress = app.Config.Sandbox.Network, app.Config.Sandbox.Egress
	}
	s.Isolation = sandboxIsolation(d, p, r.Isolation, s.Runtime, app.Config)
	name := ""
	if r.Runner != nil {
		name = r.Runner.Name
	}
	if name == "" || name == "use::default" {
		name = app.Agent.Runner
	}
	if name == "" {
		name = "yaocode" // Yao's default runner
	}
	rp := p + "runner"
	if cmd, ok := runners[name]; ok {
		s.Command = cmd
	} else {
		at := rp + ".name"
		if !d.has(at) {
			at = strings.TrimSuffix(p, ".")
		}
		d.errPath(at, "runner %q is not available in agentbox, which runs %s in sandboxes: a v2 sandbox must name one of them in runner.name", name, strings.Join(slices.Sorted(maps.Keys(runners)), " or "))
	}
	var notApplied []string
	if rr := r.Runner; rr != nil {
		switch rr.Mode {
		case "", "cli":
		case "service":
			d.warnPath(rp+".mode", "%s.mode service: agentbox starts the CLI for each request (cli mode)", rp)
		default:
			d.errPath(rp+".mode", "%s.mode: want cli or service, got %q", rp, rr.Mode)
		}
		if rr.Options != nil {
			s.Arguments = *rr.Options
			checkArguments(d, rp+".options.", s.Command, s.Arguments)
		}
		for role, v := range rr.Connectors {
			id, _ := v.(string)
			if m, isObj := v.(map[string]any); isObj {
				id, _ = m["connector"].(string)
			}
			if id == "" || !l.connIDs[id] {
				d.errPath(rp+".connectors."+role, "%s.connectors.%s: want a connector id defined in %s/ (or {connector, override})", rp, role, ConnectorsDir)
			}
		}
		if len(rr.Connectors) > 0 {
			notApplied = append(notApplied, "runner.connectors (the assistant's connector is used)")
		}
		if len(rr.Supports) > 0 {
			notApplied = append(notApplied, "runner.supports")
		}
	}
	if c := r.Computer; c != nil {
		cp := p + "computer"
		s.Image = sandboxImage(d, cp+".image", c.Image, s.Command, app.Config)
		if c.Memory != "" {
			if n, err := ParseMemory(c.Memory); err != nil {
				d.errPath(cp+".memory", "%s.memory: %v", cp, err)
			} else {
				s.MemoryBytes = n
			}
		}
		if c.CPUs != nil {
			s.CPUs = checkCPUs(d, cp+".cpus", *c.CPUs)
		}
		for _, f := range []struct{ name, val string }{{"work_dir", c.WorkDir}, {"mount_path", c.MountPath}} {
			if f.val != "" && f.val != "/workspace" {
				notApplied = append(notApplied, "computer."+f.name+" (the workspace is /workspace)")
			}
		}
		switch c.MountMode {
		case "", "rw":
		case "ro":
			d.errPath(cp+".mount_mode", "%s.mount_mode ro: agentbox mounts the chat's workspace writable; it cannot honour a read-only one", cp)
		default:
			d.errPath(cp+".mount_mode", "%s.mount_mode: want rw or ro, got %q", cp, c.MountMode)
		}
		if c.User != "" {
			notApplied = append(notApplied, "computer.user (the CLI runs as the image's agent user)")
		}
		if c.VNC != nil {
			s.Desktop = parseDesktop(d, cp+".vnc", c.VNC)
		}
		s.Ports = parsePorts(d, cp+".ports", c.Ports, s.Ports, &notApplied)
	} else {
		s.Image = sandboxImage(d, p+"computer.image", "", s.Command, app.Config)
	}
	// Yao's session lifecycle is agentbox's keep_alive: the chat's
	// container (and here its CLI) lives between the chat's requests and
	// stops after idle_timeout without one.
	session := r.Lifecycle == "session"
	switch r.Lifecycle {
	case "", "oneshot":
	case "session":
		s.KeepAlive = DefaultSessionKeepAlive
	case "longrunning", "persistent":
		d.warnPath(p+"lifecycle", "lifecycle %s: agentbox keeps a container per chat, never one shared across chats; a fresh container serves each request (use lifecycle session, or keep_alive in the v1 form, to keep a chat's container between its requests)", r.Lifecycle)
	default:
		d.errPath(p+"lifecycle", "lifecycle: want oneshot, session, longrunning or persistent, got %q", r.Lifecycle)
	}
	for _, f := range []struct{ name, val string }{{"idle_timeout", r.IdleTimeout}, {"max_lifetime", r.MaxLifetime}, {"stop_timeout", r.StopTimeout}} {
		if f.val == "" {
			continue
		}
		if f.name == "idle_timeout" && session {
			s.KeepAlive = parseKeepAlive(d, p+f.name, f.val)
			continue
		}
		parseDurationIn(d, p+f.name, f.val, time.Second, 365*24*time.Hour)
		notApplied = append(notApplied, f.name)
	}
	if len(r.Filter) > 0 {
		notApplied = append(notApplied, "filter (there is one kind of computer)")
	}
	if r.Desktop != nil {
		if r.Computer != nil && r.Computer.VNC != nil {
			d.errPath(p+"desktop", "%sdesktop and %scomputer.vnc both declare the desktop; keep one", p, p)
		} else {
			s.Desktop = parseDesktop(d, p+"desktop", r.Desktop)
		}
	}
	written := ""
	if r.Computer != nil {
		written = r.Computer.Image
	}
	s.Ports = parsePorts(d, p+"services", r.Services, s.Ports, &notApplied)
	applyDesktop(d, s, p+"computer.image", written, false)
	if len(notApplied) > 0 {
		d.warnAt(d.keyOffset(strings.TrimSuffix(p, ".")), "sandbox settings loaded but not applied: %s", strings.Join(notApplied, "; "))
	}
	s.Prepare = l.checkPrepare(d, p, r.Prepare, a.Dir)
	s.Environment = checkEnv(d, p+"environment", r.Environment)
	s.Secrets = parseSecrets(d, p+"secrets", r.Secrets, s.Egress)
	s.Pool = parsePool(d, p+"pool", r.Pool)
	return s
}

// checkPrepare maps v2's prepare steps: exec and copy run in the sandbox
// before the CLI; file (Yao's internal) and process (a Yao process) are
// refused.
func (l *loader) checkPrepare(d *doc, p string, steps []rawPrepare, dir string) []PrepareStep {
	var out []PrepareStep
	for i, st := range steps {
		sp := fmt.Sprintf("%sprepare[%d]", p, i)
		step := PrepareStep{Action: st.Action, Cmd: st.Cmd, Src: st.Src, Dst: st.Dst, Once: st.Once, IgnoreError: st.IgnoreError, Background: st.Background}
		switch st.Action {
		case "exec":
			if strings.TrimSpace(st.Cmd) == "" {
				d.errPath(sp, "%s: exec needs cmd", sp)
			}
		case "copy":
			if st.Src == "" || st.Dst == "" {
				d.errPath(sp, "%s: copy needs src (in the assistant folder) and dst (in the sandbox)", sp)
				break
			}
			if !filepath.IsLocal(filepath.FromSlash(st.Src)) {
				d.errPath(sp+".src", "%s.src %q must be inside the assistant folder", sp, st.Src)
			} else if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(st.Src))); err != nil {
				d.errPath(sp+".src", "%s.src %q: no such file or folder in the assistant folder", sp, st.Src)
			}
			if dst := strings.TrimPrefix(st.Dst, "~"); strings.HasPrefix(dst, "/") && dst != "/workspace" && !strings.HasPrefix(dst, "/workspace/") && !strings.HasPrefix(st.Dst, "~") {
				d.errPath(sp+".dst", "%s.dst %q is outside the workspace: copies go into the chat's workspace (~/ and /workspace/ are its root)", sp, st.Dst)
			} else if strings.Contains("/"+st.Dst+"/", "/../") {
				d.errPath(sp+".dst", "%s.dst %q may not contain ..", sp, st.Dst)
			}
			if st.Background {
				d.errPath(sp+".background", "%s.background is for exec steps", sp)
			}
		case "file", "process":
			d.errPath(sp+".action", "%s.action %s is not supported: %s; use exec or copy", sp, st.Action, map[string]string{"file": "Yao writes these steps itself", "process": "it runs a Yao process"}[st.Action])
			continue
		case "":
			d.errPath(sp, "%s.action is required: exec or copy", sp)
			continue
		default:
			d.errPath(sp+".action", "%s.action: want exec or copy, got %q", sp, st.Action)
			continue
		}
		out = append(out, step)
	}
	return out
}

// checkEnv checks an environment map: valid names, $ENV references.
func checkEnv(d *doc, p string, env map[string]string) map[string]string {
	for k, v := range env {
		if !envName.MatchString(k) {
			d.errPath(p+"."+k, "%s: invalid variable name %q", p, k)
		} else if why := reservedName(k); why != "" {
			d.errPath(p+"."+k, "%s.%s: %s; choose another name", p, k, why)
		}
		if msg := checkEnvRef(v); msg != "" {
			d.errPath(p+"."+k, "%s.%s: %s", p, k, msg)
		}
	}
	return env
}
