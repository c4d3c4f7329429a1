// Package sandbox runs untrusted agent work: the runtimes that create
// per-request sandboxes (Docker, local bubblewrap), the chat workspaces they
// mount, confined file operations, command execution, and the housekeeping
// that keeps a host clean (reaper, workspace retention).
//
// Implementations live in sub-packages, one per runtime (sandbox/docker,
// sandbox/local, sandbox/kubernetes); this package holds the contracts and
// the shared pieces. A command runs the same way on each: ExecWith and
// StartWith check the request, and Procs.Start wraps the runtime's
// Execution (how its engine carries the output, kills the command and
// reads its exit) in the one Process type, Proc, which owns the output
// streams, the timeout, cancellation and the kill.
//
// Workspaces are the agent's: the host never opens a FIFO, socket or
// device in one, and every file operation ends with its caller's context
// (see Workspace). A workspace's disk use is limited (sandbox.max_disk) by
// making it a loop-mounted ext4 image of that size while it is in use: on
// a plain Docker host there is no project quota to use, and only a
// filesystem of its own stops every write, from any process, with ENOSPC.
// Without root the limit is measured instead, and a turn that passes it is
// stopped (DiskWatch). See DiskMode for the reasons and the details.
package sandbox

import (
	"context"
	"io"
	"time"
)

// Workdir is where a chat's workspace appears inside every sandbox.
const Workdir = "/workspace"

// Labels put on everything a runtime creates, so the reaper can tell ours
// from anything else on the host.
const (
	LabelProduct  = "dev.agentbox.product" // value "agentbox"
	LabelInstance = "dev.agentbox.instance"
	LabelUser     = "dev.agentbox.user"
	LabelChat     = "dev.agentbox.chat"
	LabelCreated  = "dev.agentbox.created" // RFC 3339
	// LabelIsolation is the sandbox's isolation level (IsolationRunc, ...).
	LabelIsolation = "dev.agentbox.isolation"
)

// Network modes a sandbox may be given.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// Runtime creates sandboxes. Implementations are safe for concurrent use.
type Runtime interface {
	// Name is the registry name: "docker" or "local".
	Name() string
	// Create starts a sandbox for spec. The caller must call Remove on the
	// returned Sandbox, also when ctx ends; Create cleans up after itself
	// when it fails.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Close releases the runtime's own resources (clients, goroutines).
	Close(ctx context.Context) error
}

// Spec says what sandbox to create.
type Spec struct {
	UserID string
	ChatID string
	// Workspace is the chat's acquired workspace (Workspaces.Acquire); its
	// folder, Workspace.Dir(), is mounted read-write at Workdir and
	// Sandbox.Workspace returns it. The caller keeps it acquired until the
	// sandbox is removed.
	Workspace *Workspace
	// Image is the container image (docker); ignored by local.
	Image string
	// MemoryBytes limits memory (0: runtime default). Swap equals memory.
	MemoryBytes int64
	// CPUs limits CPU (0: runtime default).
	CPUs float64
	// PidsLimit limits processes (0: runtime default).
	PidsLimit int64
	// Network is NetworkNone or NetworkHost ("" means the runtime default).
	Network string
	// Isolation is the boundary between the sandbox and the host's kernel:
	// IsolationRunc ("" too), IsolationGVisor or IsolationKata. A runtime
	// that cannot give it refuses the spec (ErrIsolation).
	Isolation string
	// Env is set for every process in the sandbox. Secrets belong here (or
	// in ExecRequest.Env), never in argv.
	Env map[string]string
	// Mounts are extra host paths made visible read-only (or read-write
	// when Writable is set: only for sockets).
	Mounts []Mount
	// Hide names folders (ending in "/") and files at the workspace's
	// root that processes in the sandbox see empty and read-only, when the
	// workspace has them as it is created, while the host's files stay as
	// they are: where a CLI reads project configuration that none of its
	// switches turns off, so that nothing the agent writes there
	// configures a later run (executor.Hider). See PrepareHide.
	Hide []string
	// Labels are added to the runtime's own labels.
	Labels map[string]string
}

// Mount is an extra bind mount.
type Mount struct {
	Source   string
	Target   string
	Writable bool
}

// Sandbox is one live sandbox. Methods are safe for concurrent use.
type Sandbox interface {
	// ID identifies the sandbox on its runtime (container id, process id).
	ID() string
	// Workspace gives confined access to the mounted workspace from the
	// host side.
	Workspace() *Workspace
	// Exec runs a command to completion and returns its captured output.
	// A non-zero exit is not an error (see ExecResult.ExitCode); a timeout
	// is ErrExecTimeout and kills the whole process tree.
	Exec(ctx context.Context, req ExecRequest) (*ExecResult, error)
	// Start runs a command and streams its output. The caller must Wait.
	Start(ctx context.Context, req ExecRequest) (Process, error)
	// Remove stops every process and removes the sandbox. It is idempotent
	// and also succeeds when the sandbox is already gone; the workspace is
	// kept.
	Remove(ctx context.Context) error
}

// ExecRequest is a command to run inside a sandbox.
type ExecRequest struct {
	// Argv is the program and its arguments. With Shell set, Argv must have
	// one element, run as a /bin/sh -c script.
	Argv  []string
	Shell bool
	Env   map[string]string
	// Dir is the working directory, relative to Workdir or absolute under
	// it; created when missing. "" means Workdir.
	Dir   string
	Stdin io.Reader
	// Timeout bounds the run (0: none besides ctx).
	Timeout time.Duration
	// MaxOutput caps each of stdout and stderr as captured by Exec
	// (0: DefaultMaxOutput). Start does not cap.
	MaxOutput int
}

// DefaultMaxOutput is the default cap on captured stdout and stderr.
const DefaultMaxOutput = 1 << 20

// ExecResult is the outcome of Exec.
type ExecResult struct {
	ExitCode  int           `json:"exit_code"`
	Stdout    string        `json:"stdout"`
	Stderr    string        `json:"stderr"`
	Truncated bool          `json:"truncated"`
	Cwd       string        `json:"cwd"`
	Duration  time.Duration `json:"duration"`
}

// Process is a command started with Start.
type Process interface {
	// Stdout streams the command's standard output as it is written.
	Stdout() io.Reader
	// Stderr streams the command's standard error.
	Stderr() io.Reader
	// Wait waits for the command to exit and returns its exit code. It
	// returns ErrExecTimeout after the request's timeout, and ctx's error
	// when ctx ends first (the process tree is then killed).
	Wait(ctx context.Context) (int, error)
	// Kill stops the whole process tree. It is idempotent.
	Kill() error
}
