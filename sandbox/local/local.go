// Package local is the daemonless sandbox runtime for development machines
// and demos: every command runs under bubblewrap (bwrap) in its own user,
// pid, ipc and uts namespaces (and network namespace unless the network is
// "host"), with only the workspace writable at /workspace, the system
// directories read-only, and tmpfs /tmp and home. A local "sandbox" is the
// set of bwrap invocations sharing one workspace; Remove kills those still
// running.
//
// When agentbox runs as root, bwrap runs as the sandbox user (1000:1000 by
// default, like the Docker image's agent user) through an unprivileged user
// namespace, so files written in the workspace get the same owner under
// both runtimes.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
)

// Name is the runtime's registry name.
const Name = "local"

// DefaultSystemDirs are bound read-only into every sandbox (those missing on
// the host are skipped; symlinks such as a merged /bin stay symlinks).
var DefaultSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// DefaultPath is PATH inside the sandbox.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Options configures the runtime.
type Options struct {
	// Instance names the owning server instance (part of sandbox ids).
	Instance string
	// Bwrap is the bubblewrap binary (default: "bwrap" on PATH).
	Bwrap string
	// UID and GID are the user commands run as when agentbox runs as root
	// (0: 1000). Otherwise commands run as agentbox's own user.
	UID, GID int
	// Home is the user's home, a tmpfs (default /home/agent).
	Home string
	// Network is the mode used when Spec.Network is empty (default
	// sandbox.NetworkNone).
	Network string
	// SystemDirs replaces DefaultSystemDirs.
	SystemDirs []string
}

// Runtime runs local sandboxes. It is safe for concurrent use.
type Runtime struct {
	bwrap    string
	opts     Options
	cred     *syscall.Credential // nil: run as ourselves
	uid, gid int                 // who runs inside
	sysArgs  []string
	idPrefix string
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New finds bubblewrap and checks that it can create a sandbox here (user
// namespaces allowed). Missing or unusable bwrap is an error wrapping
// sandbox.ErrEngineUnavailable with a hint.
func New(opts Options) (*Runtime, error) {
	if opts.Bwrap == "" {
		opts.Bwrap = "bwrap"
	}
	if opts.Home == "" {
		opts.Home = "/home/agent"
	}
	if opts.Network == "" {
		opts.Network = sandbox.NetworkNone
	}
	if opts.Network != sandbox.NetworkNone && opts.Network != sandbox.NetworkHost {
		return nil, fmt.Errorf("local: network %q: want %q or %q", opts.Network, sandbox.NetworkNone, sandbox.NetworkHost)
	}
	if opts.UID == 0 {
		opts.UID = 1000
	}
	if opts.GID == 0 {
		opts.GID = 1000
	}
	if opts.SystemDirs == nil {
		opts.SystemDirs = DefaultSystemDirs
	}
	bw, err := exec.LookPath(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("local: bubblewrap not found (install it: apt-get install bubblewrap): %w: %w", sandbox.ErrEngineUnavailable, err)
	}
	r := &Runtime{bwrap: bw, opts: opts, uid: os.Getuid(), gid: os.Getgid()}
	if os.Geteuid() == 0 {
		r.cred = &syscall.Credential{Uid: uint32(opts.UID), Gid: uint32(opts.GID), Groups: []uint32{}}
		r.uid, r.gid = opts.UID, opts.GID
	}
	r.sysArgs = systemArgs(opts.SystemDirs)
	r.idPrefix = "local-"
	if opts.Instance != "" {
		r.idPrefix += opts.Instance + "-"
	}

	// One empty sandbox proves that namespaces work here.
	cmd := exec.Command(bw, append(r.baseArgs(sandbox.NetworkNone), "--", "true")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("local: bubblewrap cannot create a sandbox here (user namespaces disabled? check kernel.unprivileged_userns_clone and user.max_user_namespaces): %s: %w: %w",
			strings.TrimSpace(string(out)), sandbox.ErrEngineUnavailable, err)
	}
	return r, nil
}

// systemArgs binds the system directories read-only, keeping symlinks.
func systemArgs(dirs []string) []string {
	var args []string
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
			continue
		}
		if st.IsDir() {
			args = append(args, "--ro-bind", d, d)
		}
	}
	return args
}

// baseArgs is everything but the workspace, mounts, cwd and command.
func (r *Runtime) baseArgs(network string) []string {
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "agentbox",
		"--die-with-parent", "--new-session",
	}
	if network != sandbox.NetworkHost {
		args = append(args, "--unshare-net")
	}
	args = append(args, r.sysArgs...)
	return append(args,
		"--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--tmpfs", r.opts.Home,
	)
}

// Name returns "local".
func (r *Runtime) Name() string { return Name }

// Close does nothing: the runtime holds no resources (sandboxes are
// removed by their owners).
func (r *Runtime) Close(ctx context.Context) error { return nil }

