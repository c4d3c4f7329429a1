package assistant

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/images"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

// Sandbox defaults and limits.
const (
	DefaultTimeout = 10 * time.Minute
	DefaultMemory  = 4 << 30
	DefaultCPUs    = 2.0
	// DefaultDisk is sandbox.max_disk when neither package.yao nor
	// app.jsonc sets it: what one chat's workspace may hold.
	DefaultDisk  = 10 << 30
	minMemory    = 64 << 20
	maxMemory    = 64 << 30
	minDisk      = sandbox.MinDisk
	maxDisk      = 16 << 40
	minCPUs      = 0.1
	maxCPUs      = 64
	minTimeout   = 10 * time.Second
	minKeepAlive = 10 * time.Second
	// DefaultSessionKeepAlive is the keep_alive of a Yao v2 sandbox with
	// lifecycle session and no idle_timeout: long enough for a user's
	// next message in a conversation, short enough that an abandoned chat
	// gives its memory back within minutes.
	DefaultSessionKeepAlive = 5 * time.Minute
	maxTimeout              = 24 * time.Hour
	maxTurnsLimit           = 1000
)

// CommandYao is the sandbox command of Yao v2's yao runner (yaocode): the
// sandbox is started for the hooks, which get it as ctx.computer and
// ctx.workspace, and no CLI runs in it; the assistant answers with its
// connector as a direct assistant does. Its default image is the base
// image (a shell and the usual tools, no CLI).
const CommandYao = "yao"

// defaultImages are the sandbox images per command, unless app.jsonc's
// sandbox.images or the assistant's sandbox.image says otherwise. Its keys
// are the commands an assistant may name: a command joins when its executor
// does (package images already names the images of those to come).
var defaultImages = map[string]string{
	"claude":   images.Claude,
	"codex":    images.Codex,
	"cursor":   images.Cursor,
	"gemini":   images.Gemini,
	"opencode": images.Opencode,
}

