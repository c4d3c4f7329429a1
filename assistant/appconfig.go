package assistant

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

// DefaultListen is the listen address when app.jsonc names none; the
// server's default too.
const DefaultListen = "127.0.0.1:8080"

// minRetention is the shortest cleanup.retention accepted.
const minRetention = time.Hour

// rawApp is app.jsonc as written; loadConfig checks it into an AppConfig.
type rawApp struct {
	DataRoot       string             `json:"data_root"`
	Listen         string             `json:"listen"`
	AllowedHosts   []string           `json:"allowed_hosts"`
	AllowedOrigins []string           `json:"allowed_origins"`
	PreviewDomain  string             `json:"preview_domain"`
	Auth           AuthConfig         `json:"auth"`
	Sandbox        rawSandboxDefaults `json:"sandbox"`
	Cleanup        rawCleanup         `json:"cleanup"`
	Limits         rawLimits          `json:"limits"`
	DrainTimeout   string             `json:"drain_timeout"`
	Store          rawStore           `json:"store"`
	Images         ImagesConfig       `json:"images"`
	Approval       *approval.Raw      `json:"approval"`
}

// rawSandboxDefaults is app.jsonc's sandbox block as written.
type rawSandboxDefaults struct {
	Runtime   string            `json:"runtime"`
	Isolation string            `json:"isolation"`
	Network   any               `json:"network"` // "none", "host" or an allow list
	MaxDisk   string            `json:"max_disk"`
	Images    map[string]string `json:"images"`
	// Kubernetes configures the kubernetes runtime.
	Kubernetes KubernetesConfig `json:"kubernetes"`
}

type rawCleanup struct {
	Schedule    string `json:"schedule"`
	Retention   string `json:"retention"`
	Checkpoints *int   `json:"checkpoints"`
}