// Create checks spec and returns a sandbox; no process starts until Exec
// or Start.
func (r *Runtime) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec.Workspace == nil {
		return nil, errors.New("local create: spec has no workspace")
	}
	if err := sandbox.ValidateID("user", spec.UserID); err != nil {
		return nil, fmt.Errorf("local create: %w", err)
	}
	if err := sandbox.ValidateID("chat", spec.ChatID); err != nil {
		return nil, fmt.Errorf("local create: %w", err)
	}
	network := spec.Network
	if network == "" {
		network = r.opts.Network
	}
	if network != sandbox.NetworkNone && network != sandbox.NetworkHost {
		return nil, fmt.Errorf("local create: network %q: want %q or %q", network, sandbox.NetworkNone, sandbox.NetworkHost)
	}
	// bubblewrap's namespaces share the host's kernel: runc's boundary,
	// without the container's cgroups.
	if _, err := sandbox.CheckIsolation(Name, spec.Isolation, sandbox.IsolationRunc); err != nil {
		return nil, fmt.Errorf("local create: %w; gvisor runs on the docker and kubernetes runtimes, kata on kubernetes", err)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return nil, fmt.Errorf("local create: %w", err)
	}
	hidden, err := sandbox.PrepareHide(ctx, spec.Workspace, spec.Hide)
	if err != nil {
		return nil, fmt.Errorf("local create: %w", err)
	}
	dir := spec.Workspace.Dir()
	if r.cred != nil {
		if err := reachable(dir, r.uid, r.gid); err != nil {
			return nil, fmt.Errorf("local create: the sandbox user %d:%d cannot reach the workspace: %w", r.uid, r.gid, err)
		}
	}
	args := r.baseArgs(network)
	args = append(args, "--bind", dir, sandbox.Workdir)
	// Hidden names: an empty tmpfs made read-only over a folder, an empty
	// file bound read-only over a file.
	for _, h := range hidden {
		if h.Folder {
			args = append(args, "--perms", "0555", "--tmpfs", h.Target, "--remount-ro", h.Target)
			continue
		}
		empty, err := sandbox.EmptyFile()
		if err != nil {
			return nil, fmt.Errorf("local create: %w", err)
		}
		args = append(args, "--ro-bind", empty, h.Target)
	}
	args = append(args, r.mountArgs(mounts)...)
	env := map[string]string{"PATH": DefaultPath, "HOME": r.opts.Home, "USER": "agent", "LANG": "C.UTF-8"}
	for k, v := range spec.Env {
		env[k] = v
	}
	if _, err := sandbox.MergeEnv(env); err != nil {
		return nil, fmt.Errorf("local create: %w", err)
	}
	return &Sandbox{rt: r, id: r.idPrefix + randHex(6), ws: spec.Workspace, args: args, env: env, terms: map[*terminal]struct{}{}}, nil
}

// mountArgs binds the extra mounts. A target that does not exist inside a
// read-only system folder (the CLI at /usr/local/bin/claude) needs a mount
// point bwrap cannot create there: its nearest existing folder becomes a
// tmpfs holding read-only binds of the host's entries, plus the mount, and
// is made read-only again at the end.
func (r *Runtime) mountArgs(mounts []sandbox.Mount) []string {
	var args, overlays []string
	seen := map[string]bool{}
	for _, m := range mounts {
		if _, err := os.Lstat(m.Target); err == nil {
			continue // an existing mount point
		}
		a := filepath.Dir(m.Target)
		for {
			if _, err := os.Lstat(a); err == nil || a == "/" {
				break
			}
			a = filepath.Dir(a)
		}
		if real, err := filepath.EvalSymlinks(a); err == nil {
			a = real
		}
		if seen[a] || !r.underSystemDir(a) {
			continue
		}
		seen[a] = true
		overlays = append(overlays, a)
		args = append(args, "--tmpfs", a)
		ents, _ := os.ReadDir(a)
		for _, e := range ents {
			p := filepath.Join(a, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				if t, err := os.Readlink(p); err == nil {
					args = append(args, "--symlink", t, p)
				}
				continue
			}
			args = append(args, "--ro-bind-try", p, p)
		}
	}
	for _, m := range mounts {
		target := m.Target
		if dir, err := filepath.EvalSymlinks(filepath.Dir(target)); err == nil {
			target = filepath.Join(dir, filepath.Base(target))
		}
		if m.Writable {
			args = append(args, "--bind", m.Source, target)
		} else {
			args = append(args, "--ro-bind", m.Source, target)
		}
	}
	for _, o := range overlays {
		args = append(args, "--remount-ro", o)
	}
	return args
}

func (r *Runtime) underSystemDir(p string) bool {
	for _, d := range r.opts.SystemDirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real
		}
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// reachable reports whether uid:gid may traverse every folder down to dir
// (bwrap, running as that user, must open it).
func reachable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		s, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		m := st.Mode().Perm()
		okx := m&0o001 != 0 || int(s.Uid) == uid && m&0o100 != 0 || int(s.Gid) == gid && m&0o010 != 0
		if !okx {
			return fmt.Errorf("%s is mode %v owned by %d:%d", d, m, s.Uid, s.Gid)
		}
		if d == "/" || d == filepath.Dir(d) {
			return nil
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