// Commands lists the sandbox commands, sorted.
func Commands() []string {
	out := make([]string, 0, len(defaultImages))
	for c := range defaultImages {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// knownCommands is Commands for messages: "claude, codex, ...".
func knownCommands() string { return strings.Join(Commands(), ", ") }

// DefaultImage returns the built-in sandbox image for command ("" when the
// command is unknown).
func DefaultImage(command string) string { return defaultImages[command] }

// PermissionModes are the values sandbox.arguments.permission_mode accepts,
// per sandbox command: Claude Code's --permission-mode, and for Cursor its
// --mode values (plan, ask) plus the unattended modes, which run Cursor's
// default agent mode.
var PermissionModes = map[string][]string{
	"claude": {"acceptEdits", "bypassPermissions", "default", "dontAsk", "plan"},
	"cursor": {"acceptEdits", "ask", "bypassPermissions", "default", "dontAsk", "plan"},
	// Codex runs without its own sandbox inside the container (codex exec
	// never asks); its read-only sandbox, which plan needs, cannot run
	// there.
	"codex": {"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk"},
	// Gemini CLI: --approval-mode default, auto_edit, yolo or plan.
	"gemini": {"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"},
	// opencode: its plan agent, or its build agent with permissions.
	"opencode": {"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"},
}

// HasSandbox reports whether the assistant runs a coding-agent CLI in a
// sandbox (it has a sandbox block) rather than calling its connector
// directly.
func (a *Assistant) HasSandbox() bool { return a != nil && a.Sandbox != nil }

// parseV1 validates a Yao v1 (or agentbox) sandbox block at prefix p
// ("sandbox.") and fills defaults from the app settings and the built-in
// values.
func parseV1(d *doc, p string, r *rawSandbox, cfg *AppConfig) *Sandbox {
	s := &Sandbox{
		Command:     r.Command,
		Image:       r.Image,
		Runtime:     r.Runtime,
		MemoryBytes: DefaultMemory,
		DiskBytes:   cmp.Or(cfg.Sandbox.DiskBytes, DefaultDisk),
		CPUs:        DefaultCPUs,
		Timeout:     DefaultTimeout,
	}
	switch {
	case d.bad[p+"command"]:
	case r.Command == "":
		d.errPath(strings.TrimSuffix(p, "."), "%scommand is required: one of %s", p, knownCommands())
	case defaultImages[r.Command] == "":
		d.errPath(p+"command", "%scommand: unknown command %q (known: %s)", p, r.Command, knownCommands())
	}
	s.Image = sandboxImage(d, p+"image", r.Image, r.Command, cfg)
	if !oneOf(r.Runtime, "", "docker", "kubernetes", "local") {
		d.errPath(p+"runtime", "%sruntime: want docker, kubernetes or local, got %q", p, r.Runtime)
	}
	if s.Runtime == "" {
		s.Runtime = cfg.Sandbox.Runtime
	}
	s.Isolation = sandboxIsolation(d, p, r.Isolation, s.Runtime, cfg)
	s.Network, s.Egress = parseNetwork(d, p+"network", r.Network)
	if s.Network == "" && !d.bad[p+"network"] {
		s.Network, s.Egress = cfg.Sandbox.Network, cfg.Sandbox.Egress
	}
	s.Secrets = parseSecrets(d, p+"secrets", r.Secrets, s.Egress)
	if d.has(p + "max_memory") {
		n, err := ParseMemory(r.MaxMemory)
		if err != nil {
			d.errPath(p+"max_memory", "%smax_memory: %v", p, err)
		} else {
			s.MemoryBytes = n
		}
	}
	if d.has(p + "max_disk") {
		n, err := ParseDisk(r.MaxDisk)
		if err != nil {
			d.errPath(p+"max_disk", "%smax_disk: %v", p, err)
		} else {
			s.DiskBytes = n
		}
	}
	if r.MaxCPU != nil && d.has(p+"max_cpu") {
		s.CPUs = checkCPUs(d, p+"max_cpu", *r.MaxCPU)
	}
	if d.has(p + "timeout") {
		s.Timeout = parseDurationIn(d, p+"timeout", r.Timeout, minTimeout, maxTimeout)
	}
	if d.has(p + "keep_alive") {
		s.KeepAlive = parseKeepAlive(d, p+"keep_alive", r.KeepAlive)
	}
	s.Pool = parsePool(d, p+"pool", r.Pool)
	if r.Arguments != nil {
		s.Arguments = *r.Arguments
		checkArguments(d, p+"arguments.", s.Command, s.Arguments)
	}
	var notApplied []string
	s.Ports = parsePorts(d, p+"ports", r.Ports, nil, &notApplied)
	s.Ports = parsePorts(d, p+"services", r.Services, s.Ports, &notApplied)
	s.Desktop = parseDesktop(d, p+"desktop", r.Desktop)
	applyDesktop(d, s, p+"image", r.Image, d.has(p+"keep_alive"))
	if len(notApplied) > 0 {
		d.warnAt(d.keyOffset(strings.TrimSuffix(p, ".")), "sandbox settings loaded but not applied: %s", strings.Join(notApplied, "; "))
	}
	return s
}

// sandboxImage returns the image for command: the one written, app.jsonc's
// default, or the built-in. Yao's own images (yaoapp/...) carry Yao's
// sandbox tooling, not the CLI layout agentbox runs, so they are replaced
// by agentbox's image for the command, with a warning.
func sandboxImage(d *doc, path, image, command string, cfg *AppConfig) string {
	if d.has(path) && strings.TrimSpace(image) == "" {
		d.errPath(path, "%s is empty (leave it out for the default image)", path)
	}
	def := cmpOr(cfg.Sandbox.Images[command], defaultImages[command])
	if command == CommandYao {
		def = cmpOr(def, images.Base)
	}
	if strings.HasPrefix(image, "yaoapp/") {
		if def != "" {
			d.warnPath(path, "%s %q is Yao's; agentbox runs %s in its own image %s", path, image, command, def)
		}
		return def
	}
	return cmpOr(image, def)
}

func checkCPUs(d *doc, path string, c float64) float64 {
	if c < minCPUs || c > maxCPUs || math.IsNaN(c) {
		d.errPath(path, "%s %v is out of range: want %v to %v CPUs", path, c, minCPUs, maxCPUs)
		return DefaultCPUs
	}
	return c
}

// checkArguments range-checks a sandbox's CLI arguments at prefix p
// ("sandbox.arguments.").
func checkArguments(d *doc, p, command string, a chat.Arguments) {
	if d.has(p+"max_turns") && (a.MaxTurns < 1 || a.MaxTurns > maxTurnsLimit) {
		d.errPath(p+"max_turns", "%smax_turns %d is out of range: want 1 to %d", p, a.MaxTurns, maxTurnsLimit)
	}
	if modes, ok := PermissionModes[command]; ok && d.has(p+"permission_mode") && !oneOf(a.PermissionMode, modes...) {
		d.errPath(p+"permission_mode", "%spermission_mode: unknown mode %q for %s (known: %s)", p, a.PermissionMode, command, strings.Join(modes, ", "))
	}
	for _, list := range []struct {
		name  string
		tools []string
	}{{"allowed_tools", a.AllowedTools}, {"disallowed_tools", a.DisallowedTools}} {
		for i, t := range list.tools {
			if strings.TrimSpace(t) == "" {
				d.errPath(fmt.Sprintf("%s%s[%d]", p, list.name, i), "%s%s[%d] is empty", p, list.name, i)
			}
		}
	}
	if d.has(p+"model") && strings.TrimSpace(a.Model) == "" {
		d.errPath(p+"model", "%smodel is empty (leave it out to use the connector's model)", p)
	}
}

// parseDurationIn parses a duration at path ("30s", "10m", "1d") and checks
// it lies in [lo, hi]; on a problem it returns 0 after recording it.
func parseDurationIn(d *doc, path, s string, lo, hi time.Duration) time.Duration {
	v, err := units.ParseDuration(s)
	switch {
	case err != nil:
		d.errPath(path, "%s: %v: use a number with a unit, like \"30s\", \"10m\" or \"1h\"", path, err)
	case v <= 0:
		d.errPath(path, "%s %q must be positive", path, s)
	case v < lo || v > hi:
		d.errPath(path, "%s %q is out of range: want %s to %s", path, s, units.FormatDuration(lo), units.FormatDuration(hi))
	default:
		return v
	}
	return 0
}

// maxPool bounds sandbox.pool; limits.pool.total bounds all of them.
const maxPool = 64

// parsePool checks sandbox.pool: 0 (the default) to maxPool.
func parsePool(d *doc, path string, n *int) int {
	switch {
	case n == nil || !d.has(path):
		return 0
	case *n < 0 || *n > maxPool:
		d.errPath(path, "%s %d is out of range: want 0 to %d", path, *n, maxPool)
		return 0
	}
	return *n
}

// parseKeepAlive checks sandbox.keep_alive: "0" or "off" (the default:
// every turn starts its own sandbox), else 10s to 24h.
func parseKeepAlive(d *doc, path, s string) time.Duration {
	switch strings.TrimSpace(s) {
	case "0", "off", "":
		return 0
	}
	return parseDurationIn(d, path, s, minKeepAlive, maxTimeout)
}

// ParseMemory parses a memory size with a unit b, k, m or g ("512m", "4g",
// "1.5g"; "4gb" also works; see units.ParseBytes) into bytes and checks it
// lies between 64m and 64g.
func ParseMemory(s string) (int64, error) {
	n, err := units.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w: use a number with a unit b, k, m or g, like \"512m\" or \"4g\"", err)
	}
	if n < minMemory || n > maxMemory {
		return 0, fmt.Errorf("size %q is out of range: want 64m to 64g", s)
	}
	return n, nil
}