// loadConfig reads app.jsonc (optional) and applies its defaults: data root,
// listen address, auth tokens, sandbox defaults and the workspace cleanup
// schedule.
func (l *loader) loadConfig() *AppConfig {
	cfg := &AppConfig{
		DataRoot: filepath.Join(l.root, "data"),
		Listen:   DefaultListen,
		Sandbox:  SandboxDefaults{DiskBytes: DefaultDisk},
		Cleanup:  CleanupConfig{Schedule: sandbox.DefaultRetentionSchedule, Retention: sandbox.DefaultRetention, Checkpoints: DefaultCheckpoints},

		Limits:       DefaultLimits(),
		DrainTimeout: DefaultDrainTimeout,
	}
	defer func() {
		if cfg.Store.Driver == "" { // no app.jsonc, or a broken one
			cfg.Store = StoreConfig{Driver: "sqlite", Path: filepath.Join(cfg.DataRoot, "agentbox.db")}
		}
	}()
	abs := filepath.Join(l.root, AppFile)
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		// app.yao and app.json are Yao's own app files (name, version,
		// ...): nothing of agentbox's is in them.
		return cfg
	}
	var raw rawApp
	d := l.decode(abs, &raw)
	if d == nil {
		return cfg
	}
	defer l.done(d)
	if d.broken {
		return cfg
	}
	if raw.DataRoot != "" {
		p := raw.DataRoot
		if !filepath.IsAbs(p) {
			p = filepath.Join(l.root, p)
		}
		cfg.DataRoot = filepath.Clean(p)
	}
	if d.has("listen") {
		if _, port, err := net.SplitHostPort(raw.Listen); err != nil || port == "" {
			d.errPath("listen", "listen: want host:port (\"127.0.0.1:8080\", \":8080\"), got %q", raw.Listen)
		} else {
			cfg.Listen = raw.Listen
		}
	}
	for i, h := range raw.AllowedHosts {
		if n, err := CheckAllowedHost(h); err != nil {
			d.errPath(fmt.Sprintf("allowed_hosts[%d]", i), "allowed_hosts[%d]: %v", i, err)
		} else {
			cfg.AllowedHosts = append(cfg.AllowedHosts, n)
		}
	}
	for i, o := range raw.AllowedOrigins {
		if n, err := CheckAllowedOrigin(o); err != nil {
			d.errPath(fmt.Sprintf("allowed_origins[%d]", i), "allowed_origins[%d]: %v", i, err)
		} else {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, n)
		}
	}
	for i, h := range raw.Images.AllowedHosts {
		if n, err := CheckAllowedHost(h); err != nil {
			d.errPath(fmt.Sprintf("images.allowed_hosts[%d]", i), "images.allowed_hosts[%d]: %v", i, err)
		} else {
			cfg.Images.AllowedHosts = append(cfg.Images.AllowedHosts, n)
		}
	}
	if d.has("preview_domain") {
		h := strings.ToLower(strings.TrimSpace(raw.PreviewDomain))
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if h == "" || strings.ContainsAny(h, "/*@ :") || strings.HasPrefix(h, ".") || !strings.Contains(h, ".") {
			d.errPath("preview_domain", "preview_domain: want a host name whose subdomains all point at this server (\"preview.localhost\", \"previews.example.com\"), got %q", raw.PreviewDomain)
		} else {
			cfg.PreviewDomain = strings.TrimSpace(raw.PreviewDomain)
		}
	}
	seen := map[string]int{}
	for i, t := range raw.Auth.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		switch {
		case t.Token == "":
			d.errPath(p+".token", "%s.token is required", p)
		case checkEnvRef(t.Token) != "":
			d.errPath(p+".token", "%s", checkEnvRef(t.Token))
		default:
			if j, dup := seen[t.Token]; dup {
				d.errPath(p+".token", "%s.token: the same token as auth.tokens[%d]", p, j)
			}
			seen[t.Token] = i
		}
		if t.User == "" {
			d.errPath(p+".user", "%s.user is required", p)
		} else if err := sandbox.ValidateID("user", t.User); err != nil {
			d.errPath(p+".user", "%s", strings.TrimSuffix(err.Error(), ": "+sandbox.ErrInvalidID.Error()))
		}
		if t.Team != "" {
			if err := sandbox.ValidateID("team", t.Team); err != nil {
				d.errPath(p+".team", "%s", strings.TrimSuffix(err.Error(), ": "+sandbox.ErrInvalidID.Error()))
			}
		}
	}
	d.checkMetricsToken(raw.Auth.MetricsToken, raw.Auth.Tokens)
	cfg.Auth = raw.Auth
	cfg.Limits = d.limits(raw.Limits)
	cfg.DrainTimeout = d.drainTimeout(raw.DrainTimeout)
	cfg.Store = d.store(raw.Store, l.root, cfg.DataRoot)
	if raw.Approval != nil {
		cfg.Approval = parseApproval(d, "approval", *raw.Approval)
	}
	s := SandboxDefaults{Runtime: raw.Sandbox.Runtime, MaxDisk: raw.Sandbox.MaxDisk, Images: raw.Sandbox.Images, Kubernetes: raw.Sandbox.Kubernetes}
	if !oneOf(s.Runtime, "", "docker", "kubernetes", "local") {
		d.errPath("sandbox.runtime", "sandbox.runtime: want docker, kubernetes or local, got %q", s.Runtime)
	}
	s.Isolation = parseIsolation(d, "sandbox.isolation", raw.Sandbox.Isolation, s.Runtime)
	checkKubernetes(d, &s.Kubernetes, l.root)
	s.Network, s.Egress = parseNetwork(d, "sandbox.network", raw.Sandbox.Network)
	for cmd, img := range s.Images {
		if _, ok := defaultImages[cmd]; !ok {
			d.errPath("sandbox.images."+cmd, "sandbox.images: unknown command %q (known: %s)", cmd, knownCommands())
		} else if strings.TrimSpace(img) == "" {
			d.errPath("sandbox.images."+cmd, "sandbox.images.%s is empty", cmd)
		}
	}
	s.DiskBytes = DefaultDisk
	if d.has("sandbox.max_disk") {
		if n, err := ParseDisk(s.MaxDisk); err != nil {
			d.errPath("sandbox.max_disk", "sandbox.max_disk: %v", err)
		} else {
			s.DiskBytes = n
		}
	}
	cfg.Sandbox = s
	if raw.Cleanup.Schedule != "" {
		if _, err := cron.ParseStandard(raw.Cleanup.Schedule); err != nil {
			d.errPath("cleanup.schedule", "cleanup.schedule %q: %v (want a cron spec like \"0 3 * * *\")", raw.Cleanup.Schedule, err)
		} else {
			cfg.Cleanup.Schedule = raw.Cleanup.Schedule
		}
	}
	if n := raw.Cleanup.Checkpoints; n != nil {
		if *n < 0 {
			d.errPath("cleanup.checkpoints", "cleanup.checkpoints is %d: want 0 (no checkpoints) or how many to keep per chat", *n)
		} else {
			cfg.Cleanup.Checkpoints = *n
		}
	}
	if raw.Cleanup.Retention != "" {
		r, err := parseRetention(raw.Cleanup.Retention)
		switch {
		case err != nil:
			d.errPath("cleanup.retention", "cleanup.retention: %v", err)
		case r < minRetention:
			d.errPath("cleanup.retention", "cleanup.retention %q is shorter than %s", raw.Cleanup.Retention, units.FormatDuration(minRetention))
		default:
			cfg.Cleanup.Retention = r
		}
	}
	return cfg
}

// parseRetention parses cleanup.retention: a duration that may start with
// whole days ("7d", "36h", "1d12h"). Its range is checked by the caller.
func parseRetention(s string) (time.Duration, error) {
	d, err := units.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: use units d, h, m (\"7d\", \"36h\")", err)
	}
	return d, nil
}