// ParseDisk parses a workspace disk limit (sandbox.max_disk: "10g",
// "512m", "1t"; see units.ParseBytes) into bytes and checks it lies
// between 32m and 16t.
func ParseDisk(s string) (int64, error) {
	n, err := units.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w: use a number with a unit m, g or t, like \"512m\" or \"10g\"", err)
	}
	if n < minDisk || n > maxDisk {
		return 0, fmt.Errorf("size %q is out of range: want 32m to 16t", s)
	}
	return n, nil
}

// k8sName is a Kubernetes object name that is a DNS label (namespaces).
var k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// k8sSubdomain is a Kubernetes object name that is a DNS subdomain
// (RuntimeClasses), at most 253 long.
var k8sSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// fieldHint points the field sandbox.isolation replaced at it.
func (*KubernetesConfig) fieldHint(name string) string {
	if name == "runtime_class" {
		return `a sandbox's RuntimeClass follows its isolation now: set "isolation": "gvisor" (or "kata") in app.jsonc's sandbox or an assistant's, and name the class in runtime_classes, {"gvisor": "NAME"}, when it is not "gvisor"`
	}
	return ""
}

// checkKubernetes validates app.jsonc's sandbox.kubernetes and makes its
// paths absolute (relative to the app folder root).
func checkKubernetes(d *doc, k *KubernetesConfig, root string) {
	const p = "sandbox.kubernetes."
	if k.Namespace != "" && !k8sName.MatchString(k.Namespace) {
		d.errPath(p+"namespace", "sandbox.kubernetes.namespace %q is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)", k.Namespace)
	}
	if !oneOf(k.ImagePullPolicy, "", "Always", "IfNotPresent", "Never") {
		d.errPath(p+"image_pull_policy", "sandbox.kubernetes.image_pull_policy: want Always, IfNotPresent or Never, got %q", k.ImagePullPolicy)
	}
	for _, f := range []struct{ name, v string }{{"bridge_listen", k.BridgeListen}, {"bridge_address", k.BridgeAddress}} {
		if f.v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(f.v); err != nil || port == "" {
			d.errPath(p+f.name, "sandbox.kubernetes.%s %q: want host:port (host may be empty for bridge_listen)", f.name, f.v)
		}
	}
	if k.BridgeAddress != "" && k.BridgeListen == "" {
		d.errPath(p+"bridge_address", "sandbox.kubernetes.bridge_address is set without bridge_listen")
	}
	for iso, class := range k.RuntimeClasses {
		at := p + "runtime_classes." + iso
		if !sandbox.IsIsolation(iso) {
			d.errPath(at, "sandbox.kubernetes.runtime_classes: %q is not an isolation (want %s)", iso, strings.Join(sandbox.Isolations(), ", "))
		} else if class != "" && (len(class) > 253 || !k8sSubdomain.MatchString(class)) {
			d.errPath(at, "sandbox.kubernetes.runtime_classes.%s %q is not a RuntimeClass name (lower-case letters, digits, '-' and '.', at most 253)", iso, class)
		}
	}
	if k.ClaimRoot != "" && k.WorkspaceClaim == "" {
		d.errPath(p+"claim_root", "sandbox.kubernetes.claim_root is set without workspace_claim")
	}
	if k.PoolDir != "" && k.WorkspaceClaim != "" {
		d.errPath(p+"pool_dir", "sandbox.kubernetes.pool_dir is set with workspace_claim, whose pods are not pooled (they may run on another node, where no mount of this one reaches them)")
	}
	for _, f := range []*string{&k.Kubeconfig, &k.ClaimRoot, &k.PoolDir} {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(root, *f)
		}
	}
}
